package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/signin"
)

// serverConfig is the server.Config of the serve settings over the store
// db.
func (c *config) serverConfig(db *database.DB, logger *slog.Logger) server.Config {
	domains, _ := c.oidcDomains() // validated at start
	issuers, _ := c.oidcIssuers()
	limits, _ := c.limits()
	budgets, _ := c.clientBudgets()
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
		MCPContextBudget:     c.MCPContextBudget,
		ShutdownTimeout:      c.ShutdownTimeout,
		ShutdownDelay:        c.ShutdownDelay,
		OTLPEndpoint:         c.OTLPEndpoint,
		TraceSampleRatio:     c.TraceSampleRatio,
		CacheBudget:          int64(c.CacheBudgetMB) << 20,
		CacheTTL:             c.CacheTTL,
		Local: mcplocal.Config{PerTenant: c.LocalPerTenant, Total: c.LocalTotal, IdleTimeout: c.LocalIdleTimeout,
			CallTimeout: c.LocalCallTimeout, Limits: mcplocal.Limits{CPU: c.LocalCPU, Memory: int64(c.LocalMemoryMB) << 20}},
		AuthFailureLimit:   authFailureLimit(c.AuthFailuresPerMinute),
		TrustedProxies:     c.TrustedProxies,
		AuditRetentionDays: c.AuditRetentionDays,
		OIDCIssuers:        issuers,
		OIDCDomains:        domains,
		Admission: admission.Options{Defaults: limits, Clients: budgets, QueueWait: c.LimitQueueWait,
			IgnoreUpstreamWaits: c.UpstreamWaits == "ignore"},
		Audit: audit.WriterOptions{Buffer: c.AuditMemoryRows, SpoolDir: c.AuditSpoolDir,
			SpoolRows: int64(c.AuditSpoolRows), AtFull: audit.AtFull(c.AuditAtFull), JournalSync: journalSync(c.AuditJournalSync)},
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
		// Without the link the token is still printed: it is stored now.
		link, err := firstStartLink(ctx, s, cfg.PublicURL, logger)
		if err != nil {
			logger.Error("no first-start sign-in link: mint one with switchboard admin login-link --operator", "error", err.Error())
		}
		// Printed once, to the terminal, never into the JSON log.
		fmt.Fprintf(stderr, "\n%s\n%s  Operator token for the admin API and automation (shown once; only its hash is stored):\n\n    %s\n\n  export SWITCHBOARD_ADMIN_TOKEN=%s\n%s\n\n",
			strings.Repeat("=", 72), link, token.Reveal(), token.Reveal(), strings.Repeat("=", 72))
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
	if cfg.MetricsAddr != "" {
		stop, err := startMetrics(cfg.MetricsAddr, s.MetricsHandler(), logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	logger.Info("listening", "addr", ln.Addr().String())
	return s.Serve(ctx, ln)
}

// firstStartLink mints the first start's operator sign-in link
// (members.FirstStartLink: once per store, single use, 24 h) and returns
// the lines that print it, or none when this store's was minted before
// (the operator tokens were all revoked since: a new token is generated,
// but the console's door is then "switchboard admin login-link
// --operator").
func firstStartLink(ctx context.Context, s *server.Server, publicURL string, logger *slog.Logger) (string, error) {
	if s.Members() == nil {
		return "", nil
	}
	l, token, err := s.Members().FirstStartLink(ctx, "first start")
	if err != nil {
		return "", fmt.Errorf("minting the first start's sign-in link: %w", err)
	}
	if token.IsZero() {
		return "", nil
	}
	logger.Warn("minted the first start's operator sign-in link and printed it on the terminal (shown once)",
		"link_id", l.ID, "expires_at", l.ExpiresAt)
	return fmt.Sprintf("  Open the web console: this sign-in link makes this browser the platform operator's.\n"+
		"  It works once, until %s, and is shown once:\n\n    %s\n\n",
		l.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), signin.LinkURL(publicURL, token.Reveal())), nil
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

// journalSync maps --audit-journal-sync to the writer's option, where 0
// means the default and a negative interval no periodic fsync.
func journalSync(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// authFailureLimit maps --auth-failures-per-minute to the server's
// setting, where 0 means the default and a negative value turns the
// limit off.
func authFailureLimit(perMinute int) int {
	if perMinute == 0 {
		return -1
	}
	return perMinute
}
