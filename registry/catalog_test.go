package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

const notesSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "Notes", "version": "1"},
  "servers": [{"url": "https://notes.example.test"}],
  "paths": {
    "/notes/{id}": {
      "get": {
        "operationId": "getNote",
        "x-entity": "notes",
        "x-action": "get",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The note."}}
      }
    }
  }
}
`

func manifestJSON(id string) string {
	return `{
  "id": "` + id + `",
  "name": "` + strings.ToUpper(id) + `",
  "version": "1.0.0",
  "type": "openapi",
  "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Key", "field": "KEY"},
  "docs": {"guide": "guide.md"},
  "env": [{"name": "KEY", "label": "Key", "required": true, "secret": true}],
  "icons": {"small": "icons/small.svg"},
  "openapi": "openapi.json"
}
`
}

// writeCatalog writes a catalog with connectors alpha and beta into a new
// temporary directory, hashes it with HashCatalog and returns the directory.
func writeCatalog(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var entries []string
	for _, id := range []string{"beta", "alpha"} {
		write(t, dir, id+"/connector.json", manifestJSON(id))
		write(t, dir, id+"/openapi.json", notesSpec)
		write(t, dir, id+"/guide.md", "# "+id+"\n\nUse notes.get.\n")
		write(t, dir, id+"/icons/small.svg", `<svg xmlns="http://www.w3.org/2000/svg"/>`)
		entries = append(entries, `{"id": "`+id+`", "name": "`+id+`", "type": "openapi", "scope": "global",
			"icon_small": "icons/small.svg", "auth": {"type": "api_key"}, "folder": "`+id+`", "files": []}`)
	}
	write(t, dir, "connectors.json", `{"version": 1, "connectors": [`+strings.Join(entries, ",")+`]}`)
	if err := registry.HashCatalog(dir); err != nil {
		t.Fatalf("HashCatalog: %v", err)
	}
	return dir
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editIndex decodes the index, lets edit change it and writes it back.
func editIndex(t *testing.T, dir string, edit func(*registry.Index)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "connectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx registry.Index
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	edit(&idx)
	out, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "connectors.json", string(out))
}

func entry(idx *registry.Index, id string) *registry.IndexEntry {
	for i := range idx.Connectors {
		if idx.Connectors[i].ID == id {
			return &idx.Connectors[i]
		}
	}
	panic("no entry " + id)
}

// openLog is a file system that records every name opened.
type openLog struct {
	fs.FS
	mu     sync.Mutex
	opened []string
}

func (o *openLog) Open(name string) (fs.File, error) {
	o.mu.Lock()
	o.opened = append(o.opened, name)
	o.mu.Unlock()
	return o.FS.Open(name)
}

func TestLoadCatalog(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if p := cat.Problems(); len(p) != 0 {
		t.Fatalf("Problems = %v, want none", p)
	}
	var ids []string
	for _, c := range cat.List() {
		ids = append(ids, c.Manifest.ID)
	}
	if !slices.Equal(ids, []string{"alpha", "beta"}) {
		t.Errorf("List ids = %v, want [alpha beta] (sorted)", ids)
	}
	c, ok := cat.Connector("alpha")
	if !ok {
		t.Fatal("Connector(alpha) not found")
	}
	if c.Guide != "# alpha\n\nUse notes.get.\n" {
		t.Errorf("Guide = %q", c.Guide)
	}
	if got := string(c.Files["icons/small.svg"]); !strings.Contains(got, "<svg") {
		t.Errorf("Files[icons/small.svg] = %q", got)
	}
	if c.Spec == nil {
		t.Fatal("API is nil")
	}
	e, ok := c.Spec.Entity("notes")
	if !ok {
		t.Fatalf("entity notes missing; entities = %v", c.Spec.Entities)
	}
	if _, ok := e.Action("get"); !ok {
		t.Error("action notes.get missing")
	}
	if _, ok := cat.Connector("gamma"); ok {
		t.Error("Connector(gamma) found, want not found")
	}

	idx := cat.Index()
	if idx.Version != 1 || len(idx.Connectors) != 2 || idx.Connectors[0].ID != "alpha" {
		t.Fatalf("Index = %+v", idx)
	}
	var paths []string
	for _, f := range idx.Connectors[0].Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"connector.json", "guide.md", "icons/small.svg", "openapi.json"}; !slices.Equal(paths, want) {
		t.Errorf("index files = %v, want %v", paths, want)
	}
	// The returned index is a copy.
	idx.Connectors[0].Files[0].Path = "changed"
	if cat.Index().Connectors[0].Files[0].Path == "changed" {
		t.Error("Index returned shared state")
	}
}

func TestLoadCatalogRefusesConnector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		code  string
		msg   string // substring of the problem
	}{
		{
			name:  "tampered file, same size",
			setup: func(t *testing.T, dir string) { write(t, dir, "beta/guide.md", "# beta\n\nUse notes.GET.\n") },
			code:  "connector_integrity",
			msg:   "sha256",
		},
		{
			name:  "tampered file, other size",
			setup: func(t *testing.T, dir string) { write(t, dir, "beta/openapi.json", notesSpec+" ") },
			code:  "connector_integrity",
			msg:   "size",
		},
		{
			name: "missing file",
			setup: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "beta", "guide.md")); err != nil {
					t.Fatal(err)
				}
			},
			code: "connector_integrity",
			msg:  "missing",
		},
		{
			name: "path traversal",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) {
					entry(idx, "beta").Files[0].Path = "../alpha/connector.json"
				})
			},
			code: "connector_invalid",
			msg:  "clean relative path",
		},
		{
			name: "absolute path",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) { entry(idx, "beta").Files[0].Path = "/etc/passwd" })
			},
			code: "connector_invalid",
			msg:  "clean relative path",
		},
		{
			name: "folder is not the id",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) { entry(idx, "beta").Folder = "alpha" })
			},
			code: "connector_invalid",
			msg:  "folder",
		},
		{
			name: "manifest id mismatch",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "beta/connector.json", manifestJSON("gamma"))
				rehash(t, dir)
			},
			code: "connector_invalid",
			msg:  `manifest id "gamma"`,
		},
		{
			name: "unknown type",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "beta/connector.json", strings.Replace(manifestJSON("beta"), `"type": "openapi"`, `"type": "ftp"`, 1))
				rehash(t, dir)
			},
			code: "connector_invalid",
			msg:  "unknown connector type",
		},
		{
			name: "no version",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "beta/connector.json", strings.Replace(manifestJSON("beta"), `"version": "1.0.0",`, ``, 1))
				rehash(t, dir)
			},
			code: "connector_invalid",
			msg:  "no version",
		},
		{
			name: "unknown manifest field",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "beta/connector.json", strings.Replace(manifestJSON("beta"), `"version"`, `"verison": "x", "version"`, 1))
				rehash(t, dir)
			},
			code: "connector_invalid",
			msg:  "verison",
		},
		{
			name: "manifest not listed",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) {
					e := entry(idx, "beta")
					e.Files = slices.DeleteFunc(e.Files, func(f registry.IndexFile) bool { return f.Path == "connector.json" })
				})
			},
			code: "connector_invalid",
			msg:  "not listed",
		},
		{
			name: "guide present but not listed",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) {
					e := entry(idx, "beta")
					e.Files = slices.DeleteFunc(e.Files, func(f registry.IndexFile) bool { return f.Path == "guide.md" })
				})
			},
			code: "connector_invalid",
			msg:  `guide "guide.md" is not listed`,
		},
		{
			name: "bad hash syntax",
			setup: func(t *testing.T, dir string) {
				editIndex(t, dir, func(idx *registry.Index) { entry(idx, "beta").Files[0].SHA256 = "zz" })
			},
			code: "connector_integrity",
			msg:  "64 hex digits",
		},
		{
			name: "description does not compile",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "beta/openapi.json", `{"openapi": `)
				rehash(t, dir)
			},
			code: "connector_invalid",
			msg:  "compiling openapi.json",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := writeCatalog(t)
			tt.setup(t, dir)
			cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
			if err != nil {
				t.Fatalf("LoadCatalog: %v (one bad connector must not fail the catalog)", err)
			}
			if _, ok := cat.Connector("alpha"); !ok {
				t.Errorf("alpha did not load; problems: %v", cat.Problems())
			}
			if _, ok := cat.Connector("beta"); ok {
				t.Fatal("beta loaded, want refused")
			}
			if n := len(cat.List()); n != 1 {
				t.Errorf("List has %d connectors, want 1", n)
			}
			if idx := cat.Index(); len(idx.Connectors) != 1 || idx.Connectors[0].ID != "alpha" {
				t.Errorf("Index = %+v, want only alpha", idx.Connectors)
			}
			probs := cat.Problems()
			if len(probs) != 1 {
				t.Fatalf("Problems = %v, want one", probs)
			}
			p := probs[0]
			if !errors.Is(p, switchboard.ErrInvalid) {
				t.Errorf("problem %v is not ErrInvalid", p)
			}
			if got := switchboard.CodeOf(p); got != tt.code {
				t.Errorf("code = %q, want %q (%v)", got, tt.code, p)
			}
			if !strings.Contains(p.Error(), `"beta"`) || !strings.Contains(p.Error(), tt.msg) {
				t.Errorf("problem = %q, want it to name beta and contain %q", p, tt.msg)
			}
		})
	}
}

// rehash refreshes the index after a deliberate change to a package.
func rehash(t *testing.T, dir string) {
	t.Helper()
	if err := registry.HashCatalog(dir); err != nil {
		t.Fatalf("HashCatalog: %v", err)
	}
}

func TestLoadCatalogNeverReadsUnlistedFiles(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	write(t, dir, "alpha/extra.txt", "not in the index")
	write(t, dir, "alpha/icons/big.svg", "<svg/>")
	fsys := &openLog{FS: os.DirFS(dir)}
	cat, err := registry.LoadCatalog(fsys, openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if p := cat.Problems(); len(p) != 0 {
		t.Fatalf("Problems = %v", p)
	}
	c, _ := cat.Connector("alpha")
	if _, ok := c.Files["extra.txt"]; ok {
		t.Error("unlisted extra.txt is in Files")
	}
	for _, name := range fsys.opened {
		if strings.HasSuffix(name, "extra.txt") || strings.HasSuffix(name, "big.svg") {
			t.Errorf("unlisted file %s was opened", name)
		}
	}
	if !slices.Contains(fsys.opened, "alpha/guide.md") {
		t.Errorf("opened = %v, want alpha/guide.md among them", fsys.opened)
	}
}

func TestLoadCatalogMalformedIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		index string // "" means no index file
	}{
		{"missing index", ""},
		{"not JSON", `{"version": 1, "connectors": [`},
		{"unknown version", `{"version": 2, "connectors": []}`},
		{"no version", `{"connectors": []}`},
		{"entry without id", `{"version": 1, "connectors": [{"folder": "x", "files": []}]}`},
		{"duplicate id", `{"version": 1, "connectors": [{"id": "a", "folder": "a"}, {"id": "a", "folder": "a"}]}`},
		{"wrong shape", `{"version": 1, "connectors": {"id": "a"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tt.index != "" {
				write(t, dir, "connectors.json", tt.index)
			}
			cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
			if err == nil {
				t.Fatalf("LoadCatalog = %v, nil; want error", cat)
			}
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestLoadCatalogEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "connectors.json", `{"version": 1, "connectors": []}`)
	cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if len(cat.List()) != 0 || len(cat.Problems()) != 0 || len(cat.Index().Connectors) != 0 {
		t.Errorf("empty catalog: list %v, problems %v", cat.List(), cat.Problems())
	}
	if _, err := registry.LoadCatalog(os.DirFS(dir), nil); err == nil {
		t.Error("LoadCatalog with a nil compiler succeeded, want error")
	}
}

func TestHashCatalog(t *testing.T) {
	t.Parallel()
	dir := writeCatalog(t)
	write(t, dir, "alpha/.DS_Store", "junk")
	write(t, dir, "alpha/.git/config", "junk")
	write(t, dir, "alpha/z/deep.txt", "deep")
	rehash(t, dir)
	first, err := os.ReadFile(filepath.Join(dir, "connectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(first, []byte("}\n")) || !bytes.Contains(first, []byte("\n  \"connectors\": [\n")) {
		t.Errorf("index is not 2-space indented JSON with a trailing newline:\n%s", first)
	}
	var idx registry.Index
	if err := json.Unmarshal(first, &idx); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range entry(&idx, "alpha").Files {
		paths = append(paths, f.Path)
		if len(f.SHA256) != 64 || f.Size <= 0 {
			t.Errorf("file %s: sha256 %q size %d", f.Path, f.SHA256, f.Size)
		}
	}
	if want := []string{"connector.json", "guide.md", "icons/small.svg", "openapi.json", "z/deep.txt"}; !slices.Equal(paths, want) {
		t.Errorf("files = %v, want %v (sorted, no dotfiles)", paths, want)
	}
	// Other fields survive, and a second run changes nothing.
	if e := entry(&idx, "beta"); e.IconSmall != "icons/small.svg" || e.Auth.Type != "api_key" {
		t.Errorf("beta entry lost fields: %+v", e)
	}
	rehash(t, dir)
	second, err := os.ReadFile(filepath.Join(dir, "connectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("HashCatalog is not deterministic")
	}
	// The hashed catalog loads, dotfiles and all.
	cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
	if err != nil || len(cat.Problems()) != 0 || len(cat.List()) != 2 {
		t.Fatalf("LoadCatalog after HashCatalog: %v, problems %v", err, cat.Problems())
	}
}

func TestHashCatalogErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		index string
	}{
		{"folder traversal", `{"version": 1, "connectors": [{"id": "a", "folder": "../a"}]}`},
		{"nested folder", `{"version": 1, "connectors": [{"id": "a", "folder": "x/a"}]}`},
		{"missing folder", `{"version": 1, "connectors": [{"id": "a", "folder": "a"}]}`},
		{"malformed", `[`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			write(t, dir, "connectors.json", tt.index)
			if err := registry.HashCatalog(dir); err == nil {
				t.Error("HashCatalog succeeded, want error")
			}
			got, _ := os.ReadFile(filepath.Join(dir, "connectors.json"))
			if string(got) != tt.index {
				t.Error("a failed HashCatalog changed the index")
			}
		})
	}
}
