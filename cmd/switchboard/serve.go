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
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// app is a wired server: everything serve needs, built once at start.
type app struct {
	cfg     *config
	logger  *slog.Logger
	db      *database.DB
	handler http.Handler
	// generatedAdminToken is set when this start created the operator
	// token; serve prints it once.
	generatedAdminToken secrets.Secret
}

// newApp opens the store, loads keys and the catalog, and wires the
// handlers. On the embedded store it applies migrations.
func newApp(ctx context.Context, cfg *config, logger *slog.Logger) (*app, error) {
	logger.Info("starting switchboard", "config", cfg.logValue())
	db, err := database.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir)
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
	if db.Dialect == "sqlite" {
		ran, err := db.Migrate(ctx)
		if err != nil {
			return nil, fmt.Errorf("migrating the embedded store: %w", err)
		}
		logger.Info("embedded store ready", "path", db.Path, "migrations_applied", len(ran))
	} else if err := db.Ready(ctx); err != nil {
		logger.Warn("store not ready; /readyz reports 503 until it is", "reason", err.Error())
	}

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

	cat, err := loadCatalog(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	for _, p := range cat.Problems() {
		logger.Warn("connector refused", "reason", p.Error())
	}
	logger.Info("catalog loaded", "connectors", len(cat.List()))

	secretStore := secrets.NewStore(db, keys)
	tenantStore := tenants.NewStore(db, secretStore)
	tenantSvc := tenants.NewService(tenantStore, cat)
	operators := auth.NewOperators(db)
	if a.generatedAdminToken, err = operators.Ensure(ctx, cfg.AdminToken.Reveal()); err != nil {
		return nil, fmt.Errorf("setting up the operator token: %w", err)
	}

	client := egress.NewClient(egress.Config{Allow: cfg.AllowUpstreams})
	gw := gateway.New(gateway.Config{
		Tenants:    tenantSvc,
		Catalog:    cat,
		Callers:    auth.NewCallers(tenantStore),
		AppAuth:    auth.NewAppAuth(),
		Dispatcher: &registry.Dispatcher{Client: client},
		Logger:     logger,
	})
	admin := api.New(api.Config{
		Tenants:   tenantSvc,
		Operators: operators,
		Catalog:   cat,
		Logger:    logger,
		Ready:     db.Ready,
	})
	agents := http.NewServeMux()
	agents.Handle("/workspaces/{tenant}/apps/", gw.AppHandler())
	agents.Handle("/workspaces/", mcp.NewHandler(gw, mcp.Options{Logger: logger}))
	root := http.NewServeMux()
	root.Handle("/workspaces/", agents)
	root.Handle("/", admin.Handler())
	a.handler = api.RequestLog(logger, root)
	ok = true
	return a, nil
}

// loadCatalog loads the catalog directory, or the built-in one.
func loadCatalog(dir string) (*registry.Catalog, error) {
	var fsys fs.FS = catalog.FS()
	if dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("--catalog: %w", err)
		}
		fsys = os.DirFS(dir)
	}
	cat, err := registry.LoadCatalog(fsys, openapi.Compile)
	if err != nil {
		return nil, fmt.Errorf("loading the connector catalog: %w", err)
	}
	return cat, nil
}

// Close releases the store.
func (a *app) Close() error { return a.db.Close() }

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
	if !a.generatedAdminToken.IsZero() {
		// Printed once, to the terminal, never into the JSON log.
		fmt.Fprintf(stderr, "\n%s\n  Operator token for the admin API (shown once; only its hash is stored):\n\n    %s\n\n  export SWITCHBOARD_ADMIN_TOKEN=%s\n%s\n\n",
			strings.Repeat("=", 72), a.generatedAdminToken.Reveal(), a.generatedAdminToken.Reveal(), strings.Repeat("=", 72))
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
