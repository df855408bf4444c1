package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// command is a set of subcommands a setting applies to.
type command uint8

// The subcommands that read the configuration.
const (
	cmdServe   command = 1 << iota
	cmdMigrate         // switchboard migrate
	cmdAdmin           // switchboard admin token ..., switchboard audit ...
	cmdKeys            // switchboard keys rotate|check

	cmdAll   = cmdServe | cmdMigrate | cmdAdmin | cmdKeys
	cmdKeyed = cmdServe | cmdKeys // the commands that open secrets
)

// commandOf maps a command name ("serve", "keys rotate") to its bit.
func commandOf(name string) command {
	first, _, _ := strings.Cut(name, " ")
	switch first {
	case "migrate":
		return cmdMigrate
	case "admin", "audit":
		return cmdAdmin
	case "keys":
		return cmdKeys
	}
	return cmdServe
}

// setting is one row of the configuration table. The table is the only
// place a setting is declared: flag parsing, the environment, defaults,
// the -h text, the README table and the start-up printout all read it,
// so they cannot drift apart.
type setting struct {
	// flag is the command-line name without dashes; empty for a secret,
	// which is read from the environment only (so it never shows in ps or
	// shell history).
	flag string
	env  string
	// def is the default as it would be typed; defDoc says what an empty
	// or derived default means.
	def, defDoc string
	secret      bool
	cmds        command
	help        string
	// field points at the config field the setting fills; its type says
	// how the text is parsed and printed.
	field func(c *config) any
	// show, when set, prints the effective value instead of the field.
	show func(c *config) string
}

// settings is the configuration table, in the order -h, the README and
// the start-up printout list it.
var settings = []setting{
	{flag: "addr", env: "SWITCHBOARD_ADDR", def: "127.0.0.1:8080", cmds: cmdServe | cmdAdmin,
		help: "listen address (host:port)", field: func(c *config) any { return &c.Addr }},
	{flag: "data-dir", env: "SWITCHBOARD_DATA_DIR", def: "./data", cmds: cmdAll,
		help: "directory of the embedded store, its key file, the verify scratch space and the compiled connector cache", field: func(c *config) any { return &c.DataDir }},
	{env: "SWITCHBOARD_DATABASE_URL", defDoc: "the embedded SQLite store", secret: true, cmds: cmdAll,
		help: "PostgreSQL URL (may hold a password)", field: func(c *config) any { return &c.DatabaseURL }},
	{flag: "env", env: "SWITCHBOARD_ENV", def: envDevelopment, cmds: cmdAll,
		help: "development or production; production needs a master key and an admin token of 32+ characters", field: func(c *config) any { return &c.Env }},
	{flag: "log-level", env: "SWITCHBOARD_LOG_LEVEL", def: "info", cmds: cmdAll,
		help: "debug, info, warn or error", field: func(c *config) any { return &c.LogLevel }},
	{flag: "catalog", env: "SWITCHBOARD_CATALOG", defDoc: "the built-in catalog", cmds: cmdServe,
		help: "connector catalog: a directory or an https:// URL", field: func(c *config) any { return &c.Catalog },
		show: func(c *config) string { return catalogForLog(c.Catalog) }},
	{flag: "catalog-keys", env: "SWITCHBOARD_CATALOG_KEYS", defDoc: "none", cmds: cmdServe,
		help:  "trusted ed25519 public keys of the catalog index, base64, comma-separated; when set the index must be signed",
		field: func(c *config) any { return &c.CatalogKeys }},
	{flag: "catalog-refresh", env: "SWITCHBOARD_CATALOG_REFRESH", def: "15m", cmds: cmdServe,
		help: "how often a catalog URL is downloaded again (at least 1m)", field: func(c *config) any { return &c.CatalogRefresh }},
	{flag: "master-key-file", env: "SWITCHBOARD_MASTER_KEY_FILE", defDoc: "<data-dir>/master.key (development only)", cmds: cmdKeyed,
		help: "file holding the base64 master key; SWITCHBOARD_MASTER_KEY wins", field: func(c *config) any { return &c.MasterKeyFile },
		show: func(c *config) string { return c.keyFile() }},
	{env: "SWITCHBOARD_MASTER_KEY", defDoc: "the key file", secret: true, cmds: cmdKeyed,
		help: "base64 of the 32-byte master key that seals stored secrets", field: func(c *config) any { return &c.MasterKey }},
	{env: "SWITCHBOARD_PREVIOUS_MASTER_KEYS", defDoc: "none", secret: true, cmds: cmdKeyed,
		help:  "comma-separated base64 keys that still open older rows until `switchboard keys rotate` re-seals them",
		field: func(c *config) any { return &c.PreviousKeys }},
	{env: "SWITCHBOARD_ADMIN_TOKEN", defDoc: "generated and printed once at first start", secret: true, cmds: cmdServe,
		help: "operator bearer token of the admin API; a changed value revokes the previous one", field: func(c *config) any { return &c.AdminToken },
		show: func(c *config) string {
			if c.AdminToken.IsZero() {
				return "unset: tokens from the store only"
			}
			return "set"
		}},
	{flag: "allow-upstream-cidrs", env: "SWITCHBOARD_ALLOW_UPSTREAM_CIDRS", defDoc: "none", cmds: cmdServe,
		help: "comma-separated CIDRs upstream calls may reach although private or loopback", field: func(c *config) any { return &c.AllowUpstreams }},
	{flag: "public-url", env: "SWITCHBOARD_PUBLIC_URL", defDoc: "http://<addr>", cmds: cmdServe | cmdAdmin,
		help: "public base URL of the server, the base of OAuth redirect URIs", field: func(c *config) any { return &c.PublicURL }},
	{flag: "caller-jwt-issuer", env: "SWITCHBOARD_CALLER_JWT_ISSUER", defDoc: "off", cmds: cmdServe,
		help: "issuer of platform-signed caller JWTs", field: func(c *config) any { return &c.CallerJWTIssuer }},
	{flag: "caller-jwt-audience", env: "SWITCHBOARD_CALLER_JWT_AUDIENCE", defDoc: "off", cmds: cmdServe,
		help: "audience of caller JWTs", field: func(c *config) any { return &c.CallerJWTAudience }},
	{flag: "caller-jwt-keys", env: "SWITCHBOARD_CALLER_JWT_KEYS", defDoc: "off", cmds: cmdServe,
		help: "PEM file of the public keys caller JWTs are signed with", field: func(c *config) any { return &c.CallerJWTKeys }},
	{flag: "caller-jwt-max-lifetime", env: "SWITCHBOARD_CALLER_JWT_MAX_LIFETIME", def: "1h", cmds: cmdServe,
		help: "longest lifetime (exp - iat) a caller JWT may have; tokens without exp are refused", field: func(c *config) any { return &c.CallerJWTMaxLifetime }},
	{flag: "mcp-allowed-origins", env: "SWITCHBOARD_MCP_ALLOWED_ORIGINS", defDoc: "the public URL's origin", cmds: cmdServe,
		help: "comma-separated browser origins allowed to call MCP endpoints besides the public URL's", field: func(c *config) any { return &c.MCPAllowedOrigins }},
	{flag: "mcp-authorization-servers", env: "SWITCHBOARD_MCP_AUTHORIZATION_SERVERS", defDoc: "off", cmds: cmdServe,
		help: "comma-separated OAuth authorization server (issuer) URLs of MCP authorization", field: func(c *config) any { return &c.MCPAuthServers }},
	{flag: "mcp-issuer", env: "SWITCHBOARD_MCP_ISSUER", defDoc: "the first authorization server", cmds: cmdServe,
		help: "issuer of MCP access tokens", field: func(c *config) any { return &c.MCPIssuer }},
	{flag: "mcp-jwks-url", env: "SWITCHBOARD_MCP_JWKS_URL", defDoc: "off", cmds: cmdServe,
		help: "JWKS URL of the MCP access-token issuer", field: func(c *config) any { return &c.MCPJWKSURL }},
	{flag: "mcp-scopes", env: "SWITCHBOARD_MCP_SCOPES", defDoc: "none", cmds: cmdServe,
		help: "comma-separated scopes MCP access tokens must grant", field: func(c *config) any { return &c.MCPScopes }},
	{flag: "mcp-context-budget", env: "SWITCHBOARD_MCP_CONTEXT_BUDGET", def: "24576", cmds: cmdServe,
		help: "default context budget of a tenant, in bytes of an instance endpoint's tools/list (1024-1048576): an instance in tools_mode auto whose tools/list is larger serves the meta-tools search, describe, call and guide scoped to it instead; a tenant sets its own with PATCH /v1/tenants/{tenant}", field: func(c *config) any { return &c.MCPContextBudget }},
	{flag: "oidc-issuer", env: "SWITCHBOARD_OIDC_ISSUER", defDoc: "off (sign-in links only)", cmds: cmdServe,
		help:  "OpenID Connect issuer URL people sign in with (register <public-url>/signin/oidc/callback there); several issuers as comma-separated name=URL pairs, each with its own callback <public-url>/signin/oidc/callback/<name> and a \"Sign in with <name>\" button",
		field: func(c *config) any { return &c.OIDCIssuer }},
	{flag: "oidc-client-id", env: "SWITCHBOARD_OIDC_CLIENT_ID", defDoc: "none", cmds: cmdServe,
		help: "client id of Switchboard at the OpenID Connect issuer; with several issuers, comma-separated name=id pairs, one per issuer", field: func(c *config) any { return &c.OIDCClientID }},
	{env: "SWITCHBOARD_OIDC_CLIENT_SECRET", defDoc: "none", secret: true, cmds: cmdServe,
		help:  "client secret of Switchboard at the OpenID Connect issuer; with several issuers, SWITCHBOARD_OIDC_CLIENT_SECRET_<NAME> for each (the name upper-cased, - as _)",
		field: func(c *config) any { return &c.OIDCClientSecret }, show: oidcSecretsShown},
	{flag: "oidc-tenant-domains", env: "SWITCHBOARD_OIDC_TENANT_DOMAINS", defDoc: "none: every tenant is invitation only", cmds: cmdServe,
		help: "comma-separated tenant=domain pairs: verified emails of the domain join the tenant as members by signing in", field: func(c *config) any { return &c.OIDCTenantDomains }},
	{flag: "cache-budget-mb", env: "SWITCHBOARD_CACHE_BUDGET_MB", def: "256", cmds: cmdServe,
		help: "memory in MiB the call path's caches may hold (resolved instances with their decrypted fields: 3/4; callers: 1/4); the least recently used go first", field: func(c *config) any { return &c.CacheBudgetMB }},
	{flag: "cache-ttl", env: "SWITCHBOARD_CACHE_TTL", def: "10m", cmds: cmdServe,
		help: "how long a cached instance or caller is kept, used or not", field: func(c *config) any { return &c.CacheTTL }},
	{flag: "local-per-tenant", env: "SWITCHBOARD_LOCAL_PER_TENANT", def: "64", cmds: cmdServe,
		help: "most local MCP server processes (mcp_local instances) running for one tenant; at the bound the least recently used idle one stops, else calls get local_capacity", field: func(c *config) any { return &c.LocalPerTenant }},
	{flag: "local-total", env: "SWITCHBOARD_LOCAL_TOTAL", def: "256", cmds: cmdServe,
		help: "most local MCP server processes running in all", field: func(c *config) any { return &c.LocalTotal }},
	{flag: "local-idle-timeout", env: "SWITCHBOARD_LOCAL_IDLE_TIMEOUT", def: "5m", cmds: cmdServe,
		help: "a local MCP server unused this long stops", field: func(c *config) any { return &c.LocalIdleTimeout }},
	{flag: "local-call-timeout", env: "SWITCHBOARD_LOCAL_CALL_TIMEOUT", def: "60s", cmds: cmdServe,
		help: "a local MCP server that does not answer a call this long is killed with its process group", field: func(c *config) any { return &c.LocalCallTimeout }},
	{flag: "local-cpu", env: "SWITCHBOARD_LOCAL_CPU", def: "10m", cmds: cmdServe,
		help: "CPU time a local MCP server process may use (RLIMIT_CPU)", field: func(c *config) any { return &c.LocalCPU }},
	{flag: "local-memory-mb", env: "SWITCHBOARD_LOCAL_MEMORY_MB", def: "1024", cmds: cmdServe,
		help: "data memory in MiB a local MCP server process may use (RLIMIT_DATA)", field: func(c *config) any { return &c.LocalMemoryMB }},
	{flag: "auth-failures-per-minute", env: "SWITCHBOARD_AUTH_FAILURES_PER_MINUTE", def: "10", cmds: cmdServe,
		help: "failed caller authentications a minute one source may have before its unknown credentials are refused (rate_limited) without a database lookup; callers already cached still get in; 0 turns the limit off", field: func(c *config) any { return &c.AuthFailuresPerMinute }},
	{flag: "limit-tenant", env: "SWITCHBOARD_LIMIT_TENANT", def: "off", cmds: cmdServe,
		help: "call limits of each tenant: concurrency=N (calls in flight), rate=R[/s|/m|/h] (token bucket), burst=N, comma-separated, or off; a tenant's admins may lower them (PUT /v1/tenants/{tenant}/limits); a refused call gets rate_limited or concurrency_limited with retryAfterMs", field: func(c *config) any { return &c.LimitTenant }},
	{flag: "limit-instance", env: "SWITCHBOARD_LIMIT_INSTANCE", def: "off", cmds: cmdServe,
		help: "call limits of each app instance, as --limit-tenant", field: func(c *config) any { return &c.LimitInstance }},
	{flag: "limit-user", env: "SWITCHBOARD_LIMIT_USER", def: "off", cmds: cmdServe,
		help: "call limits of each user of an app instance (the user the call acts as), as --limit-tenant", field: func(c *config) any { return &c.LimitUser }},
	{flag: "limit-connector", env: "SWITCHBOARD_LIMIT_CONNECTOR", def: "off", cmds: cmdServe,
		help: "call limits of each connector across all tenants, as --limit-tenant (the operator's only)", field: func(c *config) any { return &c.LimitConnector }},
	{flag: "limit-queue-wait", env: "SWITCHBOARD_LIMIT_QUEUE_WAIT", def: "250ms", cmds: cmdServe,
		help: "how long a call over a concurrency limit (--limit-*) waits for a call in flight to end before it is refused with concurrency_limited and retryAfterMs; 0 refuses at once", field: func(c *config) any { return &c.LimitQueueWait }},
	{flag: "upstream-waits", env: "SWITCHBOARD_UPSTREAM_WAITS", def: "learn", cmds: cmdServe,
		help: "learn: once an upstream answers with a wait (Retry-After on 429/503, an exhausted X-RateLimit/RateLimit quota), later calls with that credential get rate_limited with retryAfterMs without reaching it until the wait ends; ignore: every call goes upstream (for upstreams that limit per route, not per credential)", field: func(c *config) any { return &c.UpstreamWaits }},
	{flag: "central-client-budgets", env: "SWITCHBOARD_CENTRAL_CLIENT_BUDGETS", defDoc: "none", cmds: cmdServe,
		help: "comma-separated provider=rate[/s|/m|/h] pairs: the call budget of a central OAuth client (mode oauthCentral) that its provider limits as a whole, shared fairly by the tenants using it (per replica: divide by the number of replicas)", field: func(c *config) any { return &c.CentralClientBudgets }},
	{flag: "trusted-proxies", env: "SWITCHBOARD_TRUSTED_PROXIES", defDoc: "none: the source is the remote address", cmds: cmdServe,
		help: "comma-separated addresses or CIDR ranges of the proxies in front of the server; from them X-Forwarded-For names the source of a failed authentication (list them, or every client behind a proxy shares its address)", field: func(c *config) any { return &c.TrustedProxies }},
	{flag: "shutdown-delay", env: "SWITCHBOARD_SHUTDOWN_DELAY", def: "0s", cmds: cmdServe,
		help: "on SIGTERM, how long /readyz answers 503 (shutting_down) while requests are still served, before the listener closes: time for a load balancer to stop sending (a little over its health-check period)", field: func(c *config) any { return &c.ShutdownDelay }},
	{flag: "shutdown-timeout", env: "SWITCHBOARD_SHUTDOWN_TIMEOUT", def: "15s", cmds: cmdServe,
		help: "how long to drain requests on shutdown", field: func(c *config) any { return &c.ShutdownTimeout }},
	{flag: "audit-spool-dir", env: "SWITCHBOARD_AUDIT_SPOOL_DIR", defDoc: "<data dir>/audit-spool", cmds: cmdServe,
		help: "directory keeping the audit journal (every row, until the store has it) and the spool (rows the store did not take yet, fsync'd; written to the store when it is back, also after a restart or a crash)", field: func(c *config) any { return &c.AuditSpoolDir }},
	{flag: "audit-journal-sync", env: "SWITCHBOARD_AUDIT_JOURNAL_SYNC", def: "200ms", cmds: cmdServe,
		help: "how often the audit journal (in the spool directory; every row is written there before its call is answered) is fsync'd: a process crash loses no row, a power loss or kernel crash the rows since the last fsync (0: only when a journal file is rotated and at shutdown)", field: func(c *config) any { return &c.AuditJournalSync }},
	{flag: "audit-memory-rows", env: "SWITCHBOARD_AUDIT_MEMORY_ROWS", def: "8192", cmds: cmdServe,
		help: "audit rows held in memory while the store fails, before they go to the spool", field: func(c *config) any { return &c.AuditMemoryRows }},
	{flag: "audit-spool-rows", env: "SWITCHBOARD_AUDIT_SPOOL_ROWS", def: "1000000", cmds: cmdServe,
		help: "most audit rows the spool holds", field: func(c *config) any { return &c.AuditSpoolRows }},
	{flag: "audit-at-full", env: "SWITCHBOARD_AUDIT_AT_FULL", def: "refuse", cmds: cmdServe,
		help: "when memory and spool are full: refuse (new calls get audit_unavailable before reaching the upstream) or drop-oldest (the oldest spooled rows are dropped, logged and counted)", field: func(c *config) any { return &c.AuditAtFull }},
	{flag: "audit-retention-days", env: "SWITCHBOARD_AUDIT_RETENTION_DAYS", def: "400", cmds: cmdServe | cmdAdmin,
		help: "days audit rows are kept (a tenant's owner may choose fewer); older rows are deleted hourly, on PostgreSQL by dropping whole months (so a row stays up to a month longer), on SQLite in small batches; export them first with GET /v1/tenants/{tenant}/audit/export or switchboard audit export", field: func(c *config) any { return &c.AuditRetentionDays }},
	{flag: "debug-addr", env: "SWITCHBOARD_DEBUG_ADDR", defDoc: "off", cmds: cmdServe,
		help: "loopback host:port serving the Go profiler (net/http/pprof)", field: func(c *config) any { return &c.DebugAddr }},
	{flag: "metrics-addr", env: "SWITCHBOARD_METRICS_ADDR", defDoc: "off: /metrics on the main listener, with an operator token", cmds: cmdServe,
		help: "host:port serving /metrics (Prometheus) without authentication, for a scraper on a private network; the main listener's /metrics always needs an operator token", field: func(c *config) any { return &c.MetricsAddr }},
	{flag: "otlp-endpoint", env: "SWITCHBOARD_OTLP_ENDPOINT", defDoc: "off: no tracing", cmds: cmdServe,
		help: "OpenTelemetry tracing: the OTLP/HTTP traces URL (http://collector:4318/v1/traces) receiving a span per agent call and per step (authenticate, resolve, credentials, upstream), parented on the caller's W3C traceparent; upstreams get the traceparent only when their connector sets propagate_trace", field: func(c *config) any { return &c.OTLPEndpoint }},
	{flag: "trace-sample-ratio", env: "SWITCHBOARD_TRACE_SAMPLE_RATIO", def: "1", cmds: cmdServe,
		help: "with --otlp-endpoint, the share (0 to 1) of agent calls without a caller's traceparent that are traced, chosen by trace id; a call with a caller's traceparent follows its sampled flag (parent-based); 0 traces only the calls the caller sampled", field: func(c *config) any { return &c.TraceSampleRatio }},
}

// key is the setting's name in the start-up printout.
func (s *setting) key() string {
	if s.flag != "" {
		return strings.ReplaceAll(s.flag, "-", "_")
	}
	return strings.ToLower(strings.TrimPrefix(s.env, "SWITCHBOARD_"))
}

// envOnlyFlag is the flag name a secret would have; it is refused with
// a message pointing at the environment variable.
func (s *setting) envOnlyFlag() string {
	return strings.ReplaceAll(s.key(), "_", "-")
}

// set parses text into the setting's field.
func (s *setting) set(c *config, text string) error {
	switch p := s.field(c).(type) {
	case *string:
		*p = text
	case *secrets.Secret:
		*p = secrets.Secret{}
		if text != "" {
			*p = secrets.New(text)
		}
	case *int:
		n, err := strconv.Atoi(text)
		if err != nil {
			return err
		}
		*p = n
	case *float64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return err
		}
		*p = f
	case *time.Duration:
		d, err := time.ParseDuration(text)
		if err != nil {
			return err
		}
		*p = d
	case *[]string:
		*p = splitList(text)
	case *[]netip.Prefix:
		v, err := egress.ParseCIDRs(text)
		if err != nil {
			return err
		}
		*p = v
	case *[]ed25519.PublicKey:
		v, err := registry.ParsePublicKeys(text)
		if err != nil {
			return err
		}
		*p = v
	default:
		return fmt.Errorf("setting %s has an unsupported type %T", s.key(), p)
	}
	return nil
}

// value is the setting's effective value as printed at start: secrets
// say only whether they are set.
func (s *setting) value(c *config) slog.Value {
	if s.show != nil {
		return slog.StringValue(s.show(c))
	}
	switch p := s.field(c).(type) {
	case *secrets.Secret:
		if p.IsZero() {
			return slog.StringValue("unset")
		}
		return slog.StringValue("set")
	case *string:
		return slog.StringValue(*p)
	case *int:
		return slog.IntValue(*p)
	case *float64:
		return slog.Float64Value(*p)
	case *time.Duration:
		return slog.StringValue(p.String())
	case *[]string:
		return slog.AnyValue(*p)
	case *[]netip.Prefix:
		out := make([]string, len(*p))
		for i, v := range *p {
			out[i] = v.String()
		}
		return slog.AnyValue(out)
	case *[]ed25519.PublicKey:
		return slog.IntValue(len(*p))
	}
	return slog.StringValue("?")
}

// catalogForLog prints a catalog location without what a URL may carry
// in its user info or query (a token).
func catalogForLog(catalog string) string {
	if catalog == "" {
		return "built-in"
	}
	if u, err := url.Parse(catalog); err == nil && u.Scheme != "" {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		return u.String()
	}
	return catalog
}

// logValue is the configuration as printed at start: every setting of the
// command, secrets as set or unset.
func (c *config) logValue() slog.Value {
	cmd := c.cmd
	if cmd == 0 {
		cmd = cmdServe
	}
	store := "embedded sqlite"
	if !c.embedded() {
		store = "postgres"
	}
	attrs := []slog.Attr{slog.String("store", store)}
	for i := range settings {
		if s := &settings[i]; s.cmds&cmd != 0 {
			attrs = append(attrs, slog.Attr{Key: s.key(), Value: s.value(c)})
		}
	}
	return slog.GroupValue(attrs...)
}

// bindSettings registers the command's settings on fs over the
// environment and defaults, and returns a function that fills c once fs
// has parsed.
func bindSettings(fs *flag.FlagSet, cmd command, getenv func(string) string) func(c *config) error {
	type source struct{ text, from string }
	values := map[*setting]*source{}
	for i := range settings {
		s := &settings[i]
		if s.cmds&cmd == 0 {
			continue
		}
		src := &source{text: s.def, from: "default of " + s.env}
		if v := getenv(s.env); v != "" {
			src = &source{text: v, from: s.env}
		}
		values[s] = src
		if s.secret {
			continue
		}
		fs.Func(s.flag, s.help, func(v string) error {
			*src = source{text: v, from: "--" + s.flag}
			return nil
		})
	}
	return func(c *config) error {
		c.cmd = cmd
		for i := range settings {
			s := &settings[i]
			if src, ok := values[s]; ok {
				if err := s.set(c, src.text); err != nil {
					return fmt.Errorf("%s: %w", src.from, err)
				}
			}
		}
		return nil
	}
}

// refuseSecretFlags refuses a secret given as a flag (--database-url),
// naming its environment variable, before the flag package would echo the
// value in its error.
func refuseSecretFlags(args []string, cmd command) error {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for i := range settings {
			if s := &settings[i]; s.secret && s.cmds&cmd != 0 && s.envOnlyFlag() == name {
				return fmt.Errorf("--%s is not a flag: secrets are read from the environment only, so they never show in ps or shell history; set %s", name, s.env)
			}
		}
	}
	return nil
}

// printUsage writes the -h text of a command: its flags, then the
// environment-only settings.
func printUsage(w io.Writer, name string, cmd command, extra string) {
	fmt.Fprintf(w, "usage: switchboard %s [flags]\n%s\nflags (a flag wins over its environment variable, which wins over the default):\n", name, extra)
	for i := range settings {
		if s := &settings[i]; s.cmds&cmd != 0 && !s.secret {
			fmt.Fprintf(w, "  --%s\n        %s\n        env %s; default %s\n", s.flag, s.help, s.env, s.defaultText())
		}
	}
	fmt.Fprintf(w, "\nenvironment only (secrets; printed at start as set or unset):\n")
	for i := range settings {
		if s := &settings[i]; s.cmds&cmd != 0 && s.secret {
			fmt.Fprintf(w, "  %s\n        %s\n        default %s\n", s.env, s.help, s.defaultText())
		}
	}
}

// defaultText says what the default is, for -h and the README.
func (s *setting) defaultText() string {
	switch {
	case s.def != "" && s.defDoc != "":
		return s.def + " (" + s.defDoc + ")"
	case s.def != "":
		return s.def
	}
	return s.defDoc
}

// configTable is the README's configuration table, generated from the
// settings (go test ./cmd/switchboard -update rewrites README.md).
func configTable() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | secret | what it is |\n|---|---|---|---|---|\n")
	for i := range settings {
		s := &settings[i]
		flagCol, secret := "", ""
		if s.flag != "" {
			flagCol = "`--" + s.flag + "`"
		}
		if s.secret {
			secret = "yes: environment only"
		}
		def := s.defDoc
		if s.def != "" {
			def = "`" + s.def + "`"
			if s.defDoc != "" {
				def += " (" + s.defDoc + ")"
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", flagCol, s.env, strings.ReplaceAll(def, "<", "&lt;"), secret, s.help)
	}
	return b.String()
}
