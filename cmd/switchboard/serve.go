package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/appmode"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/connectflow"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
	"github.com/switchboardhq/switchboard/verify"
)

// app is a wired server: everything serve needs, built once at start.
type app struct {
	cfg     *config
	logger  *slog.Logger
	db      *database.DB
	handler http.Handler
	// operators holds the operator tokens; serve generates the first one
	// once its listener is bound.
	operators *auth.Operators
	// audit writes audit rows in the background; Close flushes it.
	audit *audit.Writer
	// catalog is the connector catalog; remote, when the catalog comes
	// from a URL, refreshes it while serving.
	catalog *registry.Catalog
	remote  *registry.Remote
	// tenants publishes changes to, and hears them from, other replicas;
	// oauth does so for disconnected grants.
	tenants *tenants.Service
	oauth   *auth.OAuth
}

// newApp opens the store, loads keys and the catalog, and wires the
// handlers. On the embedded store it applies migrations.
func newApp(ctx context.Context, cfg *config, logger *slog.Logger) (*app, error) {
	logger.Info("starting switchboard", "config", cfg.logValue())
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, logger: logger, db: db}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()

	keys, src, err := secrets.LoadKeyring(cfg.keyOptions())
	if err != nil {
		return nil, err
	}
	switch src {
	case secrets.KeyFileCreated:
		logger.Warn("created a new master key file; back it up: without it stored secrets cannot be decrypted",
			"path", cfg.keyFile(), "key_id", keys.PrimaryID())
	default:
		logger.Info("master key loaded", "source", string(src), "key_id", keys.PrimaryID())
	}

	cat, remote, err := loadCatalog(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.catalog, a.remote = cat, remote
	for _, p := range cat.Problems() {
		logger.Warn("connector refused", "reason", p.Error())
	}
	logger.Info("catalog loaded", "connectors", len(cat.List()))

	secretStore := secrets.NewStore(db, keys)
	tenantStore := tenants.NewStore(db, secretStore)
	tenantSvc := tenants.NewService(tenantStore, cat)
	a.tenants = tenantSvc
	operators := auth.NewOperators(db)
	a.operators = operators
	if err := operators.UseEnvToken(ctx, cfg.AdminToken.Reveal()); err != nil {
		return nil, fmt.Errorf("setting up the operator token: %w", err)
	}

	client := egress.NewClient(egress.Config{Allow: cfg.AllowUpstreams})
	callers := auth.NewCallers(tenantStore)
	if cfg.CallerJWTKeys != "" {
		pemKeys, err := os.ReadFile(cfg.CallerJWTKeys)
		if err != nil {
			return nil, fmt.Errorf("--caller-jwt-keys: %w", err)
		}
		keys, err := auth.ParsePublicKeys(pemKeys)
		if err != nil {
			return nil, fmt.Errorf("--caller-jwt-keys: %w", err)
		}
		callers.SetJWT(&auth.CallerJWT{Issuer: cfg.CallerJWTIssuer, Audience: cfg.CallerJWTAudience, Keys: keys,
			MaxLifetime: cfg.CallerJWTMaxLifetime})
	}
	providers := auth.NewProviders(db, secretStore, cfg.PublicURL)
	oauth := auth.NewOAuth(auth.OAuthConfig{
		DB: db, Secrets: secretStore, Providers: providers, HTTPClient: client, PublicURL: cfg.PublicURL, Logger: logger,
	})
	a.oauth = oauth
	appAuth := auth.NewAppAuth()
	oauth.Register(appAuth)
	auditStore := audit.NewStore(db)
	if a.audit, err = audit.NewWriter(auditStore, audit.WriterOptions{Logger: logger, Buffer: cfg.AuditMemoryRows,
		SpoolDir: cfg.AuditSpoolDir, SpoolRows: int64(cfg.AuditSpoolRows), AtFull: audit.AtFull(cfg.AuditAtFull)}); err != nil {
		return nil, err
	}
	gw := gateway.New(gateway.Config{
		Tenants:    tenantSvc,
		Catalog:    cat,
		Callers:    callers,
		AppAuth:    appAuth,
		Dispatcher: &registry.Dispatcher{Client: client},
		Logger:     logger,
		Audit:      a.audit,
		// Hosted MCP servers (mcp_remote) are reached through the same
		// egress policy as every upstream.
		RemoteClient: client,
	})
	tenantSvc.Subscribe(gw.Invalidate)
	tenantSvc.Subscribe(callers.Invalidate)
	tenantSvc.SetVerifier(verify.New(verify.Config{Gateway: gw, Logger: logger, Dir: filepath.Join(cfg.DataDir, "verify")}))
	admin := api.New(api.Config{
		Tenants:   tenantSvc,
		Operators: operators,
		Catalog:   cat,
		Logger:    logger,
		Ready:     db.Ready,
		Providers: providers,
		Audit:     auditStore,
		Tester:    gw,
	})
	agents := http.NewServeMux()
	agents.Handle("/workspaces/{tenant}/apps/", appmode.NewHandler(gw, logger))
	flows := connectflow.NewHandler(connectflow.Config{Gateway: gw, OAuth: oauth, Logger: logger})
	agents.Handle(connectflow.Pattern, flows)
	mcpOpts := mcp.Options{Logger: logger, PublicURL: cfg.PublicURL, AllowedOrigins: cfg.MCPAllowedOrigins}
	if len(cfg.MCPAuthServers) > 0 {
		mcpOpts.Authorization = &mcp.Authorization{
			AuthorizationServers: cfg.MCPAuthServers, Issuer: cfg.MCPIssuer, JWKSURL: cfg.MCPJWKSURL, Scopes: cfg.MCPScopes,
		}
	}
	agents.Handle("/workspaces/", mcp.NewHandler(gw, mcpOpts))
	root := http.NewServeMux()
	root.Handle("/workspaces/", agents)
	root.Handle(mcp.WellKnownPrefix+"/", mcp.ProtectedResourceHandler(mcpOpts))
	root.Handle(auth.CentralCallbackPath, flows)
	root.Handle("/", admin.Handler())
	a.handler = api.RequestLog(logger, root)
	ok = true
	return a, nil
}

// loadCatalog loads the catalog: from an https:// URL (cached under the
// data directory; the returned Remote refreshes it), a directory, or the
// built-in one. Catalog keys, when configured, apply to all three.
func loadCatalog(ctx context.Context, cfg *config) (*registry.Catalog, *registry.Remote, error) {
	opts := registry.LoadOptions{Keys: cfg.CatalogKeys}
	if strings.HasPrefix(cfg.Catalog, "https://") {
		remote := &registry.Remote{
			URL:      cfg.Catalog,
			CacheDir: filepath.Join(cfg.DataDir, "catalog-cache"),
			Keys:     cfg.CatalogKeys,
			Compile:  openapi.Compile,
		}
		cat, err := remote.Load(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("loading the connector catalog: %w", err)
		}
		return cat, remote, nil
	}
	var fsys fs.FS = catalog.FS()
	if cfg.Catalog != "" {
		if _, err := os.Stat(cfg.Catalog); err != nil {
			return nil, nil, fmt.Errorf("--catalog: %w", err)
		}
		fsys = os.DirFS(cfg.Catalog)
	}
	cat, err := registry.LoadCatalogWith(fsys, openapi.Compile, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the connector catalog: %w", err)
	}
	return cat, nil, nil
}

// Close flushes the audit log and releases the store.
func (a *app) Close() error {
	if a.audit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a.audit.Close(ctx)
		cancel()
	}
	return a.db.Close()
}

// serveOn serves until ctx is done, then drains for the shutdown timeout.
func (a *app) serveOn(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
	}
	bg, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	if a.remote != nil {
		go a.remote.Run(bg, a.catalog, a.cfg.CatalogRefresh, a.logger)
	}
	// Changes other replicas make (a revoked caller, an edited instance)
	// reach this replica's caches through Postgres LISTEN/NOTIFY.
	go a.tenants.Listen(bg, func(err error) {
		a.logger.Warn("replica change notifications", "err", err.Error())
	})
	go a.oauth.Listen(bg, func(err error) {
		a.logger.Warn("replica grant notifications", "err", err.Error())
	})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.logger.Info("shutting down", "drain", a.cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Calls still running are cut, so that they end (and record
		// their audit rows, which Close then writes or spools) now.
		_ = srv.Close()
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	a.logger.Info("stopped")
	return nil
}

func serve(ctx context.Context, cfg *config, logger *slog.Logger, stderr io.Writer) error {
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	// The first operator token is generated only now that the server can
	// be reached, so a failed start never stores a token nobody saw.
	token, rec, err := a.operators.GenerateFirst(ctx)
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
	return a.serveOn(ctx, ln)
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
