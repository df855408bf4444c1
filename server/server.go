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
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
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
	"github.com/switchboardhq/switchboard/metrics"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenantmcp"
	"github.com/switchboardhq/switchboard/tenants"
	"github.com/switchboardhq/switchboard/tracing"
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
	// CacheBudget (bytes) and CacheTTL bound the call path's caches:
	// three quarters of the budget for resolved instances, a quarter for
	// callers. Zero keeps the packages' defaults.
	CacheBudget int64
	CacheTTL    time.Duration
	// AuthFailureLimit is how many failed authentications a minute a
	// source may have before its unknown credentials are refused without
	// a lookup: 0 keeps the default (auth.AuthFailuresPerSource), a
	// negative value turns the limit off. TrustedProxies are the
	// addresses (CIDR) of the proxies in front of the server, whose
	// X-Forwarded-For then names the source (auth.Callers.SetSources).
	AuthFailureLimit int
	TrustedProxies   []string
	// MCPAllowedOrigins are the browser origins allowed to call MCP
	// endpoints besides PublicURL's.
	MCPAllowedOrigins []string
	// MCPAuthServers, MCPIssuer, MCPJWKSURL and MCPScopes turn on MCP
	// authorization (OAuth access tokens beside caller credentials).
	MCPAuthServers []string
	MCPIssuer      string
	MCPJWKSURL     string
	MCPScopes      []string
	// MCPContextBudget is the tenants' default context budget
	// (mcp.Options.ContextBudget; 0: mcp.DefaultContextBudget).
	MCPContextBudget int
	// OIDCIssuers turn on OpenID Connect sign-in for people;
	// OIDCDomains maps a tenant's slug to the email domains that may
	// join it by signing in (unlisted tenants are invitation only).
	OIDCIssuers []signin.OIDCIssuer
	OIDCDomains map[string][]string
	// Local bounds the stdio servers of mcp_local instances (counts per
	// tenant and in total, idle and call timeouts, CPU time, memory,
	// stderr); zero members keep mcplocal's defaults. Their package files
	// and private directories live under DataDir/mcplocal (the system's
	// temporary directory without a DataDir).
	Local mcplocal.Config
	// ShutdownTimeout is how long Serve drains in-flight requests.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long Serve keeps serving once its context is
	// done, with /readyz answering 503 (shutting_down), before it closes
	// the listener: a load balancer's health checks take the replica out
	// of rotation while it still answers, so that no request meets a
	// closed port.
	ShutdownDelay time.Duration
	// OTLPEndpoint, when set, turns tracing on: the spans of agent calls
	// go to this OTLP/HTTP traces URL (package tracing).
	OTLPEndpoint string
	// TraceSampleRatio (0 to 1) is the share of calls without a caller's
	// traceparent that are traced; a caller's traceparent decides for its
	// call (parent-based). 0 traces only the calls whose caller sampled
	// them; serve's default is 1.
	TraceSampleRatio float64
	// AuditRetentionDays is how long audit rows are kept (0:
	// audit.DefaultRetentionDays); Listen deletes older ones hourly.
	AuditRetentionDays int
	// Audit configures the audit writer (memory and spool bounds, what
	// to do when both are full, the write interval); its Logger is the
	// server's.
	Audit audit.WriterOptions
	// Admission configures call admission: the operator's limits (the
	// tenants' own are kept in the store), central clients' budgets; its
	// Store, Metrics and Logger are the server's.
	Admission admission.Options

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
	callers *auth.Callers
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
	local      *mcplocal.Manager
	metrics    *metrics.Metrics
	admission  *admission.Controller
	tracer     *tracing.Tracer
	// shuttingDown is set when Serve's context is done: /readyz answers
	// 503 from then on.
	shuttingDown atomic.Bool
}

// ready is /readyz's check: the store, and not shutting down.
func (s *Server) ready(ctx context.Context) error {
	if s.shuttingDown.Load() {
		return switchboard.E(switchboard.ErrUnavailable, "shutting_down", "this replica is shutting down")
	}
	return s.db.Ready(ctx)
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
	s := &Server{cfg: cfg, logger: logger, db: cfg.DB, metrics: metrics.New()}
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
		// Compiling descriptions leaves hundreds of megabytes of garbage
		// behind; hand it back to the system now rather than over minutes.
		debug.FreeOSMemory()
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
	s.callers = callers
	callers.SetMetrics(s.metrics)
	if cfg.CacheBudget > 0 || cfg.CacheTTL > 0 {
		callers.SetCache(cfg.CacheBudget/4, cfg.CacheTTL)
	}
	if cfg.AuthFailureLimit != 0 || len(cfg.TrustedProxies) > 0 {
		trusted, err := parseCIDRs(cfg.TrustedProxies)
		if err != nil {
			return nil, fmt.Errorf("trusted proxies: %w", err)
		}
		limit := cfg.AuthFailureLimit
		if limit == 0 {
			limit = auth.AuthFailuresPerSource
		}
		callers.SetSources(max(limit, 0), trusted)
	}
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
		Metrics: s.metrics,
	})
	appAuth := auth.NewAppAuth()
	s.oauth.Register(appAuth)
	s.auditStore = audit.NewStore(db)
	s.auditStore.RetentionDays = cfg.AuditRetentionDays
	auditOpts := cfg.Audit
	auditOpts.Logger = logger
	var err error
	if s.audit, err = audit.NewWriter(s.auditStore, auditOpts); err != nil {
		return nil, err
	}
	s.members = members.NewStore(db, s.audit, members.Options{Now: cfg.Now})
	localCfg := cfg.Local
	localCfg.Logger = logger
	if cfg.DataDir != "" {
		localCfg.PackageDir = filepath.Join(cfg.DataDir, "mcplocal", "packages")
		localCfg.WorkDir = filepath.Join(cfg.DataDir, "mcplocal", "run")
	}
	s.local = mcplocal.NewManager(localCfg)
	admOpts := cfg.Admission
	admOpts.Store, admOpts.Metrics, admOpts.Logger = admission.NewStore(db), s.metrics, logger
	if db.Dialect.Replicated() {
		// Replicas share PostgreSQL: so do the rate limits' buckets.
		admOpts.Shared = admission.NewShared(db)
	}
	s.admission = admission.New(admOpts)
	if err := s.admission.Load(ctx); err != nil {
		// The defaults apply until a later read succeeds.
		logger.Warn("reading the tenants' call limits", "err", err.Error())
	}
	if s.tracer, err = tracing.New(cfg.OTLPEndpoint, serviceVersion(), cfg.TraceSampleRatio); err != nil {
		return nil, err
	}
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
		CacheBudget:  cfg.CacheBudget * 3 / 4,
		CacheTTL:     cfg.CacheTTL,
		Metrics:      s.metrics,
		Tracer:       s.tracer,
		PublicURL:    cfg.PublicURL,
		Local:        s.local,
		Admission:    s.admission,
	})
	s.gateway = gw
	s.registerGauges()
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
		OIDC:         signin.OIDCConfig{Issuers: cfg.OIDCIssuers, Domains: cfg.OIDCDomains, Tenants: tenantSvc, HTTPClient: client},
		OperatorHome: console.OperatorHome})
	callers.SetMembers(memberCheck{s.members})
	// A removed member is no longer a user callers may name, on any replica.
	s.members.OnRemoval(func(r members.Removal) { callers.ForgetMember(r.Tenant, r.UserID) })
	// A removed member's local servers (which hold their own values) stop.
	s.members.OnRemoval(func(r members.Removal) {
		s.local.Stop(func(k mcplocal.Key) bool {
			return k.User != "" && (r.All || (k.Tenant == string(r.Tenant) && k.User == r.UserID))
		})
	})
	flows := connectflow.New(connectflow.Config{Gateway: gw, OAuth: s.oauth, Logger: logger,
		Sessions: sessionCheck{store: s.members, signin: s.signin},
		// After connecting, people go back to the instance's console page.
		ConsoleURL: strings.TrimRight(cfg.PublicURL, "/") + console.Prefix})
	apiKeys := tenants.NewAPIKeys(db)
	admin := api.New(api.Config{
		Tenants:   tenantSvc,
		Operators: operators,
		Catalog:   cat,
		Logger:    logger,
		Ready:     s.ready,
		Providers: s.providers,
		Audit:     s.auditStore,
		Tester:    gw,
		APIKeys:   apiKeys,
		Grants:    connectflow.NewGrants(gw, s.oauth),
		Members:   s.members,
		PublicURL: cfg.PublicURL,

		// Members signed in with a session cookie.
		Session:        signin.SessionOf,
		SessionCookies: s.signin.Authenticate,
		AuditLog:       s.audit,
		// Connect links are minted by the flow pages, which know callers.
		ConnectLinks: flows,
		Limits:       s.admission,
	})
	var mcpAuthz *mcp.Authorization
	if len(cfg.MCPAuthServers) > 0 {
		mcpAuthz = &mcp.Authorization{
			AuthorizationServers: cfg.MCPAuthServers, Issuer: cfg.MCPIssuer, JWKSURL: cfg.MCPJWKSURL, Scopes: cfg.MCPScopes,
		}
	}
	// The tenant catalog endpoint authenticates as the instance endpoints
	// do, and serves their meta-tools when their tools are too large.
	catalogEndpoint := tenantmcp.New(gw, tenantmcp.Options{Logger: logger, Keyring: keys, PublicURL: cfg.PublicURL,
		AllowedOrigins: cfg.MCPAllowedOrigins, Authorization: mcpAuthz})
	mcpOpts := mcp.Options{Logger: logger, PublicURL: cfg.PublicURL, AllowedOrigins: cfg.MCPAllowedOrigins,
		ContextBudget: cfg.MCPContextBudget, Meta: catalogEndpoint, Authorization: mcpAuthz}
	root := admin.Router()
	// /metrics on the main listener needs an operator token;
	// --metrics-addr serves MetricsHandler without one.
	root.GET("/metrics", serve(s.operatorOnly(s.metrics.Handler())))
	mountAgentPath(root, agentSurfaces{
		app:      appmode.New(gw, logger),
		flows:    flows,
		mcp:      mcp.NewHandler(gw, mcpOpts),
		resource: mcp.ProtectedResourceHandler(mcpOpts),
		tenant:   catalogEndpoint,
	})
	pages, err := console.New(console.Config{
		Catalog:     cat,
		Tenants:     tenantSvc,
		PublicURL:   cfg.PublicURL,
		Access:      console.SignInAccess(s.signin, s.members),
		Logger:      logger,
		APIKeys:     apiKeys,
		Members:     s.members,
		Admin:       admin,
		Tester:      gw,
		Grants:      connectflow.NewGrants(gw, s.oauth),
		Providers:   s.providers,
		RedirectURI: s.oauth.RedirectURI,
		AuditLog:    s.audit,
		Audit:       s.auditStore,
		Issuers:     s.signin.Issuers(),
		SignIn:      s.signin,
		// The platform operator's pages.
		Operators: operators,
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages.Mount(root)
	// People's sign-in pages (the handler routes by method and path).
	root.Any(signin.Prefix+"*", serve(s.signin.ServeHTTP))
	// The trace's span starts before the request line is written, so that
	// the line carries the trace id.
	s.handler = s.tracer.Middleware(api.RequestLog(logger, admin.Handler())) // root, refusing NUL bytes
	return s, nil
}

// serviceVersion is the module version of the binary, for the spans'
// resource ("(devel)" for a build from a checkout).
func serviceVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}

// LoadCatalog loads the catalog of cfg: from an https:// URL (cached under the
// data directory; the returned Remote refreshes it), a directory, or the
// built-in one. Catalog keys, when configured, apply to all three.
//
// OpenAPI connectors' registries are kept in their compact form and, with
// a data directory, cached under DataDir/compiled by package content hash
// (registry.Compiled): a start compiles only packages it has not seen. The
// cache is per data directory: replicas that do not share one each compile
// once.
func LoadCatalog(ctx context.Context, cfg Config) (*registry.Catalog, *registry.Remote, error) {
	compiled := &registry.Compiled{Compiler: openapi.CompilerID()}
	if cfg.DataDir != "" && compiled.Compiler != "" {
		compiled.Dir = filepath.Join(cfg.DataDir, "compiled")
	}
	opts := registry.LoadOptions{Keys: cfg.CatalogKeys, Compiled: compiled, RefuseLintErrors: true}
	if strings.HasPrefix(cfg.Catalog, "https://") {
		remote := &registry.Remote{
			URL:      cfg.Catalog,
			CacheDir: filepath.Join(cfg.DataDir, "catalog-cache"),
			Keys:     cfg.CatalogKeys,
			Compile:  openapi.Compile,
			Compiled: compiled,
			// What connector lint rejects is not served.
			RefuseLintErrors: true,
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

// Metrics is the server's Prometheus instrumentation.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// MetricsHandler serves the metrics without authentication, for a
// separate listener (--metrics-addr) that only the scraper reaches.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.Handler() }

// operatorOnly serves h to requests bearing a live operator token, and
// answers 401 to the rest.
func (s *Server) operatorOnly(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			valid, err := s.operators.Check(r.Context(), strings.TrimSpace(token))
			if err != nil {
				switchboard.WriteError(w, switchboard.E(switchboard.ErrUnavailable, "store_unavailable", "the store cannot confirm the token"))
				return
			}
			if valid {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		switchboard.WriteError(w, switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "/metrics needs an operator token"))
	}
}

// registerGauges registers the metrics read from the server's parts at
// each scrape: the audit backlog, the catalog's state, the statements
// sent to the store.
func (s *Server) registerGauges() {
	m, w, cat, db := s.metrics, s.audit, s.catalog, s.db
	m.CounterFunc("store_statements_total", "Statements sent to the store by the server's pool (every query and exec, counted by the driver wrapper).",
		func() float64 { return float64(db.Statements()) })
	m.GaugeFunc("audit_memory_rows", "Audit rows waiting in memory for the store.",
		func() float64 { return float64(w.Stats().Memory) })
	m.GaugeFunc("audit_spool_rows", "Audit rows waiting in the disk spool for the store.",
		func() float64 { return float64(w.Stats().Spool) })
	m.CounterFunc("audit_written_rows_total", "Audit rows written to the store.",
		func() float64 { return float64(w.Stats().Written) })
	m.CounterFunc("audit_dropped_rows_total", "Audit rows lost (see audit.Stats.Dropped).",
		func() float64 { return float64(w.Stats().Dropped) })
	m.CounterFunc("audit_refused_calls_total", "Calls refused because their audit row could not be kept.",
		func() float64 { return float64(w.Stats().Refused) })
	m.GaugeFunc("catalog_connectors", "Connectors the catalog serves.",
		func() float64 { return float64(len(cat.List())) })
	m.GaugeFunc("catalog_refused_connectors", "Connectors the catalog refused (lint errors, bad signatures).",
		func() float64 { return float64(len(cat.Problems())) })
}

// Operators holds the operator tokens of the admin API.
func (s *Server) Operators() *auth.Operators { return s.operators }

// DB is the server's store.
func (s *Server) DB() *database.DB { return s.db }

// Tenants is the server's tenant service.
func (s *Server) Tenants() *tenants.Service { return s.tenants }

// Admission is the server's call admission.
func (s *Server) Admission() *admission.Controller { return s.admission }

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

// Local returns the manager of the mcp_local instances' servers.
func (s *Server) Local() *mcplocal.Manager { return s.local }

// Listen runs the background work of a replica until ctx is done: the
// remote catalog's refresh, and the Postgres LISTEN/NOTIFY listeners
// through which changes other replicas make (a revoked caller, an edited
// instance, a disconnected grant, a removed member) reach this replica's caches. It
// returns at once; the listeners stop with ctx.
func (s *Server) Listen(ctx context.Context) {
	if s.remote != nil {
		go s.remote.Run(ctx, s.catalog, s.cfg.CatalogRefresh, s.logger)
	}
	// Where the change log stands now, before this replica serves (and
	// caches) anything: the listeners' first connections replay the
	// changes made since instead of emptying the caches. Without it (the
	// store unreachable), a first connection empties them.
	for what, mark := range map[string]func(context.Context) error{
		"change": s.tenants.MarkChanges, "grant": s.oauth.MarkGrants, "member removal": s.members.MarkRemovals,
	} {
		if err := mark(ctx); err != nil {
			s.logger.Warn("replica "+what+" notifications: the first connection will empty the caches", "err", err.Error())
		}
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
	go s.retainAudit(ctx)
}

// retainInterval is how often audit retention runs.
const retainInterval = time.Hour

// retainAudit deletes audit rows past retention (audit.Store.Retain) now
// and then every retainInterval until ctx is done. Every replica runs it;
// Retain is safe to run concurrently.
func (s *Server) retainAudit(ctx context.Context) {
	t := time.NewTicker(retainInterval)
	defer t.Stop()
	for {
		st, err := s.auditStore.Retain(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("audit retention", "err", err.Error())
		case st.PartitionsDropped > 0 || st.RowsDeleted > 0:
			s.logger.Info("audit retention", "partitions_dropped", st.PartitionsDropped, "rows_deleted", st.RowsDeleted)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
	s.shuttingDown.Store(true)
	if s.cfg.ShutdownDelay > 0 {
		s.logger.Info("shutting down: not ready, still serving", "delay", s.cfg.ShutdownDelay.String())
		select {
		case err := <-errc:
			return err
		case <-time.After(s.cfg.ShutdownDelay):
		}
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

// Close ends the sessions to the MCP servers the instances proxy (the
// hosted servers of mcp_remote instances, the processes of mcp_local
// ones) and flushes the audit log (writing or spooling what is pending).
// The store stays open.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.gateway.Close()
	s.local.Close()
	s.audit.Close(ctx)
	if s.callers != nil {
		s.callers.Wait()
	}
	if err := s.tracer.Shutdown(ctx); err != nil {
		s.logger.Warn("exporting the last spans", "err", err.Error())
	}
	return nil
}

// parseCIDRs parses proxy addresses: CIDR ranges, or single addresses
// (a /32 or /128).
func parseCIDRs(list []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, v := range list {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if !strings.Contains(v, "/") {
			ip := net.ParseIP(v)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither an address nor a CIDR range", v)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(v)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range", v)
		}
		out = append(out, n)
	}
	return out, nil
}
