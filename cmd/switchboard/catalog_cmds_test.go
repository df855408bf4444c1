package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/server"
)

// copyBuiltin copies the built-in catalog into a new directory.
func copyBuiltin(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "catalog")
	if err := os.CopyFS(dir, catalog.FS()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// builtinCount is the number of connectors in the built-in catalog (one
// directory each), so that adding one does not break these tests.
func builtinCount(t *testing.T) int {
	t.Helper()
	entries, err := fs.ReadDir(catalog.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
	return out.String(), errb.String(), err
}

func TestCatalogCommands(t *testing.T) {
	t.Parallel()
	dir := copyBuiltin(t)
	keyFile := filepath.Join(t.TempDir(), "catalog.key")

	// keygen writes a 0600 private key and prints the public key.
	pubOut, _, err := runCmd(t, "connector", "keygen", "--out", keyFile)
	if err != nil {
		t.Fatalf("keygen: %v", err)
	}
	pub := strings.TrimSpace(pubOut)
	if keys, err := registry.ParsePublicKeys(pub); err != nil || len(keys) != 1 {
		t.Fatalf("keygen printed %q: %v", pub, err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if _, _, err := runCmd(t, "connector", "keygen", "--out", keyFile); err == nil {
		t.Fatal("keygen overwrote an existing key file")
	}

	// hash on a current index changes nothing.
	if out, _, err := runCmd(t, "connector", "hash", dir); err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("hash: %q %v", out, err)
	}

	// sign, then verify with the key.
	if _, _, err := runCmd(t, "connector", "sign", "--key", keyFile, dir); err != nil {
		t.Fatalf("sign: %v", err)
	}
	out, _, err := runCmd(t, "connector", "verify", "--keys", pub, dir)
	if err != nil || !strings.Contains(out, "signature: verified") || !strings.Contains(out, fmt.Sprintf("%d connectors loaded, 0 problems", builtinCount(t))) {
		t.Fatalf("verify signed: %v\n%s", err, out)
	}

	// Another key: refused.
	other := filepath.Join(t.TempDir(), "other.key")
	otherPub, _, _ := runCmd(t, "connector", "keygen", "--out", other)
	if out, _, err := runCmd(t, "connector", "verify", "--keys", strings.TrimSpace(otherPub), dir); err == nil || !strings.Contains(out, registry.SignatureName) {
		t.Fatalf("verify with another key passed: %s", out)
	}

	// A tampered file: verify names it and fails.
	p := filepath.Join(dir, "slack", "guide.md")
	b, _ := os.ReadFile(p)
	b[10] ^= 1
	os.WriteFile(p, b, 0o644)
	out, _, err = runCmd(t, "connector", "verify", dir)
	if err == nil || !strings.Contains(out, `"slack"`) || !strings.Contains(out, `"guide.md"`) || !strings.Contains(out, fmt.Sprintf("%d connectors loaded, 1 problems", builtinCount(t)-1)) {
		t.Fatalf("verify tampered: %v\n%s", err, out)
	}

	// hash rewrites the index and warns that the signature is stale.
	out, errOut, err := runCmd(t, "connector", "hash", dir)
	if err != nil || !strings.Contains(out, "rewrote") || !strings.Contains(errOut, "sign") {
		t.Fatalf("hash: %v %q %q", err, out, errOut)
	}
	if _, _, err := runCmd(t, "connector", "verify", dir); err != nil {
		t.Fatalf("verify after hash: %v", err)
	}
	if _, _, err := runCmd(t, "connector", "verify", "--keys", pub, dir); err == nil {
		t.Fatal("verify passed with a stale signature")
	}

	// A manifest lint error: verify reports its path and fix.
	mp := filepath.Join(dir, "github", "connector.json")
	raw, _ := os.ReadFile(mp)
	os.WriteFile(mp, bytes.Replace(raw, []byte(`"version": "1.0.0"`), []byte(`"version": "1.0"`), 1), 0o644)
	runCmd(t, "connector", "hash", dir)
	out, _, err = runCmd(t, "connector", "verify", dir)
	if err == nil || !strings.Contains(out, "github/connector.json $.version") || !strings.Contains(out, "fix: ") {
		t.Fatalf("verify lint: %v\n%s", err, out)
	}
}

func TestCatalogCommandUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"connector", "hash"},
		{"connector", "verify", "/nonexistent-dir-for-test"},
		{"connector", "sign", t.TempDir()},
		{"connector", "keygen"},
		{"connector", "verify", "--keys", "nope", t.TempDir()},
	} {
		if _, _, err := runCmd(t, args...); err == nil {
			t.Errorf("%v passed", args)
		}
	}
}

func TestCatalogConfig(t *testing.T) {
	t.Parallel()
	dir := copyBuiltin(t)
	keyFile := filepath.Join(t.TempDir(), "k")
	pubOut, _, err := runCmd(t, "connector", "keygen", "--out", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(pubOut)

	c, err := parseConfig("serve", nil, envMap(map[string]string{"SWITCHBOARD_CATALOG_KEYS": pub + "," + pub, "SWITCHBOARD_CATALOG_REFRESH": "5m"}), io.Discard)
	if err != nil || len(c.CatalogKeys) != 2 || c.CatalogRefresh != 5*time.Minute {
		t.Fatalf("config = %+v, %v", c, err)
	}
	if c, err := parseConfig("serve", []string{"--catalog-keys", pub, "--catalog-refresh", "1h"}, envMap(map[string]string{"SWITCHBOARD_CATALOG_KEYS": "junk"}), io.Discard); err != nil || len(c.CatalogKeys) != 1 || c.CatalogRefresh != time.Hour {
		t.Fatalf("flags over env: %+v, %v", c, err)
	}
	for _, args := range [][]string{
		{"--catalog-keys", "junk"},
		{"--catalog", "http://catalog.example.test/"},
		{"--catalog-refresh", "10s"},
		{"--catalog-refresh", "soon"},
	} {
		if _, err := parseConfig("serve", args, envMap(nil), io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}

	// A URL's token never reaches the start-up log.
	c, err = parseConfig("serve", []string{"--catalog", "https://user:canary-cat-1@catalog.example.test/c/?token=canary-cat-2"}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c.logValue())
	if strings.Contains(buf.String(), "canary-cat") || !strings.Contains(buf.String(), "catalog.example.test") {
		t.Fatalf("config log: %s", buf.String())
	}

	// With keys, an unsigned catalog (the built-in one, or a directory) is
	// refused; a signed directory loads.
	keys, _ := registry.ParsePublicKeys(pub)
	keyed := &config{Catalog: dir, CatalogKeys: keys}
	if _, _, err := server.LoadCatalog(context.Background(), server.Config{CatalogKeys: keyed.CatalogKeys}); err == nil {
		t.Fatal("the unsigned built-in catalog loaded with keys configured")
	}
	if _, _, err := server.LoadCatalog(context.Background(), keyed.serverConfig(nil, nil)); err == nil {
		t.Fatal("an unsigned directory loaded with keys configured")
	}
	if _, _, err := runCmd(t, "connector", "sign", "--key", keyFile, dir); err != nil {
		t.Fatal(err)
	}
	cat, remote, err := server.LoadCatalog(context.Background(), keyed.serverConfig(nil, nil))
	if err != nil || remote != nil || !cat.Signed() || len(cat.List()) != builtinCount(t) {
		t.Fatalf("signed directory: %v", err)
	}
}
