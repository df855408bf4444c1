package registry_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

// flipByte flips one bit of one byte in the middle of a file.
func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sign signs dir's index with a new key and returns the key pair.
func sign(t *testing.T, dir string) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := registry.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signWith(t, dir, priv)
	return pub, priv
}

func signWith(t *testing.T, dir string, priv ed25519.PrivateKey) {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, registry.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, registry.SignatureName), registry.SignIndex(index, priv), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTamperRefusesOnlyThatConnector is the tamper acceptance test: one
// flipped byte in each kind of file refuses that connector, naming the
// file; the other connector still loads.
func TestTamperRefusesOnlyThatConnector(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"connector.json", "openapi.json", "guide.md", "icons/small.svg"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			dir := writeCatalog(t)
			flipByte(t, filepath.Join(dir, "alpha", filepath.FromSlash(file)))
			cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
			if err != nil {
				t.Fatalf("LoadCatalog: %v", err)
			}
			if _, ok := cat.Connector("alpha"); ok {
				t.Fatal("the tampered connector loaded")
			}
			if _, ok := cat.Connector("beta"); !ok {
				t.Fatal("the untouched connector did not load")
			}
			probs := cat.Problems()
			if len(probs) != 1 {
				t.Fatalf("Problems = %v", probs)
			}
			msg := probs[0].Error()
			if !strings.Contains(msg, `"alpha"`) || !strings.Contains(msg, `"`+file+`"`) || !strings.Contains(msg, "sha256") {
				t.Fatalf("problem %q does not name the connector, the file and the mismatch", msg)
			}
			if switchboard.CodeOf(probs[0]) != "connector_integrity" || !errors.Is(probs[0], switchboard.ErrInvalid) {
				t.Fatalf("problem %v: code %q", probs[0], switchboard.CodeOf(probs[0]))
			}
		})
	}
}

func TestSignedCatalog(t *testing.T) {
	t.Parallel()
	other, _, err := registry.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) []ed25519.PublicKey
		code  string // empty: loads, signed
	}{
		{"signed", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			return []ed25519.PublicKey{pub}
		}, ""},
		{"signed, second of two keys", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			return []ed25519.PublicKey{other, pub}
		}, ""},
		{"index modified after signing", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			editIndex(t, dir, func(idx *registry.Index) { entry(idx, "beta").Name = "Beta!" })
			return []ed25519.PublicKey{pub}
		}, "catalog_signature"},
		{"one byte of the index flipped", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			flipByte(t, filepath.Join(dir, registry.IndexName))
			return []ed25519.PublicKey{pub}
		}, "catalog_signature"},
		{"missing signature", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			os.Remove(filepath.Join(dir, registry.SignatureName))
			return []ed25519.PublicKey{pub}
		}, "catalog_unsigned"},
		{"wrong key", func(t *testing.T, dir string) []ed25519.PublicKey {
			sign(t, dir)
			return []ed25519.PublicKey{other}
		}, "catalog_signature"},
		{"garbage signature", func(t *testing.T, dir string) []ed25519.PublicKey {
			pub, _ := sign(t, dir)
			write(t, dir, registry.SignatureName, "not a signature\n")
			return []ed25519.PublicKey{pub}
		}, "catalog_signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := writeCatalog(t)
			keys := tt.setup(t, dir)
			cat, err := registry.LoadCatalogWith(os.DirFS(dir), openapi.Compile, registry.LoadOptions{Keys: keys})
			if tt.code == "" {
				if err != nil {
					t.Fatalf("LoadCatalogWith: %v", err)
				}
				if !cat.Signed() || len(cat.List()) != 2 {
					t.Fatalf("signed=%v connectors=%d problems=%v", cat.Signed(), len(cat.List()), cat.Problems())
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded %d connectors, want the catalog refused (%s)", len(cat.List()), tt.code)
			}
			if switchboard.CodeOf(err) != tt.code || !strings.Contains(err.Error(), registry.SignatureName) {
				t.Fatalf("error %v (code %q), want code %s naming %s", err, switchboard.CodeOf(err), tt.code, registry.SignatureName)
			}
		})
	}
}

// TestUnsignedCatalogWithoutKeys: without keys, a signature is not needed
// and not checked.
func TestUnsignedCatalogWithoutKeys(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	write(t, dir, registry.SignatureName, "garbage\n")
	cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
	if err != nil || cat.Signed() || len(cat.List()) != 2 {
		t.Fatalf("err=%v signed=%v", err, cat.Signed())
	}
}

func TestKeyEncoding(t *testing.T) {
	t.Parallel()
	pub, priv, err := registry.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	back, err := registry.ParsePrivateKey(registry.EncodePrivateKey(priv))
	if err != nil || !back.Equal(priv) {
		t.Fatalf("private key round trip: %v", err)
	}
	keys, err := registry.ParsePublicKeys(" " + registry.EncodePublicKey(pub) + ",\n" + registry.EncodePublicKey(pub))
	if err != nil || len(keys) != 2 || !keys[0].Equal(pub) {
		t.Fatalf("ParsePublicKeys: %v %v", keys, err)
	}
	if keys, err := registry.ParsePublicKeys(""); err != nil || keys != nil {
		t.Fatalf("empty: %v %v", keys, err)
	}
	for _, bad := range []string{"abc", "AAAA", registry.EncodePublicKey(pub) + "AAAA"} {
		if _, err := registry.ParsePublicKeys(bad); err == nil {
			t.Errorf("ParsePublicKeys(%q) passed", bad)
		}
	}
	if _, err := registry.ParsePrivateKey([]byte("bm90IGEga2V5")); err == nil || strings.Contains(err.Error(), "bm90") {
		t.Fatalf("ParsePrivateKey(bad) = %v", err)
	}
}

// catalogServer serves dir over TLS on loopback, counting requests.
func catalogServer(t *testing.T, dir string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRemoteCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := writeCatalog(t)
	pub, priv := sign(t, dir)
	srv, hits := catalogServer(t, dir)
	cache := t.TempDir()
	remote := &registry.Remote{URL: srv.URL + "/", CacheDir: cache, Client: srv.Client(),
		Keys: []ed25519.PublicKey{pub}, Compile: openapi.Compile}

	cat, err := remote.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(cat.List()) != 2 || !cat.Signed() {
		t.Fatalf("connectors=%d signed=%v problems=%v", len(cat.List()), cat.Signed(), cat.Problems())
	}

	// Unchanged: only the index and signature are fetched.
	before := hits.Load()
	if changed, err := remote.Refresh(ctx, cat); err != nil || changed {
		t.Fatalf("Refresh unchanged = %v, %v", changed, err)
	}
	if n := hits.Load() - before; n != 2 {
		t.Errorf("an unchanged refresh made %d requests, want 2", n)
	}

	// A new version: re-hashed and re-signed. The catalog object the
	// server holds sees it.
	write(t, dir, "beta/guide.md", "# beta v2\n")
	rehash(t, dir)
	signWith(t, dir, priv)
	before = hits.Load()
	if changed, err := remote.Refresh(ctx, cat); err != nil || !changed {
		t.Fatalf("Refresh = %v, %v", changed, err)
	}
	if c, _ := cat.Connector("beta"); c == nil || c.Guide != "# beta v2\n" {
		t.Fatalf("beta after refresh = %+v", c)
	}
	// Unchanged files were reused from the cache: index, signature, one file.
	if n := hits.Load() - before; n != 3 {
		t.Errorf("the refresh made %d requests, want 3", n)
	}

	// A modified index without a new signature: refused, the last good
	// catalog stays.
	editIndex(t, dir, func(idx *registry.Index) { entry(idx, "alpha").Name = "Evil" })
	if changed, err := remote.Refresh(ctx, cat); err == nil || changed || switchboard.CodeOf(err) != "catalog_signature" {
		t.Fatalf("Refresh of a badly signed index = %v, %v", changed, err)
	}
	if len(cat.List()) != 2 {
		t.Fatal("a failed refresh changed the catalog")
	}

	// The server is gone: a new start loads the cached copy, verified.
	srv.Close()
	again := &registry.Remote{URL: remote.URL, CacheDir: cache, Client: srv.Client(), Keys: remote.Keys, Compile: openapi.Compile}
	cached, err := again.Load(ctx)
	if err != nil {
		t.Fatalf("Load from cache: %v", err)
	}
	if c, _ := cached.Connector("beta"); c == nil || c.Guide != "# beta v2\n" || !cached.Signed() {
		t.Fatalf("cached beta = %+v", c)
	}
	if _, err := again.Refresh(ctx, cached); err == nil {
		t.Fatal("Refresh with the server gone passed")
	}

	// A tampered cache is re-verified: the tampered connector is refused.
	cur, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(cache, strings.TrimSpace(string(cur)), "alpha", "openapi.json"))
	cached, err = again.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cached.Connector("alpha"); ok || len(cached.Problems()) != 1 {
		t.Fatalf("tampered cache: problems %v", cached.Problems())
	}
}

// TestRemoteCatalogTamperedFile: a file served with other bytes than the
// index says refuses that connector only.
func TestRemoteCatalogTamperedFile(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	flipByte(t, filepath.Join(dir, "beta", "openapi.json"))
	srv, _ := catalogServer(t, dir)
	remote := &registry.Remote{URL: srv.URL + "/" + registry.IndexName, CacheDir: t.TempDir(), Client: srv.Client(), Compile: openapi.Compile}
	cat, err := remote.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Connector("alpha"); !ok {
		t.Fatal("alpha did not load")
	}
	if p := cat.Problems(); len(p) != 1 || !strings.Contains(p[0].Error(), `"openapi.json"`) || !strings.Contains(p[0].Error(), `"beta"`) {
		t.Fatalf("problems = %v", p)
	}
}

func TestRemoteCatalogRefusals(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	srv, _ := catalogServer(t, dir)
	pub, _, _ := registry.GenerateKey()
	tests := []struct {
		name string
		r    registry.Remote
	}{
		{"http URL", registry.Remote{URL: strings.Replace(srv.URL, "https://", "http://", 1) + "/"}},
		{"untrusted certificate", registry.Remote{URL: srv.URL + "/"}},
		{"unsigned with keys", registry.Remote{URL: srv.URL + "/", Client: srv.Client(), Keys: []ed25519.PublicKey{pub}}},
		{"no index", registry.Remote{URL: srv.URL + "/nowhere/", Client: srv.Client()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.r
			r.CacheDir, r.Compile = t.TempDir(), openapi.Compile
			if cat, err := r.Load(context.Background()); err == nil {
				t.Fatalf("Load passed with %d connectors", len(cat.List()))
			}
		})
	}
}
