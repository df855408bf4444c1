package registry_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// widgetsCatalog writes a catalog of one OpenAPI connector, "widgets",
// with the given description.
func widgetsCatalog(t *testing.T, spec []byte) string {
	t.Helper()
	return registrytest.Write(t, map[string]string{
		"widgets/connector.json": openapiManifest("widgets", "openapi.yaml"),
		"widgets/openapi.yaml":   string(spec),
	})
}

func readWidgets(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../openapi/testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadCounting loads the catalog at dir with a compiled cache in
// cacheDir and returns the catalog and how many registries were compiled
// and read from the cache.
func loadCounting(t *testing.T, dir, cacheDir, compiler string) (*registry.Catalog, int, int) {
	t.Helper()
	compiled := &registry.Compiled{Dir: cacheDir, Compiler: compiler}
	cat, err := registry.LoadCatalogWith(os.DirFS(dir), openapi.Compile, registry.LoadOptions{Compiled: compiled})
	if err != nil {
		t.Fatal(err)
	}
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	n, cached := compiled.Counts()
	return cat, n, cached
}

// cacheFiles lists the compiled registry files in dir.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.registry"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompiledCacheIsNeverTrustedBlindly damages the cached file in every
// way a cache can go wrong and requires each to be detected, recompiled
// and rewritten; a changed package, or another compiler, reads another
// file; and the temporary files of the atomic write are gone.
func TestCompiledCacheIsNeverTrustedBlindly(t *testing.T) {
	spec := readWidgets(t)
	dir := widgetsCatalog(t, spec)
	cacheDir := t.TempDir()
	if _, n, cached := loadCounting(t, dir, cacheDir, "v1"); n != 1 || cached != 0 {
		t.Fatalf("cold load: compiled %d, cached %d; want 1, 0", n, cached)
	}
	files := cacheFiles(t, cacheDir)
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one file", files)
	}
	if entries, _ := os.ReadDir(cacheDir); len(entries) != 1 {
		t.Fatalf("cache directory holds %d entries (a temporary file left behind?)", len(entries))
	}
	file := files[0]
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, cached := loadCounting(t, dir, cacheDir, "v1"); n != 0 || cached != 1 {
		t.Fatalf("warm load: compiled %d, cached %d; want 0, 1", n, cached)
	}

	// Another package's file, renamed to this one's name.
	other := append(bytes.Clone(spec), '\n')
	otherCache := t.TempDir()
	loadCounting(t, widgetsCatalog(t, other), otherCache, "v1")
	foreign, err := os.ReadFile(cacheFiles(t, otherCache)[0])
	if err != nil {
		t.Fatal(err)
	}

	flipped := bytes.Clone(good)
	flipped[len(flipped)-10] ^= 0x20
	_, rest, _ := bytes.Cut(good, []byte("\n"))
	otherVersion := append([]byte("switchboard-compiled-registry 999\n"), rest...)
	for name, content := range map[string][]byte{
		"a flipped byte":         flipped,
		"truncated":              good[:len(good)/2],
		"empty":                  {},
		"another format version": otherVersion,
		"another package's file": foreign,
		"not a compiled file":    []byte("{}"),
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(file, content, 0o600); err != nil {
				t.Fatal(err)
			}
			cat, n, cached := loadCounting(t, dir, cacheDir, "v1")
			if n != 1 || cached != 0 {
				t.Fatalf("compiled %d, cached %d; want 1, 0", n, cached)
			}
			conn, _ := cat.Connector("widgets")
			if op, ok := conn.Spec.Operation("listWidgets"); !ok || op.Validate(map[string]any{"limit": 0}) == nil {
				t.Fatal("the recompiled registry does not validate listWidgets")
			}
			if b, _ := os.ReadFile(file); !bytes.Equal(b, good) {
				t.Fatal("the damaged file was not rewritten")
			}
		})
	}

	if _, n, _ := loadCounting(t, dir, cacheDir, "v2"); n != 1 {
		t.Errorf("another compiler read the first one's file (compiled %d)", n)
	}
	if _, n, _ := loadCounting(t, widgetsCatalog(t, other), cacheDir, "v1"); n != 1 {
		t.Errorf("a changed package was not recompiled (compiled %d)", n)
	}
	if got := len(cacheFiles(t, cacheDir)); got != 3 {
		t.Errorf("cache holds %d files, want 3 (two compilers, two packages)", got)
	}
}

// TestCompiledWithoutDir keeps the compact form without a disk cache:
// every load compiles, nothing is written.
func TestCompiledWithoutDir(t *testing.T) {
	dir := widgetsCatalog(t, readWidgets(t))
	for range 2 {
		if _, n, cached := loadCounting(t, dir, "", "v1"); n != 1 || cached != 0 {
			t.Fatalf("compiled %d, cached %d; want 1, 0", n, cached)
		}
	}
}

// TestCompiledFirstUseIsLazyAndOnce: an operation of a compact registry
// holds no decoded schema until first used, and many concurrent first
// uses (validation, describe, building the request) all see the same,
// complete schemas (run with -race).
func TestCompiledFirstUseIsLazyAndOnce(t *testing.T) {
	dir := widgetsCatalog(t, readWidgets(t))
	cacheDir := t.TempDir()
	loadCounting(t, dir, cacheDir, "v1")
	cat, _, cached := loadCounting(t, dir, cacheDir, "v1")
	if cached != 1 {
		t.Fatalf("cached %d, want 1", cached)
	}
	conn, _ := cat.Connector("widgets")
	op, ok := conn.Spec.Operation("listWidgets")
	if !ok {
		t.Fatal("no listWidgets")
	}
	if op.InputSchema != nil {
		t.Fatal("the operation's schema was decoded before its first use")
	}
	var entity *registry.Entity
	var action string
	for _, e := range conn.Spec.Entities {
		for _, a := range e.Actions {
			if a.Op == op {
				entity, action = e, a.Name
			}
		}
	}
	if entity == nil {
		t.Fatal("listWidgets is no entity's action")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				if err := op.Validate(map[string]any{"limit": 0}); err == nil {
					errs <- "limit 0 validated"
				}
			case 1:
				if _, err := entity.Describe(action); err != nil {
					errs <- err.Error()
				}
			case 2:
				if _, err := registry.BuildRequest(t.Context(), registry.Call{Op: op, BaseURL: "http://127.0.0.1:1", Args: map[string]any{"limit": 2}}); err != nil {
					errs <- err.Error()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if op.InputSchema == nil || op.InputSchema.Properties["limit"] == nil {
		t.Fatal("after first use the operation has no input schema")
	}
	for _, p := range op.Params {
		if p.Schema == nil || p.Schema != op.InputSchema.Properties[p.ArgName()] {
			t.Errorf("parameter %s: its schema is not its argument's", p.Name)
		}
	}
}

// TestCompiledCacheSharedByProcesses: loaders that share only the cache
// directory (as replicas or processes on one data directory do) may
// compile the same package at the same time; every one gets a working
// registry, one sound file remains, with no temporary file left, and the
// next load reads it.
func TestCompiledCacheSharedByProcesses(t *testing.T) {
	dir := widgetsCatalog(t, readWidgets(t))
	cacheDir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			compiled := &registry.Compiled{Dir: cacheDir, Compiler: "v1"}
			cat, err := registry.LoadCatalogWith(os.DirFS(dir), openapi.Compile, registry.LoadOptions{Compiled: compiled})
			if err != nil {
				errs <- err.Error()
				return
			}
			conn, ok := cat.Connector("widgets")
			if !ok {
				errs <- "widgets not loaded"
				return
			}
			if op, ok := conn.Spec.Operation("listWidgets"); !ok || op.Validate(map[string]any{"limit": 0}) == nil {
				errs <- "listWidgets does not validate"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if entries, _ := os.ReadDir(cacheDir); len(entries) != 1 {
		t.Fatalf("cache directory holds %d entries, want one file", len(entries))
	}
	if _, n, cached := loadCounting(t, dir, cacheDir, "v1"); n != 0 || cached != 1 {
		t.Fatalf("after the concurrent loads: compiled %d, cached %d; want 0, 1", n, cached)
	}
}
