package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

var update = flag.Bool("update", false, "rewrite builtin/connectors.json with registry.HashCatalog")

// TestIndexIsCurrent fails when a file under builtin changed without the
// index being regenerated. With -update it regenerates it.
func TestIndexIsCurrent(t *testing.T) {
	if *update {
		if err := registry.HashCatalog(catalog.Dir); err != nil {
			t.Fatalf("HashCatalog: %v", err)
		}
		return
	}
	t.Parallel()
	want, err := os.ReadFile(filepath.Join(catalog.Dir, registry.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "builtin")
	if err := os.CopyFS(tmp, os.DirFS(catalog.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := registry.HashCatalog(tmp); err != nil {
		t.Fatalf("HashCatalog: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(tmp, registry.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("builtin/connectors.json is stale: run `go generate ./catalog`")
	}
	// The embedded copy is the one on disk.
	embedded, err := fs.ReadFile(catalog.FS(), registry.IndexName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(embedded, want) {
		t.Fatal("embedded index differs from builtin/connectors.json")
	}
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestBuiltinCatalog(t *testing.T) {
	t.Parallel()
	cat, err := registry.LoadCatalog(catalog.FS(), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if p := cat.Problems(); len(p) != 0 {
		t.Fatalf("Problems = %v", p)
	}

	want := map[string]map[string][]string{
		"github": {
			"repositories":  {"get", "list_for_org", "list_mine"},
			"issues":        {"create", "create_comment", "get", "list", "list_comments", "update"},
			"pull_requests": {"create", "get", "list", "list_files", "merge"},
		},
		"slack": {
			"chat":          {"post_message", "update"},
			"conversations": {"history", "info", "list"},
			"users":         {"info", "list"},
		},
		"webdav": {
			"files": {"get"},
		},
	}
	var ids []string
	for _, c := range cat.List() {
		ids = append(ids, c.Manifest.ID)
	}
	if !slices.Equal(ids, []string{"clock", "github", "ntfy", "slack", "webdav"}) {
		t.Fatalf("connectors = %v, want [clock github ntfy slack webdav]", ids)
	}

	index := map[string]registry.IndexEntry{}
	for _, e := range cat.Index().Connectors {
		index[e.ID] = e
	}

	for id, entities := range want {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			c, ok := cat.Connector(id)
			if !ok {
				t.Fatalf("connector %s not loaded", id)
			}
			m := c.Manifest
			if id != "webdav" {
				// The token-in-a-header SaaS shape; webdav takes each
				// member's own Authorization value and a URL with no
				// default (knowledge's tests cover it).
				checkManifest(t, c, index[id])
			}

			if c.Spec == nil {
				t.Fatal("no compiled API")
			}
			if len(c.Spec.Problems) != 0 {
				t.Errorf("API problems: %v", c.Spec.Problems)
			}
			var names []string
			for _, e := range c.Spec.Entities {
				names = append(names, e.Name)
			}
			wantNames := make([]string, 0, len(entities))
			for n := range entities {
				wantNames = append(wantNames, n)
			}
			slices.Sort(wantNames)
			if !slices.Equal(names, wantNames) {
				t.Errorf("entities = %v, want %v", names, wantNames)
			}
			for name, actions := range entities {
				e, ok := c.Spec.Entity(name)
				if !ok {
					continue
				}
				if !validName.MatchString(e.Name) {
					t.Errorf("entity name %q is not tool-safe", e.Name)
				}
				if e.Description == "" || strings.HasPrefix(e.Description, "Operations on") {
					t.Errorf("entity %s has no description of its own: %q", name, e.Description)
				}
				var got []string
				for _, a := range e.Actions {
					got = append(got, a.Name)
					if !validName.MatchString(a.Name) || !validName.MatchString(a.Op.Name) {
						t.Errorf("%s.%s: names %q / %q are not tool-safe", name, a.Name, a.Name, a.Op.Name)
					}
					if a.Op.Summary == "" || a.Op.Description == "" {
						t.Errorf("%s.%s: no summary or description", name, a.Name)
					}
				}
				if !slices.Equal(got, actions) {
					t.Errorf("%s actions = %v, want %v", name, got, actions)
				}
				if e.InputSchema == nil {
					t.Errorf("%s has no input schema", name)
					continue
				}
				raw, err := json.Marshal(e.InputSchema)
				if err != nil {
					t.Fatalf("%s: marshalling input schema: %v", name, err)
				}
				var schema any
				if err := json.Unmarshal(raw, &schema); err != nil {
					t.Fatal(err)
				}
				checkSchema(t, name, "", schema)
			}

			// The guide names every entity and action it documents.
			for name, actions := range entities {
				if !strings.Contains(c.Guide, "## "+name) {
					t.Errorf("guide has no section for %s", name)
				}
				for _, a := range actions {
					if !strings.Contains(c.Guide, "`"+a+"`") {
						t.Errorf("guide does not mention %s action %s", name, a)
					}
				}
			}
			if m.Docs.Guide == "" || c.Guide == "" || string(c.Files[m.Docs.Guide]) != c.Guide {
				t.Errorf("guide %q not loaded", m.Docs.Guide)
			}
		})
	}
}

// checkManifest checks the manifest's auth and fields, its icons and that
// the index summary agrees with it.
func checkManifest(t *testing.T, c *registry.Connector, e registry.IndexEntry) {
	t.Helper()
	m := c.Manifest
	if m.Type != registry.TypeOpenAPI || m.Scope != "global" || !slices.Equal(m.Requires, []string{"API_KEY"}) {
		t.Errorf("type/scope/requires = %q/%q/%v", m.Type, m.Scope, m.Requires)
	}
	if !m.SupportsMode(registry.ModeAPIKey) || !m.SupportsMode(registry.ModeAccessToken) {
		t.Errorf("modes = %v, want apiKey and accessToken", m.Auth.Modes)
	}
	if m.Auth.Type != "api_key" || m.Auth.Delivery != "header" || m.Auth.Param != "Authorization" {
		t.Errorf("auth = %+v", m.Auth)
	}
	secret, ok := m.Field(m.Auth.Field)
	if !ok || !secret.Secret || !secret.Required || m.Auth.TokenField != m.Auth.Field {
		t.Errorf("auth field %q: %+v (found %v)", m.Auth.Field, secret, ok)
	}
	if m.Auth.Format != "Bearer {SECRET:"+m.Auth.Field+"}" {
		t.Errorf("auth format = %q", m.Auth.Format)
	}
	// base_url is {ENV:X} with X a non-secret, optional field with a default.
	urlField := strings.TrimSuffix(strings.TrimPrefix(m.BaseURL, "{ENV:"), "}")
	f, ok := m.Field(urlField)
	if !ok || f.Secret || f.Required || !strings.HasPrefix(f.Default, "https://") || "{ENV:"+urlField+"}" != m.BaseURL {
		t.Errorf("base_url %q: field %+v (found %v)", m.BaseURL, f, ok)
	}
	if c.Spec != nil && (len(c.Spec.Servers) == 0 || c.Spec.Servers[0] != f.Default) {
		t.Errorf("servers = %v, want the base URL default %q first", c.Spec.Servers, f.Default)
	}
	for _, fl := range m.Env {
		if fl.Label == "" || fl.Description == "" {
			t.Errorf("field %s has no label or description", fl.Name)
		}
	}
	if m.Docs.LLMShortDescription == "" || m.Description == "" || m.Docs.URL == "" {
		t.Error("docs or user description missing")
	}
	for _, icon := range []string{m.Icons.Small, m.Icons.Large} {
		if b := c.Files[icon]; icon == "" || !bytes.HasPrefix(b, []byte("<svg ")) || !bytes.Contains(b, []byte("</svg>")) {
			t.Errorf("icon %q missing or not an SVG", icon)
		}
	}
	if e.Name != m.Name || e.Type != m.Type || e.Scope != m.Scope || e.Description != m.Description ||
		!slices.Equal(e.Requires, m.Requires) || !slices.Equal(e.Tags, m.Tags) ||
		e.Auth.Type != m.Auth.Type || e.Auth.Provider != m.Auth.Provider || !slices.Equal(e.Auth.Scopes, m.Auth.Scopes) ||
		e.IconSmall != m.Icons.Small || e.IconLarge != m.Icons.Large {
		t.Errorf("index entry disagrees with the manifest:\nindex    %+v\nmanifest %+v", e, m)
	}
}

// checkSchema fails on any $ref and on any array without items.
func checkSchema(t *testing.T, entity, at string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["$ref"]; ok {
			t.Errorf("%s input schema has a $ref at %s", entity, at)
		}
		isArray := x["type"] == "array"
		if list, ok := x["type"].([]any); ok {
			isArray = slices.Contains(list, any("array"))
		}
		if _, ok := x["items"]; isArray && !ok {
			t.Errorf("%s input schema has an array without items at %s", entity, at)
		}
		for k, c := range x {
			checkSchema(t, entity, at+"/"+k, c)
		}
	case []any:
		for i, c := range x {
			checkSchema(t, entity, at+"/"+string(rune('0'+i%10)), c)
		}
	}
}

// TestDescriptionsValidate checks the hand-written descriptions against the
// OpenAPI 3.0 rules, examples included.
func TestDescriptionsValidate(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"github", "slack"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			raw, err := fs.ReadFile(catalog.FS(), id+"/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			loader := openapi3.NewLoader()
			doc, err := loader.LoadFromData(raw)
			if err != nil {
				t.Fatalf("loading: %v", err)
			}
			if err := doc.Validate(context.Background()); err != nil {
				t.Fatalf("validating: %v", err)
			}
			// The mapping names every operation exactly once: an unmapped
			// operation would silently be left out of the registry.
			rawMapping, err := fs.ReadFile(catalog.FS(), id+"/mapping.json")
			if err != nil {
				t.Fatal(err)
			}
			var mapping openapi.Mapping
			if err := json.Unmarshal(rawMapping, &mapping); err != nil {
				t.Fatal(err)
			}
			mapped := map[string]int{}
			for _, e := range mapping.Entities {
				for _, opID := range e.Actions {
					mapped[opID]++
				}
			}
			for path, item := range doc.Paths.Map() {
				for method, op := range item.Operations() {
					if mapped[op.OperationID] != 1 {
						t.Errorf("%s %s (%s) is mapped %d times, want once", method, path, op.OperationID, mapped[op.OperationID])
					}
					delete(mapped, op.OperationID)
				}
			}
			for opID := range mapped {
				t.Errorf("mapping names unknown operation %s", opID)
			}
		})
	}
}

// TestBuiltinRequests sends actions of the built-in connectors through the
// registry's dispatcher to a loopback server and checks the requests the
// vendor would receive.
func TestBuiltinRequests(t *testing.T) {
	t.Parallel()
	cat, err := registry.LoadCatalog(catalog.FS(), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	tests := []struct {
		connector, entity, action string
		basePath                  string // appended to the server URL as the instance base URL
		args                      string // JSON, as an agent sends them
		method, path, query       string
		body                      string // JSON the vendor receives; "" for none
		contentType               string // prefix of the request's Content-Type
	}{
		{"github", "repositories", "list_mine", "", `{"sort": "updated", "per_page": 100}`,
			"GET", "/user/repos", "per_page=100&sort=updated", "", ""},
		{"github", "repositories", "get", "/api/v3", `{"owner": "octo", "repo": "hello"}`,
			"GET", "/api/v3/repos/octo/hello", "", "", ""},
		{"github", "issues", "list", "", `{"owner": "octo", "repo": "hello", "state": "all", "labels": "bug,ui"}`,
			"GET", "/repos/octo/hello/issues", "labels=bug%2Cui&state=all", "", ""},
		{"github", "issues", "create", "", `{"owner": "octo", "repo": "hello", "body": {"title": "Crash", "labels": ["bug"]}}`,
			"POST", "/repos/octo/hello/issues", "", `{"labels": ["bug"], "title": "Crash"}`, "application/json"},
		{"github", "issues", "update", "", `{"owner": "octo", "repo": "hello", "issue_number": 12, "body": {"state": "closed", "state_reason": "not_planned"}}`,
			"PATCH", "/repos/octo/hello/issues/12", "", `{"state": "closed", "state_reason": "not_planned"}`, "application/json"},
		{"github", "issues", "create_comment", "", `{"owner": "octo", "repo": "hello", "issue_number": 12, "body": {"body": "Thanks!"}}`,
			"POST", "/repos/octo/hello/issues/12/comments", "", `{"body": "Thanks!"}`, "application/json"},
		{"github", "pull_requests", "list_files", "", `{"owner": "octo", "repo": "hello", "pull_number": 7, "page": 2}`,
			"GET", "/repos/octo/hello/pulls/7/files", "page=2", "", ""},
		{"github", "pull_requests", "merge", "", `{"owner": "octo", "repo": "hello", "pull_number": 7, "body": {"merge_method": "squash", "sha": "abc123"}}`,
			"PUT", "/repos/octo/hello/pulls/7/merge", "", `{"merge_method": "squash", "sha": "abc123"}`, "application/json"},
		{"slack", "chat", "post_message", "/api", `{"body": {"channel": "C0123", "text": "Deployed", "thread_ts": "1712345678.000200"}}`,
			"POST", "/api/chat.postMessage", "", `{"channel": "C0123", "text": "Deployed", "thread_ts": "1712345678.000200"}`, "application/json"},
		{"slack", "conversations", "history", "/api", `{"channel": "C0123", "limit": 50, "cursor": "dXNlcjpV"}`,
			"GET", "/api/conversations.history", "channel=C0123&cursor=dXNlcjpV&limit=50", "", ""},
		{"slack", "conversations", "list", "/api", `{"types": "public_channel,private_channel", "exclude_archived": true}`,
			"GET", "/api/conversations.list", "exclude_archived=true&types=public_channel%2Cprivate_channel", "", ""},
		{"slack", "users", "info", "/api", `{"user": "U0123"}`,
			"GET", "/api/users.info", "user=U0123", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.connector+"."+tt.entity+"."+tt.action, func(t *testing.T) {
			t.Parallel()
			type seen struct {
				method, path, query, contentType string
				body                             []byte
			}
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"), b}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"ok": true}`)
			}))
			defer srv.Close()

			c, ok := cat.Connector(tt.connector)
			if !ok {
				t.Fatalf("no connector %s", tt.connector)
			}
			e, ok := c.Spec.Entity(tt.entity)
			if !ok {
				t.Fatalf("no entity %s", tt.entity)
			}
			a, ok := e.Action(tt.action)
			if !ok {
				t.Fatalf("no action %s", tt.action)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			if err := a.Op.Validate(args); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			d := &registry.Dispatcher{}
			resp, err := d.Do(t.Context(), registry.Call{Op: a.Op, BaseURL: srv.URL + tt.basePath, Args: args})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.Status != http.StatusOK {
				t.Fatalf("status %d", resp.Status)
			}
			r := <-got
			gotQuery, err := url.ParseQuery(r.query)
			if err != nil {
				t.Fatalf("query %q: %v", r.query, err)
			}
			wantQuery, _ := url.ParseQuery(tt.query)
			if r.method != tt.method || r.path != tt.path || !reflect.DeepEqual(gotQuery, wantQuery) {
				t.Errorf("request = %s %s ?%s, want %s %s ?%s", r.method, r.path, r.query, tt.method, tt.path, tt.query)
			}
			if tt.body == "" {
				if len(r.body) != 0 {
					t.Errorf("body = %s, want none", r.body)
				}
				return
			}
			if !strings.HasPrefix(r.contentType, tt.contentType) {
				t.Errorf("Content-Type = %q, want %q", r.contentType, tt.contentType)
			}
			var gotBody, wantBody any
			if err := json.Unmarshal(r.body, &gotBody); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if err := json.Unmarshal([]byte(tt.body), &wantBody); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotBody, wantBody) {
				t.Errorf("body = %s, want %s", r.body, tt.body)
			}
		})
	}
}

func TestBuiltinValidateRejects(t *testing.T) {
	t.Parallel()
	cat, err := registry.LoadCatalog(catalog.FS(), openapi.Compile)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	tests := []struct {
		connector, entity, action, args string
	}{
		{"github", "issues", "create", `{"owner": "o", "repo": "r", "body": {"body": "no title"}}`},
		{"github", "issues", "get", `{"owner": "o", "repo": "r"}`},
		{"github", "issues", "list", `{"owner": "o", "repo": "r", "state": "deleted"}`},
		{"github", "pull_requests", "list", `{"owner": "o", "repo": "r", "per_page": 500}`},
		{"github", "pull_requests", "merge", `{"owner": "o", "repo": "r", "pull_number": 1, "body": {"merge_method": "octopus"}}`},
		{"slack", "chat", "update", `{"body": {"channel": "C1", "text": "no ts"}}`},
		{"slack", "conversations", "history", `{"limit": 10}`},
		{"slack", "users", "info", `{"user": "U1", "nope": true}`},
	}
	for _, tt := range tests {
		t.Run(tt.connector+"."+tt.entity+"."+tt.action, func(t *testing.T) {
			t.Parallel()
			c, _ := cat.Connector(tt.connector)
			e, ok := c.Spec.Entity(tt.entity)
			if !ok {
				t.Fatalf("no entity %s", tt.entity)
			}
			a, ok := e.Action(tt.action)
			if !ok {
				t.Fatalf("no action %s", tt.action)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			if err := a.Op.Validate(args); err == nil {
				t.Errorf("Validate(%s) = nil, want an error", tt.args)
			}
		})
	}
}
