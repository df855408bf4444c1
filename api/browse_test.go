package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

const browseSpec = `{"openapi": "3.0.3", "info": {"title": "T", "version": "1"},
  "servers": [{"url": "https://api.example.test"}],
  "paths": {"/items": {"get": {"operationId": "listItems", "x-entity": "items", "x-action": "list",
    "responses": {"200": {"description": "ok"}}}}}}`

// pngIcon is the 8-byte PNG signature and a little more: served as is.
var pngIcon = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

type browseConnector struct {
	id, manifest string
	files        map[string]string
}

// writeBrowseCatalog writes and hashes a catalog of three connectors.
func writeBrowseCatalog(t *testing.T) string {
	t.Helper()
	conns := []browseConnector{
		{"notes", `{"id": "notes", "name": "Notes", "version": "1.0.0", "type": "openapi", "scope": "global",
  "requires": ["API_KEY", "ENV"], "tags": ["productivity", "writing"],
  "user_description": "Read and write notes.",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Key", "field": "NOTES_KEY"},
  "docs": {"llm_short_description": "Notes API.", "guide": "guide.md",
    "translations": {"de": {"name": "Notizen", "user_description": "Notizen lesen und schreiben.", "guide": "guide.de.md"},
                     "pt-BR": {"name": "Notas"}}},
  "env": [{"name": "NOTES_KEY", "label": "Key", "required": true, "secret": true},
          {"name": "NOTES_URL", "label": "URL", "default": "https://notes.example.test", "example": "https://n.example.test"}],
  "icons": {"small": "icon.svg", "large": "icon.png"},
  "openapi": "openapi.json", "base_url": "{ENV:NOTES_URL}",
  "verify": {"probe": {"operation": "listItems"}}}`,
			map[string]string{"guide.md": "# Notes guide\n", "guide.de.md": "# Notizen-Anleitung\n",
				"icon.svg": `<svg xmlns="http://www.w3.org/2000/svg"/>`, "icon.png": pngIcon}},
		{"chat", `{"id": "chat", "name": "Chat", "version": "2.0.0", "type": "openapi", "scope": "user",
  "requires": ["OAUTH"], "tags": ["communication"], "user_description": "Send messages.",
  "auth": {"type": "oauth2", "modes": ["oauth", "oauthCentral"], "provider": "chatco", "scopes": ["chat.write"]},
  "docs": {"llm_short_description": "Chat API."}, "openapi": "openapi.json"}`, nil},
		{"files", `{"id": "files", "name": "Files", "version": "0.1.0", "type": "openapi", "scope": "global",
  "requires": ["API_KEY"], "tags": ["storage", "productivity"], "user_description": "Store documents.",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "query", "param": "key", "field": "FILES_KEY"},
  "docs": {"llm_short_description": "Files API."},
  "env": [{"name": "FILES_KEY", "label": "Key", "required": true, "secret": true}], "openapi": "openapi.json"}`, nil},
	}
	files := map[string]string{}
	for _, c := range conns {
		files[c.id+"/connector.json"] = c.manifest
		files[c.id+"/openapi.json"] = browseSpec
		for k, v := range c.files {
			files[c.id+"/"+k] = v
		}
	}
	return registrytest.Write(t, files)
}

type browseEnv struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	cat   *registry.Catalog
}

func newBrowseEnv(t *testing.T, dir string) *browseEnv {
	t.Helper()
	cat, err := registry.LoadCatalog(os.DirFS(dir), openapi.Compile)
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: cat})
	tok, _, err := srv.Operators().GenerateFirst(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &browseEnv{t: t, srv: srv.HTTP, token: tok.Reveal(), cat: cat}
}

func (e *browseEnv) get(path string, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func (e *browseEnv) list(query string) []string {
	e.t.Helper()
	res, b := e.get("/v1/connectors" + query)
	if res.StatusCode != 200 {
		e.t.Fatalf("GET %s = %d %s", query, res.StatusCode, b)
	}
	var out struct{ Connectors []api.ConnectorSummary }
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatal(err)
	}
	ids := []string{}
	for _, c := range out.Connectors {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestBrowseSearch(t *testing.T) {
	t.Parallel()
	e := newBrowseEnv(t, writeBrowseCatalog(t))
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"chat", "files", "notes"}},
		{"?q=NOTE", []string{"notes"}},
		{"?q=messages", []string{"chat"}},
		{"?q=storage", []string{"files"}},         // a tag
		{"?q=notizen&lang=de", []string{"notes"}}, // the translated text
		{"?q=nothing-matches", []string{}},
		{"?tag=productivity", []string{"files", "notes"}},
		{"?tag=productivity&tag=writing", []string{"notes"}},
		{"?tag=productivity,storage", []string{"files"}},
		{"?type=openapi", []string{"chat", "files", "notes"}},
		{"?type=mcp_remote", []string{}},
		{"?requires=OAUTH", []string{"chat"}},
		{"?requires=api_key", []string{"files", "notes"}},
		{"?requires=API_KEY&requires=ENV", []string{"notes"}},
		{"?q=api&tag=storage", []string{"files"}},
	}
	for _, tt := range tests {
		if got := e.list(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("GET /v1/connectors%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	for _, bad := range []string{"?type=script", "?q=" + strings.Repeat("x", 201)} {
		if res, b := e.get("/v1/connectors" + bad); res.StatusCode != 400 || !strings.Contains(string(b), "invalid_query") {
			t.Errorf("GET %s = %d %s", bad, res.StatusCode, b)
		}
	}
}

func TestBrowseDetailLanguages(t *testing.T) {
	t.Parallel()
	e := newBrowseEnv(t, writeBrowseCatalog(t))
	tests := []struct {
		query, acceptLanguage string
		lang, name, guide     string
	}{
		{"", "", "en", "Notes", "# Notes guide\n"},
		{"?lang=de", "", "de", "Notizen", "# Notizen-Anleitung\n"},
		{"?lang=DE-at", "", "de", "Notizen", "# Notizen-Anleitung\n"},
		{"?lang=fr", "de", "en", "Notes", "# Notes guide\n"}, // ?lang wins, falls back to English
		{"", "fr-FR, de;q=0.8, en;q=0.5", "de", "Notizen", "# Notizen-Anleitung\n"},
		{"", "en;q=0.9, de;q=0.4", "en", "Notes", "# Notes guide\n"},
		{"", "pt-BR", "pt-BR", "Notas", "# Notes guide\n"}, // guide falls back
		{"", "de;q=0", "en", "Notes", "# Notes guide\n"},
	}
	for _, tt := range tests {
		res, b := e.get("/v1/connectors/notes"+tt.query, "Accept-Language", tt.acceptLanguage)
		if res.StatusCode != 200 {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
		var d api.ConnectorDetail
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.Language != tt.lang || d.Name != tt.name || d.Guide != tt.guide || res.Header.Get("Content-Language") != tt.lang {
			t.Errorf("%q / %q: language %q name %q guide %q content-language %q", tt.query, tt.acceptLanguage, d.Language, d.Name, d.Guide, res.Header.Get("Content-Language"))
		}
		if !slices.Equal(d.Languages, []string{"en", "de", "pt-BR"}) {
			t.Errorf("languages = %v", d.Languages)
		}
	}
	// The list speaks the language too, per connector.
	res, b := e.get("/v1/connectors?lang=de")
	if res.StatusCode != 200 || !strings.Contains(string(b), `"name":"Notizen"`) || !strings.Contains(string(b), `"name":"Chat"`) {
		t.Fatalf("list in de: %s", b)
	}
}

func TestBrowseDetailFormSchemaAndAuth(t *testing.T) {
	t.Parallel()
	e := newBrowseEnv(t, writeBrowseCatalog(t))
	_, b := e.get("/v1/connectors/notes")
	var d api.ConnectorDetail
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Verification != "probe" || d.Auth.Type != "api_key" || !slices.Equal(d.AuthModes, []string{"apiKey"}) ||
		d.Icons.Small != "/v1/connectors/notes/icons/small" || !slices.Equal(d.Requires, []string{"API_KEY", "ENV"}) {
		t.Fatalf("detail = %+v", d)
	}
	props := d.FormSchema["properties"].(map[string]any)
	key := props["NOTES_KEY"].(map[string]any)
	url := props["NOTES_URL"].(map[string]any)
	if key["writeOnly"] != true || key["format"] != "password" || key["default"] != nil || key["title"] != "Key" {
		t.Errorf("secret field schema = %v", key)
	}
	if url["default"] != "https://notes.example.test" || url["writeOnly"] != nil {
		t.Errorf("url field schema = %v", url)
	}
	if req := d.FormSchema["required"].([]any); len(req) != 1 || req[0] != "NOTES_KEY" {
		t.Errorf("required = %v", req)
	}
	if d.FormSchema["additionalProperties"] != false || d.FormSchema["type"] != "object" {
		t.Errorf("form schema = %v", d.FormSchema)
	}

	_, b = e.get("/v1/connectors/chat")
	d = api.ConnectorDetail{}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Auth.Type != "oauth2" || d.Auth.Provider != "chatco" || !slices.Equal(d.Auth.Scopes, []string{"chat.write"}) ||
		d.Verification != "none" || d.Icons.Small != "" || len(d.FormSchema["properties"].(map[string]any)) != 0 {
		t.Fatalf("chat = %+v", d)
	}
	if res, b := e.get("/v1/connectors/nope"); res.StatusCode != 404 || !strings.Contains(string(b), "connector_not_found") {
		t.Fatalf("unknown connector: %d %s", res.StatusCode, b)
	}
}

func TestBrowseIcons(t *testing.T) {
	t.Parallel()
	e := newBrowseEnv(t, writeBrowseCatalog(t))
	tests := []struct {
		path, status, contentType, body string
	}{
		{"/v1/connectors/notes/icons/small", "200", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"/>`},
		{"/v1/connectors/notes/icons/large", "200", "image/png", pngIcon},
		{"/v1/connectors/notes/icons/huge", "404", "application/json", "icon_not_found"},
		{"/v1/connectors/chat/icons/small", "404", "application/json", "icon_not_found"},
		{"/v1/connectors/nope/icons/small", "404", "application/json", "connector_not_found"},
	}
	for _, tt := range tests {
		res, b := e.get(tt.path)
		if got := res.Status[:3]; got != tt.status || !strings.HasPrefix(res.Header.Get("Content-Type"), tt.contentType) || !strings.Contains(string(b), tt.body) {
			t.Errorf("GET %s = %s %s %q", tt.path, res.Status, res.Header.Get("Content-Type"), b)
			continue
		}
		if tt.status == "200" {
			if res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("GET %s: headers %v", tt.path, res.Header)
			}
			etag := res.Header.Get("ETag")
			if len(etag) != 66 {
				t.Errorf("ETag %q", etag)
			}
			if res, _ := e.get(tt.path, "If-None-Match", etag); res.StatusCode != 304 {
				t.Errorf("If-None-Match: %d", res.StatusCode)
			}
		}
	}
	// Icons need the operator token like the rest of /v1.
	res, err := e.srv.Client().Get(e.srv.URL + "/v1/connectors/notes/icons/small")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Fatalf("without a token: %d", res.StatusCode)
	}
}

// TestBrowseTamperedCatalogServesTheRest is the tamper acceptance test
// through the API: the tampered connector is absent, the others serve.
func TestBrowseTamperedCatalogServesTheRest(t *testing.T) {
	t.Parallel()
	dir := writeBrowseCatalog(t)
	p := filepath.Join(dir, "notes", "icon.png")
	b, _ := os.ReadFile(p)
	b[3] ^= 1
	os.WriteFile(p, b, 0o644)
	e := newBrowseEnv(t, dir)
	if probs := e.cat.Problems(); len(probs) != 1 || !strings.Contains(probs[0].Error(), `"icon.png"`) {
		t.Fatalf("problems = %v", probs)
	}
	if got := e.list(""); !slices.Equal(got, []string{"chat", "files"}) {
		t.Fatalf("list = %v", got)
	}
	if res, _ := e.get("/v1/connectors/notes"); res.StatusCode != 404 {
		t.Fatalf("tampered connector detail: %d", res.StatusCode)
	}
	if res, _ := e.get("/v1/connectors/files"); res.StatusCode != 200 {
		t.Fatalf("untouched connector detail: %d", res.StatusCode)
	}
}
