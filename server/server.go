// Package server assembles Switchboard: it opens the store, loads the
// master keys and the connector catalog, wires the domain packages
// (tenants, auth, gateway, verify, audit) and mounts every HTTP surface
// (admin API, MCP, App mode, OAuth connect pages) into one handler. It is
// the one constructor used by switchboard serve, by every end-to-end test
// and by the benchmarks, so that what is tested is what is served.
package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
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
	"github.com/switchboardhq/switchboard/console"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
	"github.com/switchboardhq/switchboard/verify"
)

// Config is what a server is built from: the operator's settings, and
// the parts tests replace (the fields under "Replaceable").
type Config struct {
	// DB is the open, migrated store (see switchboard serve's openStore).
	// Close leaves it open: whoever opened it closes it.
	DB *database.DB
	// DataDir holds the catalog cache and the verification commands'
	// temporary files; empty uses the system's temporary directory for
	// the latter.
	DataDir string
	// Keys says where the master key comes from.
	Keys secrets.KeyOptions
	// Catalog is an https:// URL, a directory, or empty for the built-in
	// catalog. CatalogKeys, when set, are the trusted signing keys of its
	// index; CatalogRefresh is how often a catalog URL is downloaded
	// again.
	Catalog        string
	CatalogKeys    []ed25519.PublicKey
	CatalogRefresh time.Duration
	// AdminToken is the operator token of SWITCHBOARD_ADMIN_TOKEN; its
	// hash is stored at start. Without one, serve generates the first
	// token once it listens (Operators().GenerateFirst).
	AdminToken secrets.Secret
	// AllowUpstreams are the address ranges the egress guard lets
	// upstream calls reach despite being private or loopback.
	AllowUpstreams []netip.Prefix
	// PublicURL is the server's public base URL (OAuth redirect URIs,
	// connect URLs, MCP resource URLs).
	PublicURL string
	// CallerJWTIssuer, CallerJWTAudience and CallerJWTKeys (a PEM file of
	// public keys) enable platform-signed caller JWTs, which live at most
	// CallerJWTMaxLifetime.
	CallerJWTIssuer      string
	CallerJWTAudience    string
	CallerJWTKeys        string
	CallerJWTMaxLifetime time.Duration
	// MCPAllowedOrigins are the browser origins allowed to call MCP
	// endpoints besides PublicURL's.
	MCPAllowedOrigins []string
	// MCPAuthServers, MCPIssuer, MCPJWKSURL and MCPScopes turn on MCP
	// authorization (OAuth access tokens beside caller credentials).
	MCPAuthServers []string
	MCPIssuer      string
	MCPJWKSURL     string
	MCPScopes      []string
	// OIDCIssuers turn on OpenID Connect sign-in for people;
	// OIDCDomains maps a tenant's slug to the email domains that may
	// join it by signing in (unlisted tenants are invitation only).
	OIDCIssuers []signin.OIDCIssuer
	OIDCDomains map[string][]string
	// ShutdownTimeout is how long Serve drains in-flight requests.
	ShutdownTimeout time.Duration
	// Audit configures the audit writer (memory and spool bounds, what
	// to do when both are full, the write interval); its Logger is the
	// server's.
	Audit audit.WriterOptions

	// Replaceable.

	// Logger receives every log line; nil discards them.
	Logger *slog.Logger
	// Now is the clock of token expiry; nil is time.Now.
	Now func() time.Time
	// UpstreamClient reaches upstream APIs, token endpoints and hosted
	// MCP servers; nil builds the egress client from AllowUpstreams.
	UpstreamClient *http.Client
	// Keyring is used instead of loading Keys.
	Keyring *secrets.Keyring
	// ConnectorCatalog is used instead of loading Catalog.
	ConnectorCatalog *registry.Catalog
}

// Server is an assembled Switchboard.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	db      *database.DB
	handler http.Handler

	operators  *auth.Operators
	catalog    *registry.Catalog
	remote     *registry.Remote
	tenants    *tenants.Service
	gateway    *gateway.Gateway
	oauth      *auth.OAuth
	providers  *auth.Providers
	audit      *audit.Writer
	auditStore *audit.Store
	members    *members.Store
	signin     *signin.Handler
}

// New loads the keys and the catalog and wires the handlers over the
// store cfg.DB.
func New(ctx context.Context, cfg Config) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DB == nil {
		return nil, errors.New("server: no store")
	}
	s := &Server{cfg: cfg, logger: logger, db: cfg.DB}
	db := s.db
	if err := db.Ready(ctx); err != nil {
		logger.Warn("store not ready; /readyz reports 503 until it is", "reason", err.Error())
	}

	keys := cfg.Keyring
	if keys == nil {
		k, src, err := secrets.LoadKeyring(cfg.Keys)
		if err != nil {
			return nil, err
		}
		switch src {
		case secrets.KeyFileCreated:
			logger.Warn("created a new master key file; back it up: without it stored secrets cannot be decrypted",
				"path", cfg.Keys.File, "key_id", k.PrimaryID())
		default:
			logger.Info("master key loaded", "source", string(src), "key_id", k.PrimaryID())
		}
		keys = k
	}

	s.catalog = cfg.ConnectorCatalog
	if s.catalog == nil {
		cat, remote, err := LoadCatalog(ctx, cfg)
		if err != nil {
			return nil, err
		}
		s.catalog, s.remote = cat, remote
		for _, p := range cat.Problems() {
			logger.Warn("connector refused", "reason", p.Error())
		}
		logger.Info("catalog loaded", "connectors", len(cat.List()))
	}
	cat := s.catalog

	secretStore := secrets.NewStore(db, keys)
	tenantStore := tenants.NewStore(db, secretStore)
	tenantSvc := tenants.NewService(tenantStore, cat)
	s.tenants = tenantSvc
	operators := auth.NewOperators(db)
	s.operators = operators
	if err := operators.UseEnvToken(ctx, cfg.AdminToken.Reveal()); err != nil {
		return nil, fmt.Errorf("setting up the operator token: %w", err)
	}

	client := cfg.UpstreamClient
	if client == nil {
		client = egress.NewClient(egress.Config{Allow: cfg.AllowUpstreams})
	}
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
	s.providers = auth.NewProviders(db, secretStore, cfg.PublicURL)
	s.oauth = auth.NewOAuth(auth.OAuthConfig{
		DB: db, Secrets: secretStore, Providers: s.providers, HTTPClient: client, PublicURL: cfg.PublicURL, Logger: logger, Now: cfg.Now,
	})
	appAuth := auth.NewAppAuth()
	s.oauth.Register(appAuth)
	s.auditStore = audit.NewStore(db)
	auditOpts := cfg.Audit
	auditOpts.Logger = logger
	var err error
	if s.audit, err = audit.NewWriter(s.auditStore, auditOpts); err != nil {
		return nil, err
	}
	s.members = members.NewStore(db, s.audit, members.Options{Now: cfg.Now})
	gw := gateway.New(gateway.Config{
		Tenants:    tenantSvc,
		Catalog:    cat,
		Callers:    callers,
		AppAuth:    appAuth,
		Dispatcher: &registry.Dispatcher{Client: client},
		Logger:     logger,
		Audit:      s.audit,
		// Hosted MCP servers (mcp_remote) are reached through the same
		// egress policy as every upstream.
		RemoteClient: client,
	})
	s.gateway = gw
	// The caches of the call path follow the tenants' changes, and
	// installs are verified before they are saved.
	tenantSvc.Subscribe(gw.Invalidate)
	tenantSvc.Subscribe(callers.Invalidate)
	verifyDir := "" // the system's temporary directory
	if cfg.DataDir != "" {
		verifyDir = filepath.Join(cfg.DataDir, "verify")
	}
	tenantSvc.SetVerifier(verify.New(verify.Config{Gateway: gw, Logger: logger, Dir: verifyDir}))

	s.signin = signin.New(signin.Config{Members: s.members, PublicURL: cfg.PublicURL, Logger: logger,
		OIDC: signin.OIDCConfig{Issuers: cfg.OIDCIssuers, Domains: cfg.OIDCDomains, Tenants: tenantSvc, HTTPClient: client}})
	callers.SetMembers(memberCheck{s.members})
	// A removed member is no longer a user callers may name, on any replica.
	s.members.OnRemoval(func(r members.Removal) { callers.ForgetMember(r.Tenant, r.UserID) })
	flows := connectflow.New(connectflow.Config{Gateway: gw, OAuth: s.oauth, Logger: logger,
		Sessions: sessionCheck{store: s.members, signin: s.signin}})
	admin := api.New(api.Config{
		Tenants:   tenantSvc,
		Operators: operators,
		Catalog:   cat,
		Logger:    logger,
		Ready:     db.Ready,
		Providers: s.providers,
		Audit:     s.auditStore,
		Tester:    gw,
		APIKeys:   tenants.NewAPIKeys(db),
		Grants:    connectflow.NewGrants(gw, s.oauth),
		Members:   s.members,
		PublicURL: cfg.PublicURL,

		// Members signed in with a session cookie.
		Session:        signin.SessionOf,
		SessionCookies: s.signin.Authenticate,
		AuditLog:       s.audit,
		// Connect links are minted by the flow pages, which know callers.
		ConnectLinks: flows,
	})
	mcpOpts := mcp.Options{Logger: logger, PublicURL: cfg.PublicURL, AllowedOrigins: cfg.MCPAllowedOrigins}
	if len(cfg.MCPAuthServers) > 0 {
		mcpOpts.Authorization = &mcp.Authorization{
			AuthorizationServers: cfg.MCPAuthServers, Issuer: cfg.MCPIssuer, JWKSURL: cfg.MCPJWKSURL, Scopes: cfg.MCPScopes,
		}
	}
	root := admin.Router()
	mountAgentPath(root, agentSurfaces{
		app:      appmode.New(gw, logger),
		flows:    flows,
		mcp:      mcp.NewHandler(gw, mcpOpts),
		resource: mcp.ProtectedResourceHandler(mcpOpts),
	})
	pages, err := console.New(console.Config{Catalog: cat, Tenants: tenantSvc, PublicURL: cfg.PublicURL, Access: console.SignInAccess(s.signin, s.members), Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages.Mount(root)
	// People's sign-in pages (the handler routes by method and path).
	root.Any(signin.Prefix+"*", serve(s.signin.ServeHTTP))
	s.handler = api.RequestLog(logger, root)
	return s, nil
}

// LoadCatalog loads the catalog of cfg: from an https:// URL (cached under the
// data directory; the returned Remote refreshes it), a directory, or the
// built-in one. Catalog keys, when configured, apply to all three.
func LoadCatalog(ctx context.Context, cfg Config) (*registry.Catalog, *registry.Remote, error) {
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

// Handler is every HTTP surface of the server, behind request logging.
func (s *Server) Handler() http.Handler { return s.handler }

// Operators holds the operator tokens of the admin API.
func (s *Server) Operators() *auth.Operators { return s.operators }

// DB is the server's store.
func (s *Server) DB() *database.DB { return s.db }

// Tenants is the server's tenant service.
func (s *Server) Tenants() *tenants.Service { return s.tenants }

// Gateway is the server's call path.
func (s *Server) Gateway() *gateway.Gateway { return s.gateway }

// OAuth is the server's token machinery of the OAuth modes.
func (s *Server) OAuth() *auth.OAuth { return s.oauth }

// Providers is the server's registry of central OAuth providers.
func (s *Server) Providers() *auth.Providers { return s.providers }

// Audit is the server's audit writer.
func (s *Server) Audit() *audit.Writer { return s.audit }

// AuditStore is the server's audit log.
func (s *Server) AuditStore() *audit.Store { return s.auditStore }

// SignIn is the server's sign-in handler; its Authenticate is the echo
// middleware that admits /v1 requests made with a session cookie.
func (s *Server) SignIn() *signin.Handler { return s.signin }

// Members is the server's store of members, invitations and sessions.
func (s *Server) Members() *members.Store { return s.members }

// Listen runs the background work of a replica until ctx is done: the
// remote catalog's refresh, and the Postgres LISTEN/NOTIFY listeners
// through which changes other replicas make (a revoked caller, an edited
// instance, a disconnected grant, a removed member) reach this replica's caches. It
// returns at once; the listeners stop with ctx.
func (s *Server) Listen(ctx context.Context) {
	if s.remote != nil {
		go s.remote.Run(ctx, s.catalog, s.cfg.CatalogRefresh, s.logger)
	}
	go s.tenants.Listen(ctx, func(err error) {
		s.logger.Warn("replica change notifications", "err", err.Error())
	})
	go s.oauth.Listen(ctx, func(err error) {
		s.logger.Warn("replica grant notifications", "err", err.Error())
	})
	go s.members.Listen(ctx, func(err error) {
		s.logger.Warn("replica member removal notifications", "err", err.Error())
	})
}

// Serve serves on ln, with the background listeners, until ctx is done;
// then it drains in-flight requests for the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	bg, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	s.Listen(bg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.logger.Info("shutting down", "drain", s.cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
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
	s.logger.Info("stopped")
	return nil
}

// Close flushes the audit log (writing or spooling what is pending). The
// store stays open.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.audit.Close(ctx)
	return nil
}
