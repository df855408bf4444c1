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

	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// config is every setting of switchboard serve and migrate. Each flag has
// an environment equivalent; a flag given on the command line wins. Secret
// settings come from the environment only, so they never show in ps.
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

	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	// DebugAddr, when set, serves the Go profiler there (loopback only).
	DebugAddr string `json:"debug_addr"`
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

// keyOptions says where the master key comes from. Only the embedded,
// non-production default may create a key file.
func (c *config) keyOptions() secrets.KeyOptions {
	var prev []string
	if !c.PreviousKeys.IsZero() {
		prev = strings.Split(c.PreviousKeys.Reveal(), ",")
	}
	return secrets.KeyOptions{
		Env:      c.MasterKey.Reveal(),
		Previous: prev,
		File:     c.keyFile(),
		Create:   c.Env != envProduction && c.MasterKeyFile == "",
	}
}

// logValue is the configuration as printed at start: secrets say only
// whether they are set.
func (c *config) logValue() slog.Value {
	set := func(s secrets.Secret) string {
		if s.IsZero() {
			return "unset"
		}
		return "set"
	}
	cidrs := make([]string, len(c.AllowUpstreams))
	for i, p := range c.AllowUpstreams {
		cidrs[i] = p.String()
	}
	store := "embedded sqlite"
	if !c.embedded() {
		store = "postgres"
	}
	catalog := c.Catalog
	if catalog == "" {
		catalog = "built-in"
	} else if u, err := url.Parse(catalog); err == nil && u.Scheme != "" {
		// A URL may carry a token in its user info or query.
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		catalog = u.String()
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr), slog.String("env", c.Env), slog.String("store", store),
		slog.String("data_dir", c.DataDir), slog.String("database_url", set(c.DatabaseURL)),
		slog.String("catalog", catalog), slog.Int("catalog_keys", len(c.CatalogKeys)),
		slog.String("catalog_refresh", c.CatalogRefresh.String()), slog.String("master_key", set(c.MasterKey)),
		slog.String("master_key_file", c.keyFile()), slog.String("admin_token", set(c.AdminToken)),
		slog.Any("allow_upstream_cidrs", cidrs), slog.String("log_level", c.LogLevel),
		slog.String("public_url", c.PublicURL), slog.String("caller_jwt_issuer", c.CallerJWTIssuer),
		slog.String("caller_jwt_keys", c.CallerJWTKeys),
		slog.Any("mcp_allowed_origins", c.MCPAllowedOrigins), slog.Any("mcp_authorization_servers", c.MCPAuthServers),
		slog.String("mcp_jwks_url", c.MCPJWKSURL), slog.Any("mcp_scopes", c.MCPScopes),
	)
}

// parseConfig reads flags (args) over environment variables (getenv) over
// defaults, and validates the result.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	c := &config{}
	fs := flag.NewFlagSet("switchboard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", envOr("SWITCHBOARD_ADDR", "127.0.0.1:8080"), "listen address (SWITCHBOARD_ADDR)")
	fs.StringVar(&c.DataDir, "data-dir", envOr("SWITCHBOARD_DATA_DIR", "./data"), "directory of the embedded store and its key file (SWITCHBOARD_DATA_DIR)")
	dbURL := fs.String("database-url", getenv("SWITCHBOARD_DATABASE_URL"), "PostgreSQL URL; empty uses the embedded store (SWITCHBOARD_DATABASE_URL)")
	fs.StringVar(&c.Catalog, "catalog", getenv("SWITCHBOARD_CATALOG"), "connector catalog directory or https:// URL; empty uses the built-in catalog (SWITCHBOARD_CATALOG)")
	catalogKeys := fs.String("catalog-keys", getenv("SWITCHBOARD_CATALOG_KEYS"), "trusted ed25519 public keys of the catalog index, base64, comma-separated; when set the index must be signed (SWITCHBOARD_CATALOG_KEYS)")
	catalogRefresh := envOr("SWITCHBOARD_CATALOG_REFRESH", "15m")
	fs.Func("catalog-refresh", "how often a catalog URL is downloaded again, such as 15m (SWITCHBOARD_CATALOG_REFRESH)", func(v string) error {
		catalogRefresh = v
		return nil
	})
	fs.StringVar(&c.Env, "env", envOr("SWITCHBOARD_ENV", envDevelopment), "development or production (SWITCHBOARD_ENV)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("SWITCHBOARD_LOG_LEVEL", "info"), "debug, info, warn or error (SWITCHBOARD_LOG_LEVEL)")
	fs.StringVar(&c.MasterKeyFile, "master-key-file", getenv("SWITCHBOARD_MASTER_KEY_FILE"), "file holding the base64 master key (SWITCHBOARD_MASTER_KEY_FILE); SWITCHBOARD_MASTER_KEY wins")
	cidrs := fs.String("allow-upstream-cidrs", getenv("SWITCHBOARD_ALLOW_UPSTREAM_CIDRS"), "comma-separated CIDRs upstream calls may reach although private or loopback (SWITCHBOARD_ALLOW_UPSTREAM_CIDRS)")
	fs.StringVar(&c.PublicURL, "public-url", getenv("SWITCHBOARD_PUBLIC_URL"), "public base URL of the server, for OAuth redirect URIs; default http://<addr> (SWITCHBOARD_PUBLIC_URL)")
	fs.StringVar(&c.CallerJWTIssuer, "caller-jwt-issuer", getenv("SWITCHBOARD_CALLER_JWT_ISSUER"), "issuer of platform-signed caller JWTs (SWITCHBOARD_CALLER_JWT_ISSUER)")
	fs.StringVar(&c.CallerJWTAudience, "caller-jwt-audience", getenv("SWITCHBOARD_CALLER_JWT_AUDIENCE"), "audience of caller JWTs (SWITCHBOARD_CALLER_JWT_AUDIENCE)")
	fs.StringVar(&c.CallerJWTKeys, "caller-jwt-keys", getenv("SWITCHBOARD_CALLER_JWT_KEYS"), "PEM file of the public keys caller JWTs are signed with (SWITCHBOARD_CALLER_JWT_KEYS)")
	mcpOrigins := fs.String("mcp-allowed-origins", getenv("SWITCHBOARD_MCP_ALLOWED_ORIGINS"), "comma-separated browser origins allowed to call MCP endpoints besides the public URL's (SWITCHBOARD_MCP_ALLOWED_ORIGINS)")
	mcpAS := fs.String("mcp-authorization-servers", getenv("SWITCHBOARD_MCP_AUTHORIZATION_SERVERS"), "comma-separated OAuth authorization server (issuer) URLs of MCP authorization (SWITCHBOARD_MCP_AUTHORIZATION_SERVERS)")
	fs.StringVar(&c.MCPIssuer, "mcp-issuer", getenv("SWITCHBOARD_MCP_ISSUER"), "issuer of MCP access tokens; default the first authorization server (SWITCHBOARD_MCP_ISSUER)")
	fs.StringVar(&c.MCPJWKSURL, "mcp-jwks-url", getenv("SWITCHBOARD_MCP_JWKS_URL"), "JWKS URL of the MCP access-token issuer (SWITCHBOARD_MCP_JWKS_URL)")
	mcpScopes := fs.String("mcp-scopes", getenv("SWITCHBOARD_MCP_SCOPES"), "comma-separated scopes MCP access tokens must grant (SWITCHBOARD_MCP_SCOPES)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long to drain requests on shutdown")
	fs.StringVar(&c.DebugAddr, "debug-addr", getenv("SWITCHBOARD_DEBUG_ADDR"), "loopback host:port serving the Go profiler (net/http/pprof); off when empty (SWITCHBOARD_DEBUG_ADDR)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	c.DatabaseURL = secrets.New(*dbURL)
	c.MasterKey = secrets.New(getenv("SWITCHBOARD_MASTER_KEY"))
	c.PreviousKeys = secrets.New(getenv("SWITCHBOARD_PREVIOUS_MASTER_KEYS"))
	c.AdminToken = secrets.New(getenv("SWITCHBOARD_ADMIN_TOKEN"))
	var err error
	if c.AllowUpstreams, err = egress.ParseCIDRs(*cidrs); err != nil {
		return nil, fmt.Errorf("--allow-upstream-cidrs: %w", err)
	}
	c.MCPAllowedOrigins, c.MCPAuthServers, c.MCPScopes = splitList(*mcpOrigins), splitList(*mcpAS), splitList(*mcpScopes)
	if c.CatalogKeys, err = registry.ParsePublicKeys(*catalogKeys); err != nil {
		return nil, fmt.Errorf("--catalog-keys: %w", err)
	}
	if c.CatalogRefresh, err = time.ParseDuration(catalogRefresh); err != nil {
		return nil, fmt.Errorf("--catalog-refresh: %w", err)
	}
	return c, c.validate()
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

func (c *config) validate() error {
	var errs []error
	for _, o := range c.MCPAllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("--mcp-allowed-origins: %q is not an origin (scheme://host[:port])", o))
		}
	}
	if (len(c.MCPAuthServers) > 0) != (c.MCPJWKSURL != "") {
		errs = append(errs, errors.New("MCP authorization needs both --mcp-authorization-servers and --mcp-jwks-url"))
	}
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
	if jwtSet := []bool{c.CallerJWTIssuer != "", c.CallerJWTAudience != "", c.CallerJWTKeys != ""}; jwtSet[0] != jwtSet[1] || jwtSet[1] != jwtSet[2] {
		errs = append(errs, errors.New("caller JWTs need all of --caller-jwt-issuer, --caller-jwt-audience and --caller-jwt-keys"))
	}
	if c.Env != envDevelopment && c.Env != envProduction {
		errs = append(errs, fmt.Errorf("--env must be %s or %s, not %q", envDevelopment, envProduction, c.Env))
	}
	if _, err := netip.ParseAddrPort(c.Addr); err != nil && !strings.HasPrefix(c.Addr, ":") {
		if _, _, herr := net.SplitHostPort(c.Addr); herr != nil {
			errs = append(errs, fmt.Errorf("--addr %q is not host:port", c.Addr))
		}
	}
	if c.DataDir == "" && c.embedded() {
		errs = append(errs, errors.New("--data-dir is required for the embedded store"))
	}
	if c.Env == envProduction && c.MasterKey.IsZero() && c.MasterKeyFile == "" {
		errs = append(errs, errors.New("production mode needs a master key: set SWITCHBOARD_MASTER_KEY (base64 of 32 random bytes) or --master-key-file"))
	}
	if c.Env == envProduction && c.AdminToken.IsZero() {
		errs = append(errs, errors.New("production mode needs SWITCHBOARD_ADMIN_TOKEN"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", c.LogLevel))
	}
	if strings.Contains(c.Catalog, "://") && !strings.HasPrefix(c.Catalog, "https://") {
		errs = append(errs, fmt.Errorf("--catalog must be a directory or an https:// URL"))
	}
	if c.CatalogRefresh < time.Minute {
		errs = append(errs, errors.New("--catalog-refresh must be at least 1m"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	return errors.Join(errs...)
}

func (c *config) slogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	return l
}
