package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/signin"
)

// serverConfig is the server.Config of the serve settings over the store
// db.
func (c *config) serverConfig(db *database.DB, logger *slog.Logger) server.Config {
	domains, _ := c.oidcDomains() // validated at start
	return server.Config{
		DB:                   db,
		DataDir:              c.DataDir,
		Keys:                 c.keyOptions(),
		Catalog:              c.Catalog,
		CatalogKeys:          c.CatalogKeys,
		CatalogRefresh:       c.CatalogRefresh,
		AdminToken:           c.AdminToken,
		AllowUpstreams:       c.AllowUpstreams,
		PublicURL:            c.PublicURL,
		CallerJWTIssuer:      c.CallerJWTIssuer,
		CallerJWTAudience:    c.CallerJWTAudience,
		CallerJWTKeys:        c.CallerJWTKeys,
		CallerJWTMaxLifetime: c.CallerJWTMaxLifetime,
		MCPAllowedOrigins:    c.MCPAllowedOrigins,
		MCPAuthServers:       c.MCPAuthServers,
		MCPIssuer:            c.MCPIssuer,
		MCPJWKSURL:           c.MCPJWKSURL,
		MCPScopes:            c.MCPScopes,
		ShutdownTimeout:      c.ShutdownTimeout,
		OIDCIssuers:          c.oidcIssuers(),
		OIDCDomains:          domains,
		Audit: audit.WriterOptions{Buffer: c.AuditMemoryRows, SpoolDir: c.AuditSpoolDir,
			SpoolRows: int64(c.AuditSpoolRows), AtFull: audit.AtFull(c.AuditAtFull)},
		Logger: logger,
	}
}

// newServer prints the effective configuration, opens the store and
// builds the server over it. The caller closes the server, then the
// store.
func newServer(ctx context.Context, cfg *config, logger *slog.Logger) (*server.Server, *database.DB, error) {
	logger.Info("starting switchboard", "config", cfg.logValue())
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	s, err := server.New(ctx, cfg.serverConfig(db, logger))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return s, db, nil
}

func serve(ctx context.Context, cfg *config, logger *slog.Logger, stderr io.Writer) error {
	s, db, err := newServer(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	defer s.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	// The first operator token is generated only now that the server can
	// be reached, so a failed start never stores a token nobody saw.
	token, rec, err := s.Operators().GenerateFirst(ctx)
	if err != nil {
		ln.Close()
		return fmt.Errorf("generating the operator token: %w", err)
	}
	if !token.IsZero() {
		// Printed once, to the terminal, never into the JSON log.
		fmt.Fprintf(stderr, "\n%s\n  Operator token for the admin API (shown once; only its hash is stored):\n\n    %s\n\n  export SWITCHBOARD_ADMIN_TOKEN=%s\n%s\n\n",
			strings.Repeat("=", 72), token.Reveal(), token.Reveal(), strings.Repeat("=", 72))
		logger.Warn("generated the first operator token and printed it on the terminal (shown once)", "token_id", rec.ID)
	}
	if cfg.DebugAddr != "" {
		stop, err := startDebug(cfg.DebugAddr, logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	logger.Info("listening", "addr", ln.Addr().String())
	return s.Serve(ctx, ln)
}

func migrate(ctx context.Context, cfg *config, logger *slog.Logger) error {
	db, err := database.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	ran, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "store", db.Dialect, "applied", ran)
	return nil
}

// oidcIssuers is the OpenID Connect issuer of the settings, if any.
func (c *config) oidcIssuers() []signin.OIDCIssuer {
	if c.OIDCIssuer == "" {
		return nil
	}
	return []signin.OIDCIssuer{{Name: "default", Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: c.OIDCClientSecret}}
}
