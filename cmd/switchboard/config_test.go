package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigDefaultsAndPrecedence(t *testing.T) {
	t.Parallel()
	c, err := parseConfig("serve", nil, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.DataDir != "./data" || !c.embedded() || c.Env != envDevelopment ||
		c.AuditAtFull != "refuse" || c.AuditSpoolDir != filepath.Join("data", "audit-spool") {
		t.Fatalf("defaults = %+v", c)
	}
	c, err = parseConfig("serve", []string{"--addr", "127.0.0.1:9999"}, envMap(map[string]string{
		"SWITCHBOARD_ADDR": "127.0.0.1:7777", "SWITCHBOARD_DATA_DIR": "/tmp/x",
		"SWITCHBOARD_ALLOW_UPSTREAM_CIDRS": "127.0.0.1/32,10.0.0.0/8",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9999" || c.DataDir != "/tmp/x" || len(c.AllowUpstreams) != 2 {
		t.Fatalf("flag over env over default broken: %+v", c)
	}
}

func TestParseConfigRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"production without key": {nil, map[string]string{"SWITCHBOARD_ENV": "production", "SWITCHBOARD_ADMIN_TOKEN": "x"}, "master key"},
		"production without admin token": {nil, map[string]string{"SWITCHBOARD_ENV": "production",
			"SWITCHBOARD_MASTER_KEY": base64.StdEncoding.EncodeToString(make([]byte, 32))}, "SWITCHBOARD_ADMIN_TOKEN"},
		"bad env":          {[]string{"--env", "staging"}, nil, "--env"},
		"bad cidr":         {[]string{"--allow-upstream-cidrs", "nope/99"}, nil, "allow-upstream-cidrs"},
		"bad log level":    {[]string{"--log-level", "loud"}, nil, "--log-level"},
		"extra args":       {[]string{"extra"}, nil, "unexpected arguments"},
		"bad audit policy": {[]string{"--audit-at-full", "ignore"}, nil, "--audit-at-full"},
		"no spool room":    {[]string{"--audit-spool-rows", "0"}, nil, "--audit-spool-rows"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig("serve", c.args, envMap(c.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// The configuration printed at start says whether secrets are set, never
// what they are.
func TestConfigLogHidesSecrets(t *testing.T) {
	t.Parallel()
	const canary = "canary-config-9d2b"
	c, err := parseConfig("serve", nil, envMap(map[string]string{
		"SWITCHBOARD_DATABASE_URL": "postgres://u:" + canary + "@127.0.0.1/db",
		"SWITCHBOARD_ADMIN_TOKEN":  canary, "SWITCHBOARD_MASTER_KEY": canary,
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c.logValue(), "raw", c)
	if strings.Contains(buf.String(), canary) {
		t.Fatalf("config log leaks a secret: %s", buf.String())
	}
	if !strings.Contains(buf.String(), `"admin_token":"set"`) {
		t.Fatalf("config log does not say the admin token is set: %s", buf.String())
	}
}

// The profiler never listens beyond loopback.
func TestDebugAddrMustBeLoopback(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, addr := range []string{"0.0.0.0:6060", "[::]:6060", "example.test:6060", "6060"} {
		if stop, err := startDebug(addr, logger); err == nil {
			stop()
			t.Errorf("startDebug(%q) accepted a non-loopback address", addr)
		}
	}
	stop, err := startDebug("127.0.0.1:0", logger)
	if err != nil {
		t.Fatalf("startDebug on loopback: %v", err)
	}
	stop()
}
