package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// config is every setting of switchboard serve and the commands that open
// the store. The table in settings.go declares each one (flag,
// environment variable, default, secret or not); a flag given on the
// command line wins. Secret settings come from the environment only, so
// they never show in ps.
type config struct {
	Addr        string         `json:"addr"`
	DataDir     string         `json:"data_dir"`
	DatabaseURL secrets.Secret `json:"database_url"` // may carry a password
	Catalog     string         `json:"catalog"`
	// CatalogKeys are the trusted ed25519 public keys of the catalog
	// index; when set, an unsigned or badly signed index is refused.
	CatalogKeys []ed25519.PublicKey `json:"-"`
	// CatalogRefresh is how often a catalog URL is downloaded again.
	CatalogRefresh time.Duration `json:"catalog_refresh"`
	Env            string        `json:"env"`
	LogLevel       string        `json:"log_level"`

	MasterKey      secrets.Secret `json:"master_key"`
	PreviousKeys   secrets.Secret `json:"previous_master_keys"`
	MasterKeyFile  string         `json:"master_key_file"`
	AdminToken     secrets.Secret `json:"admin_token"`
	AllowUpstreams []netip.Prefix `json:"allow_upstream_cidrs"`

	// PublicURL is the server's public base URL, for OAuth redirect URIs
	// and connect URLs; default http://<addr>.
	PublicURL string `json:"public_url"`
	// CallerJWTIssuer, CallerJWTAudience and CallerJWTKeys (a PEM file of
	// the platform's public keys) enable platform-signed caller JWTs;
	// unset, none are accepted.
	CallerJWTIssuer   string `json:"caller_jwt_issuer"`
	CallerJWTAudience string `json:"caller_jwt_audience"`
	CallerJWTKeys     string `json:"caller_jwt_keys"`
	// CallerJWTMaxLifetime is the longest lifetime a caller JWT may have.
	CallerJWTMaxLifetime time.Duration `json:"caller_jwt_max_lifetime"`
	// CacheBudgetMB and CacheTTL bound the call path's caches.
	CacheBudgetMB int           `json:"cache_budget_mb"`
	CacheTTL      time.Duration `json:"cache_ttl"`
	// The local MCP servers of mcp_local instances: counts, timeouts and
	// rlimits (mcplocal.Config).
	LocalPerTenant   int           `json:"local_per_tenant"`
	LocalTotal       int           `json:"local_total"`
	LocalIdleTimeout time.Duration `json:"local_idle_timeout"`
	LocalCallTimeout time.Duration `json:"local_call_timeout"`
	LocalCPU         time.Duration `json:"local_cpu"`
	LocalMemoryMB    int           `json:"local_memory_mb"`
	// AuthFailuresPerMinute and TrustedProxies limit failed
	// authentications per source.
	AuthFailuresPerMinute int      `json:"auth_failures_per_minute"`
	TrustedProxies        []string `json:"trusted_proxies"`
	// AuditRetentionDays is how long audit rows are kept.
	AuditRetentionDays int `json:"audit_retention_days"`
	// LimitTenant, LimitInstance, LimitUser and LimitConnector are the
	// operator's call limits (admission.ParseLimit).
	LimitTenant    string `json:"limit_tenant"`
	LimitInstance  string `json:"limit_instance"`
	LimitUser      string `json:"limit_user"`
	LimitConnector string `json:"limit_connector"`
	// UpstreamWaits is learn (an upstream's rate-limit headers make later
	// calls with the same credential fail fast until the wait ends) or
	// ignore (admission.Options.IgnoreUpstreamWaits).
	UpstreamWaits string `json:"upstream_waits"`
	// LimitQueueWait is admission.Options.QueueWait.
	LimitQueueWait time.Duration `json:"limit_queue_wait"`
	// CentralClientBudgets are provider=rate pairs (admission.Options.Clients).
	CentralClientBudgets []string `json:"central_client_budgets"`

	// MCPAllowedOrigins are the browser origins allowed to call MCP
	// endpoints (besides PublicURL's); another present Origin gets 403.
	MCPAllowedOrigins []string `json:"mcp_allowed_origins"`
	// MCPAuthServers, MCPIssuer, MCPJWKSURL and MCPScopes turn on MCP
	// authorization: instance URLs advertise the authorization servers
	// (RFC 9728) and accept their JWT access tokens.
	MCPAuthServers []string `json:"mcp_authorization_servers"`
	MCPIssuer      string   `json:"mcp_issuer"`
	MCPJWKSURL     string   `json:"mcp_jwks_url"`
	MCPScopes      []string `json:"mcp_scopes"`
	// MCPContextBudget is the operator's default context budget
	// (mcp.Options.ContextBudget).
	MCPContextBudget int `json:"mcp_context_budget"`

	// OIDCIssuer, OIDCClientID and OIDCClientSecret turn on OpenID
	// Connect sign-in; OIDCTenantDomains (tenant=domain pairs) let
	// verified emails of a domain join a tenant by signing in.
	OIDCIssuer        string         `json:"oidc_issuer"`
	OIDCClientID      string         `json:"oidc_client_id"`
	OIDCClientSecret  secrets.Secret `json:"oidc_client_secret"`
	OIDCTenantDomains []string       `json:"oidc_tenant_domains"`
	// oidcSecrets are the client secrets of named issuers, from
	// SWITCHBOARD_OIDC_CLIENT_SECRET_<NAME>.
	oidcSecrets map[string]secrets.Secret

	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	ShutdownDelay   time.Duration `json:"shutdown_delay"`
	// AuditSpoolDir keeps the audit rows the store did not take (default
	// <data dir>/audit-spool); AuditMemoryRows and AuditSpoolRows bound
	// the backlog in memory and on disk; AuditAtFull (refuse or
	// drop-oldest) is what happens when both are full.
	AuditSpoolDir   string `json:"audit_spool_dir"`
	AuditMemoryRows int    `json:"audit_memory_rows"`
	AuditSpoolRows  int    `json:"audit_spool_rows"`
	AuditAtFull     string `json:"audit_at_full"`
	// AuditJournalSync is how often the audit journal is fsync'd (0:
	// only when a segment is rotated and at shutdown).
	AuditJournalSync time.Duration `json:"audit_journal_sync"`
	// DebugAddr, when set, serves the Go profiler there (loopback only).
	DebugAddr string `json:"debug_addr"`
	// MetricsAddr, when set, serves /metrics there without
	// authentication.
	MetricsAddr string `json:"metrics_addr"`
	// OTLPEndpoint, when set, turns tracing on (server.Config.OTLPEndpoint).
	OTLPEndpoint string `json:"otlp_endpoint"`
	// TraceSampleRatio is server.Config.TraceSampleRatio.
	TraceSampleRatio float64 `json:"trace_sample_ratio"`

	// cmd is the command the configuration was read for; it selects the
	// settings that are validated and printed.
	cmd command
}

// Environments.
const (
	envDevelopment = "development"
	envProduction  = "production"
)

// embedded reports whether the embedded SQLite store is used.
func (c *config) embedded() bool { return c.DatabaseURL.IsZero() }

// keyFile is where the master key file is: the flag, else beside the
// embedded database.
func (c *config) keyFile() string {
	if c.MasterKeyFile != "" {
		return c.MasterKeyFile
	}
	if c.Env == envProduction {
		return ""
	}
	return filepath.Join(c.DataDir, "master.key")
}

// keyOptions says where the master key comes from. Only serve on the
// embedded, non-production default may create a key file.
func (c *config) keyOptions() secrets.KeyOptions {
	var prev []string
	if !c.PreviousKeys.IsZero() {
		prev = strings.Split(c.PreviousKeys.Reveal(), ",")
	}
	return secrets.KeyOptions{
		Env:      c.MasterKey.Reveal(),
		Previous: prev,
		File:     c.keyFile(),
		// keys rotate|check never create one: a new key would open nothing.
		Create: c.Env != envProduction && c.MasterKeyFile == "" && c.cmd != cmdKeys,
	}
}

// parseConfig reads the settings of command name (serve, migrate, ...):
// flags (args) over environment variables (getenv) over defaults, and
// validates the result. It refuses positional arguments.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c, rest, err := parseCommand(name, args, getenv, stderr, "", nil)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments: %s", strings.Join(rest, " "))
	}
	return c, err
}

// parseCommand is parseConfig for commands with flags of their own
// (bound by extra) and positional arguments (returned). about is printed
// under the usage line of -h.
func parseCommand(name string, args []string, getenv func(string) string, stderr io.Writer, about string, extra func(fs *flag.FlagSet)) (*config, []string, error) {
	cmd := commandOf(name)
	fs := flag.NewFlagSet("switchboard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fill := bindSettings(fs, cmd, getenv)
	if extra != nil {
		extra(fs)
	}
	fs.Usage = func() {
		printUsage(fs.Output(), name, cmd, about)
		if extra != nil {
			fmt.Fprintf(fs.Output(), "\n%s flags:\n", name)
			fs.VisitAll(func(f *flag.Flag) {
				if settingByFlag(f.Name) == nil {
					fmt.Fprintf(fs.Output(), "  --%s\n        %s\n", f.Name, f.Usage)
				}
			})
		}
	}
	if err := refuseSecretFlags(args, cmd); err != nil {
		return nil, nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	c := &config{}
	if err := fill(c); err != nil {
		return nil, nil, err
	}
	c.readOIDCSecrets(getenv)
	return c, fs.Args(), c.validate()
}

// settingByFlag returns the setting a flag name belongs to, or nil.
func settingByFlag(name string) *setting {
	for i := range settings {
		if s := &settings[i]; s.flag == name {
			return s
		}
	}
	return nil
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// minProductionAdminToken is the shortest SWITCHBOARD_ADMIN_TOKEN
// production mode accepts.
const minProductionAdminToken = 32

// validate checks the settings of the command the configuration was read
// for and fills derived defaults (the public URL).
func (c *config) validate() error {
	var errs []error
	if c.Env != envDevelopment && c.Env != envProduction {
		errs = append(errs, fmt.Errorf("--env must be %s or %s, not %q", envDevelopment, envProduction, c.Env))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", c.LogLevel))
	}
	if c.DataDir == "" && c.embedded() {
		errs = append(errs, errors.New("--data-dir is required for the embedded store"))
	}
	if c.cmd&cmdKeyed != 0 && c.Env == envProduction && c.MasterKey.IsZero() && c.MasterKeyFile == "" {
		errs = append(errs, errors.New("production mode needs a master key: set SWITCHBOARD_MASTER_KEY (base64 of 32 random bytes) or --master-key-file"))
	}
	if c.cmd&(cmdServe|cmdAdmin) != 0 {
		// serve builds OAuth redirect URIs on it; admin invite and
		// login-link build the links they print.
		errs = append(errs, c.validatePublicURL()...)
	}
	if c.cmd == cmdServe {
		errs = append(errs, c.validateServe()...)
	}
	return errors.Join(errs...)
}

// validatePublicURL defaults the public URL to http://<addr> and checks
// it.
func (c *config) validatePublicURL() []error {
	var errs []error
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
		if strings.HasPrefix(c.Addr, ":") {
			c.PublicURL = "http://localhost" + c.Addr
		}
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		errs = append(errs, fmt.Errorf("--public-url %q must be an absolute http(s) URL without query or credentials", c.PublicURL))
	}
	return errs
}

// validateServe checks the settings only serve reads.
func (c *config) validateServe() []error {
	var errs []error
	for _, o := range c.MCPAllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("--mcp-allowed-origins: %q is not an origin (scheme://host[:port])", o))
		}
	}
	if err := tenants.CheckContextBudget(c.MCPContextBudget); err != nil {
		errs = append(errs, fmt.Errorf("--mcp-context-budget must be between %d and %d", tenants.MinContextBudget, tenants.MaxContextBudget))
	}
	if (len(c.MCPAuthServers) > 0) != (c.MCPJWKSURL != "") {
		errs = append(errs, errors.New("MCP authorization needs both --mcp-authorization-servers and --mcp-jwks-url"))
	}
	if _, err := c.oidcIssuers(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.oidcDomains(); err != nil {
		errs = append(errs, err)
	}
	if jwtSet := []bool{c.CallerJWTIssuer != "", c.CallerJWTAudience != "", c.CallerJWTKeys != ""}; jwtSet[0] != jwtSet[1] || jwtSet[1] != jwtSet[2] {
		errs = append(errs, errors.New("caller JWTs need all of --caller-jwt-issuer, --caller-jwt-audience and --caller-jwt-keys"))
	}
	if _, err := netip.ParseAddrPort(c.Addr); err != nil && !strings.HasPrefix(c.Addr, ":") {
		if _, _, herr := net.SplitHostPort(c.Addr); herr != nil {
			errs = append(errs, fmt.Errorf("--addr %q is not host:port", c.Addr))
		}
	}
	if c.Env == envProduction {
		if c.AdminToken.IsZero() {
			errs = append(errs, errors.New("production mode needs SWITCHBOARD_ADMIN_TOKEN"))
		} else if n := len(c.AdminToken.Reveal()); n < minProductionAdminToken {
			errs = append(errs, fmt.Errorf("production mode needs a SWITCHBOARD_ADMIN_TOKEN of at least %d characters, not %d (openssl rand -base64 32)", minProductionAdminToken, n))
		}
	}
	if strings.Contains(c.Catalog, "://") && !strings.HasPrefix(c.Catalog, "https://") {
		errs = append(errs, fmt.Errorf("--catalog must be a directory or an https:// URL"))
	}
	if c.CatalogRefresh < time.Minute {
		errs = append(errs, errors.New("--catalog-refresh must be at least 1m"))
	}
	if !(c.TraceSampleRatio >= 0 && c.TraceSampleRatio <= 1) {
		errs = append(errs, fmt.Errorf("--trace-sample-ratio must be between 0 and 1, not %g", c.TraceSampleRatio))
	}
	if c.LimitQueueWait < 0 || c.LimitQueueWait > time.Minute {
		errs = append(errs, fmt.Errorf("--limit-queue-wait must be between 0 and 1m, not %s", c.LimitQueueWait))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if c.ShutdownDelay < 0 {
		errs = append(errs, errors.New("--shutdown-delay must not be negative"))
	}
	if c.AuditSpoolDir == "" {
		c.AuditSpoolDir = filepath.Join(c.DataDir, "audit-spool")
	}
	if c.AuditMemoryRows <= 0 || c.AuditSpoolRows <= 0 {
		errs = append(errs, errors.New("--audit-memory-rows and --audit-spool-rows must be positive"))
	}
	if c.AuditJournalSync < 0 {
		errs = append(errs, errors.New("--audit-journal-sync must not be negative"))
	}
	if _, err := audit.ParseAtFull(c.AuditAtFull); err != nil {
		errs = append(errs, fmt.Errorf("--audit-at-full: %w", err))
	}
	if c.AuditRetentionDays <= 0 {
		errs = append(errs, errors.New("--audit-retention-days must be positive"))
	}
	if _, err := c.limits(); err != nil {
		errs = append(errs, err)
	}
	if c.UpstreamWaits != "learn" && c.UpstreamWaits != "ignore" {
		errs = append(errs, fmt.Errorf("--upstream-waits: %q is not learn or ignore", c.UpstreamWaits))
	}
	if _, err := c.clientBudgets(); err != nil {
		errs = append(errs, err)
	}
	if c.AuthFailuresPerMinute < 0 {
		errs = append(errs, errors.New("--auth-failures-per-minute must not be negative (0 turns the limit off)"))
	}
	if c.LocalPerTenant <= 0 || c.LocalTotal <= 0 || c.LocalIdleTimeout <= 0 || c.LocalCallTimeout <= 0 || c.LocalCPU <= 0 || c.LocalMemoryMB <= 0 {
		errs = append(errs, errors.New("--local-per-tenant, --local-total, --local-idle-timeout, --local-call-timeout, --local-cpu and --local-memory-mb must be positive"))
	}
	if c.CacheBudgetMB <= 0 || c.CacheTTL <= 0 {
		errs = append(errs, errors.New("--cache-budget-mb and --cache-ttl must be positive"))
	}
	if c.CallerJWTMaxLifetime <= 0 {
		errs = append(errs, errors.New("--caller-jwt-max-lifetime must be positive"))
	}
	return errs
}

func (c *config) slogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	return l
}

// oidcDomains parses --oidc-tenant-domains into the domains of each
// tenant slug.
func (c *config) oidcDomains() (map[string][]string, error) {
	out := map[string][]string{}
	for _, pair := range c.OIDCTenantDomains {
		tenant, domain, ok := strings.Cut(strings.TrimSpace(pair), "=")
		domain = strings.ToLower(strings.TrimSpace(domain))
		if !ok || strings.TrimSpace(tenant) == "" || domain == "" || strings.ContainsAny(domain, "@/ ") || !strings.Contains(domain, ".") {
			return nil, fmt.Errorf("--oidc-tenant-domains: %q is not tenant=domain (such as acme=example.com)", pair)
		}
		out[strings.TrimSpace(tenant)] = append(out[strings.TrimSpace(tenant)], domain)
	}
	return out, nil
}

// limits are the operator's call limits of the --limit-* settings.
func (c *config) limits() (admission.Limits, error) {
	var ls admission.Limits
	for _, f := range []struct {
		flag string
		text string
		into *admission.Limit
	}{{"limit-tenant", c.LimitTenant, &ls.Tenant}, {"limit-instance", c.LimitInstance, &ls.Instance},
		{"limit-user", c.LimitUser, &ls.User}, {"limit-connector", c.LimitConnector, &ls.Connector}} {
		l, err := admission.ParseLimit(f.text)
		if err != nil {
			return ls, fmt.Errorf("--%s: %w", f.flag, err)
		}
		*f.into = l
	}
	return ls, nil
}

// clientBudgets are the central clients' budgets of
// --central-client-budgets, in calls a second by provider.
func (c *config) clientBudgets() (map[string]float64, error) {
	out := map[string]float64{}
	for _, pair := range c.CentralClientBudgets {
		provider, rate, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(provider) == "" {
			return nil, fmt.Errorf("--central-client-budgets: %q is not provider=rate", pair)
		}
		r, err := admission.ParseRate(rate)
		if err != nil {
			return nil, fmt.Errorf("--central-client-budgets: %w", err)
		}
		out[strings.TrimSpace(provider)] = r
	}
	return out, nil
}
