package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/server"
)

// TestLoadCatalogCachesCompiledRegistries: the catalog serve loads keeps
// its OpenAPI connectors' compiled registries under the data directory,
// and the next start reads them instead of compiling (the file is not
// rewritten); without a data directory nothing is written anywhere.
func TestLoadCatalogCachesCompiledRegistries(t *testing.T) {
	spec, err := os.ReadFile("../openapi/testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	catDir := registrytest.Write(t, map[string]string{
		"widgets/connector.json": `{"id": "widgets", "name": "Widgets", "version": "1.0.0", "type": "openapi", "scope": "global",
			"auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization", "field": "KEY"},
			"docs": {"llm_short_description": "Widgets: list, get, create, update and delete the widgets of an account."},
			"env": [{"name": "KEY", "label": "Key", "required": true, "secret": true}], "openapi": "openapi.yaml"}`,
		"widgets/openapi.yaml": string(spec),
	})
	data := t.TempDir()
	cfg := server.Config{DataDir: data, Catalog: catDir}

	load := func() {
		t.Helper()
		cat, _, err := server.LoadCatalog(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		conn, ok := cat.Connector("widgets")
		if !ok || conn.Spec == nil {
			t.Fatalf("widgets not loaded: %v", cat.Problems())
		}
		op, ok := conn.Spec.Operation("listWidgets")
		if !ok || op.Validate(map[string]any{"limit": 0}) == nil {
			t.Fatal("listWidgets does not validate its arguments")
		}
	}
	load()
	files, err := filepath.Glob(filepath.Join(data, "compiled", "*.registry"))
	if err != nil || len(files) != 1 {
		t.Fatalf("compiled cache holds %v (%v), want one file", files, err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(files[0], old, old); err != nil {
		t.Fatal(err)
	}
	load()
	st, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().Equal(old) {
		t.Error("the second load rewrote the compiled registry instead of reading it")
	}

	cfg.DataDir = ""
	before, _ := os.ReadDir(catDir)
	load()
	if after, _ := os.ReadDir(catDir); len(after) != len(before) {
		t.Error("loading without a data directory wrote into the catalog")
	}
}
