package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md's configuration table from the settings table")

const (
	tableStart = "<!-- config table: generated from cmd/switchboard/settings.go; go test ./cmd/switchboard -update rewrites it -->\n"
	tableEnd   = "<!-- end config table -->\n"
)

// README's configuration table is generated from the settings table; a
// setting added, renamed or re-documented without -update fails here.
func TestREADMEConfigTable(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, tableStart), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no configuration table markers (%q ... %q)", tableStart, tableEnd)
	}
	got, want := readme[i+len(tableStart):j], configTable()
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("README.md's configuration table differs from the settings table; run go test ./cmd/switchboard -update\n--- README\n%s\n--- generated\n%s", got, want)
	}
	if err := os.WriteFile(path, []byte(readme[:i+len(tableStart)]+want+readme[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// samples are a valid, non-default value of each setting, keyed by its
// environment variable. A setting without a sample fails the test, so
// every new row is exercised.
var samples = map[string]string{
	"SWITCHBOARD_ADDR":                      "127.0.0.1:9191",
	"SWITCHBOARD_DATA_DIR":                  "/tmp/sb-sample",
	"SWITCHBOARD_DATABASE_URL":              "postgres://u:canary-db-77@127.0.0.1/db",
	"SWITCHBOARD_ENV":                       envProduction,
	"SWITCHBOARD_LOG_LEVEL":                 "warn",
	"SWITCHBOARD_CATALOG":                   "https://u:canary-cat-77@catalog.example.test/c?token=canary-cat-78",
	"SWITCHBOARD_CATALOG_KEYS":              "oztSRwEmcB+INo8Kox3Q6Ng8DIY37WpmYeRmU6/n75U=",
	"SWITCHBOARD_CATALOG_REFRESH":           "2h",
	"SWITCHBOARD_MASTER_KEY_FILE":           "/tmp/sb-sample/key",
	"SWITCHBOARD_MASTER_KEY":                "canary-master-77",
	"SWITCHBOARD_PREVIOUS_MASTER_KEYS":      "canary-prev-77",
	"SWITCHBOARD_ADMIN_TOKEN":               "canary-admin-77-canary-admin-77-canary",
	"SWITCHBOARD_ALLOW_UPSTREAM_CIDRS":      "10.1.0.0/16",
	"SWITCHBOARD_PUBLIC_URL":                "https://switchboard.example.test",
	"SWITCHBOARD_CALLER_JWT_ISSUER":         "https://platform.example.test",
	"SWITCHBOARD_CALLER_JWT_AUDIENCE":       "switchboard",
	"SWITCHBOARD_CALLER_JWT_KEYS":           "/tmp/sb-sample/caller.pem",
	"SWITCHBOARD_MCP_ALLOWED_ORIGINS":       "https://app.example.test",
	"SWITCHBOARD_MCP_AUTHORIZATION_SERVERS": "https://as.example.test",
	"SWITCHBOARD_MCP_ISSUER":                "https://as.example.test/",
	"SWITCHBOARD_MCP_JWKS_URL":              "https://as.example.test/jwks",
	"SWITCHBOARD_MCP_SCOPES":                "mcp.read",
	"SWITCHBOARD_MCP_CONTEXT_BUDGET":        "32768",
	"SWITCHBOARD_SHUTDOWN_TIMEOUT":          "42s",
	"SWITCHBOARD_SHUTDOWN_DELAY":            "4s",
	"SWITCHBOARD_LIMIT_TENANT":              "concurrency=20,rate=50/s,burst=100",
	"SWITCHBOARD_LIMIT_INSTANCE":            "concurrency=5",
	"SWITCHBOARD_LIMIT_USER":                "rate=10/m",
	"SWITCHBOARD_LIMIT_CONNECTOR":           "rate=100/s,burst=10",
	"SWITCHBOARD_LIMIT_QUEUE_WAIT":          "1s",
	"SWITCHBOARD_UPSTREAM_WAITS":            "ignore",
	"SWITCHBOARD_CENTRAL_CLIENT_BUDGETS":    "github=100/s",
	"SWITCHBOARD_OTLP_ENDPOINT":             "http://collector.example.test:4318/v1/traces",
	"SWITCHBOARD_TRACE_SAMPLE_RATIO":        "0.25",
	"SWITCHBOARD_CACHE_BUDGET_MB":           "512",
	"SWITCHBOARD_CACHE_TTL":                 "7m",
	"SWITCHBOARD_LOCAL_PER_TENANT":          "9",
	"SWITCHBOARD_LOCAL_TOTAL":               "90",
	"SWITCHBOARD_LOCAL_IDLE_TIMEOUT":        "3m",
	"SWITCHBOARD_LOCAL_CALL_TIMEOUT":        "45s",
	"SWITCHBOARD_LOCAL_CPU":                 "2m",
	"SWITCHBOARD_LOCAL_MEMORY_MB":           "512",
	"SWITCHBOARD_AUTH_FAILURES_PER_MINUTE":  "25",
	"SWITCHBOARD_TRUSTED_PROXIES":           "10.0.0.0/8,192.0.2.7",
	"SWITCHBOARD_AUDIT_SPOOL_DIR":           "/tmp/sb-sample/spool",
	"SWITCHBOARD_AUDIT_MEMORY_ROWS":         "100",
	"SWITCHBOARD_AUDIT_SPOOL_ROWS":          "1000",
	"SWITCHBOARD_AUDIT_RETENTION_DAYS":      "90",
	"SWITCHBOARD_AUDIT_AT_FULL":             "drop-oldest",
	"SWITCHBOARD_AUDIT_JOURNAL_SYNC":        "3s",
	"SWITCHBOARD_CALLER_JWT_MAX_LIFETIME":   "45m",
	"SWITCHBOARD_DEBUG_ADDR":                "127.0.0.1:6061",
	"SWITCHBOARD_METRICS_ADDR":              "127.0.0.1:9091",
	"SWITCHBOARD_OIDC_ISSUER":               "https://idp.example.test",
	"SWITCHBOARD_OIDC_CLIENT_ID":            "switchboard",
	"SWITCHBOARD_OIDC_CLIENT_SECRET":        "canary-oidc-77",
	"SWITCHBOARD_OIDC_TENANT_DOMAINS":       "acme=example.com",
}

// Every setting is read from its environment variable, printed at start
// under its key (secrets as "set" only), and documented in -h.
func TestEverySettingReadPrintedAndDocumented(t *testing.T) {
	t.Parallel()
	c, err := parseConfig("serve", nil, envMap(samples), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c.logValue())
	var line struct{ Config map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	printUsage(&help, "serve", cmdServe, "")
	fresh, err := parseConfig("serve", nil, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for i := range settings {
		s := &settings[i]
		sample, ok := samples[s.env]
		if !ok {
			t.Errorf("%s has no sample value in this test", s.env)
			continue
		}
		if s.help == "" || (s.flag == "") != s.secret {
			t.Errorf("%s: a setting needs help text, and a flag exactly when it is not secret", s.env)
		}
		got, printed := line.Config[s.key()]
		if !printed {
			t.Errorf("%s is not in the start-up printout: %s", s.key(), buf.String())
		}
		if s.secret && got != "set" {
			t.Errorf("secret %s printed as %v, want \"set\"", s.key(), got)
		}
		if s.value(c).String() == s.value(fresh).String() {
			t.Errorf("%s=%s did not change the effective %s", s.env, sample, s.key())
		}
		if !strings.Contains(help.String(), s.env) {
			t.Errorf("-h does not mention %s", s.env)
		}
	}
	for _, canary := range []string{"canary-db-77", "canary-cat-77", "canary-cat-78", "canary-master-77", "canary-prev-77", "canary-admin-77"} {
		if strings.Contains(buf.String(), canary) {
			t.Errorf("the start-up printout leaks %s: %s", canary, buf.String())
		}
	}
}

// Secrets are refused on the command line with a message naming their
// environment variable; they never reach the process's argument list.
func TestSecretFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "migrate"} {
		var stderr bytes.Buffer
		_, err := parseConfig(cmd, []string{"--database-url", "postgres://u:canary-flag@127.0.0.1/db"}, envMap(nil), &stderr)
		if err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_DATABASE_URL") {
			t.Fatalf("%s --database-url: err = %v, want a refusal naming SWITCHBOARD_DATABASE_URL", cmd, err)
		}
		if strings.Contains(err.Error()+stderr.String(), "canary-flag") {
			t.Fatalf("the refusal echoes the URL: %v %s", err, stderr.String())
		}
	}
}

// Production mode refuses a short operator token.
func TestProductionRefusesShortAdminToken(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SWITCHBOARD_ENV": envProduction, "SWITCHBOARD_MASTER_KEY": "x", "SWITCHBOARD_ADMIN_TOKEN": "short-token"}
	if _, err := parseConfig("serve", nil, envMap(env), io.Discard); err == nil || !strings.Contains(err.Error(), "at least 32 characters") {
		t.Fatalf("err = %v, want a refusal of the short admin token", err)
	}
	env["SWITCHBOARD_ADMIN_TOKEN"] = strings.Repeat("a", 32)
	if _, err := parseConfig("serve", nil, envMap(env), io.Discard); err != nil {
		t.Fatalf("a 32-character token: %v", err)
	}
}

// -h succeeds; each command's -h lists only its own flags; the top-level
// usage names every command.
func TestHelp(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"migrate", "-h"}, envMap(nil), &out, &errOut)
	if code := exitCode(err, io.Discard); code != 0 {
		t.Fatalf("migrate -h exits %d (err %v)", code, err)
	}
	help := errOut.String()
	if !strings.Contains(help, "--data-dir") || !strings.Contains(help, "SWITCHBOARD_DATABASE_URL") {
		t.Fatalf("migrate -h misses its settings:\n%s", help)
	}
	for _, serveOnly := range []string{"--addr", "--catalog", "--shutdown-timeout", "SWITCHBOARD_ADMIN_TOKEN"} {
		if strings.Contains(help, serveOnly) {
			t.Errorf("migrate -h lists serve's %s:\n%s", serveOnly, help)
		}
	}
	errOut.Reset()
	err = run(context.Background(), []string{"serve", "-h"}, envMap(nil), &out, &errOut)
	if code := exitCode(err, io.Discard); code != 0 || !strings.Contains(errOut.String(), "--shutdown-timeout") {
		t.Fatalf("serve -h: exit %d, output:\n%s", code, errOut.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"-h"}, envMap(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "migrate", "connector"} {
		if !strings.Contains(out.String(), "\n  "+cmd+" ") {
			t.Errorf("usage does not list %s:\n%s", cmd, out.String())
		}
	}
	if code := exitCode(io.ErrUnexpectedEOF, io.Discard); code != 1 {
		t.Fatalf("an error exits %d, want 1", code)
	}
}
