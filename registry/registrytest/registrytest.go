// Package registrytest writes connector catalogs for tests: the given
// connector files in a temporary directory, an index built from their
// manifests, and the hashes `switchboard connector hash` would write.
package registrytest

import (
	"cmp"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

// Write writes files (slash paths under the catalog root, such as
// "crm/connector.json") into a new temporary directory and returns it. Every
// folder with a connector.json is indexed, with the id, name, type and auth
// type its manifest says (or the folder name when the manifest does not
// parse); the hashes and sizes are then computed.
func Write(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	index := registry.Index{Version: registry.IndexVersion}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		folder, file := path.Split(name)
		folder = path.Clean(folder)
		if file != registry.ManifestFile || folder == "." || strings.Contains(folder, "/") {
			continue
		}
		e := registry.IndexEntry{ID: folder, Name: folder, Type: registry.TypeOpenAPI, Scope: "global", Folder: folder}
		var m registry.Manifest
		if json.Unmarshal([]byte(content), &m) == nil {
			e.Type, e.Auth.Type = m.Type, m.Auth.Type
			e.Name = cmp.Or(m.Name, e.Name)
			e.Scope = cmp.Or(m.Scope, e.Scope)
		}
		index.Connectors = append(index.Connectors, e)
	}
	sort.Slice(index.Connectors, func(i, j int) bool { return index.Connectors[i].ID < index.Connectors[j].ID })
	b, err := json.Marshal(index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, registry.IndexName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := registry.HashCatalog(dir); err != nil {
		t.Fatalf("HashCatalog: %v", err)
	}
	return dir
}

// Load writes the catalog and loads it as the server does (compiling
// OpenAPI connectors with openapi.Compile); a refused connector fails the
// test.
func Load(t testing.TB, files map[string]string) *registry.Catalog {
	t.Helper()
	cat, err := registry.LoadCatalog(os.DirFS(Write(t, files)), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("catalog problems: %v", p)
	}
	return cat
}
