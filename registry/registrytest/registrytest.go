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

// Load writes the catalog and loads it as the server does: OpenAPI
// connectors compiled with openapi.Compile and kept in the compact form
// (registry.Compiled, without a disk cache). A refused connector fails the
// test.
func Load(t testing.TB, files map[string]string) *registry.Catalog {
	t.Helper()
	cat, err := registry.LoadCatalogWith(os.DirFS(Write(t, files)), openapi.Compile, registry.LoadOptions{Compiled: &registry.Compiled{}})
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("catalog problems: %v", p)
	}
	return cat
}

// Notes is a one-operation connector whose users connect their own
// accounts (auth mode oauth): GET {API_URL}/me is the tool "me" (action
// get), and the instance names its OAuth client and endpoints in its
// fields. The README's invitation walkthrough and the end-to-end tests of
// that path install it.
var Notes = map[string]string{
	"notes/connector.json": `{
  "id": "notes", "name": "Notes", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "oauth2", "modes": ["oauth"], "scopes": ["notes.read"], "provider": "notes"},
  "docs": {"llm_short_description": "Whose notes these are: the signed-in user of the notes API."},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "CLIENT_ID", "label": "Client id"},
    {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL"},
    {"name": "TOKEN_URL", "label": "Token URL"}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"notes/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Notes", "version": "1"},
  "paths": {"/me": {"get": {"operationId": "getMe", "x-entity": "me", "x-action": "get", "summary": "Whose notes",
     "responses": {"200": {"description": "ok"}}}}}
}`,
}
