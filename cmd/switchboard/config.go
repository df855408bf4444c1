package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/egress"
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
	Env         string         `json:"env"`
	LogLevel    string         `json:"log_level"`

	MasterKey      secrets.Secret `json:"master_key"`
	PreviousKeys   secrets.Secret `json:"previous_master_keys"`
	MasterKeyFile  string         `json:"master_key_file"`
	AdminToken     secrets.Secret `json:"admin_token"`
	AllowUpstreams []netip.Prefix `json:"allow_upstream_cidrs"`

	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
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
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr), slog.String("env", c.Env), slog.String("store", store),
		slog.String("data_dir", c.DataDir), slog.String("database_url", set(c.DatabaseURL)),
		slog.String("catalog", catalog), slog.String("master_key", set(c.MasterKey)),
		slog.String("master_key_file", c.keyFile()), slog.String("admin_token", set(c.AdminToken)),
		slog.Any("allow_upstream_cidrs", cidrs), slog.String("log_level", c.LogLevel),
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
	fs.StringVar(&c.Catalog, "catalog", getenv("SWITCHBOARD_CATALOG"), "connector catalog directory; empty uses the built-in catalog (SWITCHBOARD_CATALOG)")
	fs.StringVar(&c.Env, "env", envOr("SWITCHBOARD_ENV", envDevelopment), "development or production (SWITCHBOARD_ENV)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("SWITCHBOARD_LOG_LEVEL", "info"), "debug, info, warn or error (SWITCHBOARD_LOG_LEVEL)")
	fs.StringVar(&c.MasterKeyFile, "master-key-file", getenv("SWITCHBOARD_MASTER_KEY_FILE"), "file holding the base64 master key (SWITCHBOARD_MASTER_KEY_FILE); SWITCHBOARD_MASTER_KEY wins")
	cidrs := fs.String("allow-upstream-cidrs", getenv("SWITCHBOARD_ALLOW_UPSTREAM_CIDRS"), "comma-separated CIDRs upstream calls may reach although private or loopback (SWITCHBOARD_ALLOW_UPSTREAM_CIDRS)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long to drain requests on shutdown")
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
	return c, c.validate()
}

func (c *config) validate() error {
	var errs []error
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
