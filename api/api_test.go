package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

const canary = "canary-api-9d41c2-GITHUB-TOKEN"

var builtin = sync.OnceValues(func() (*registry.Catalog, error) {
	return registry.LoadCatalog(catalog.FS(), openapi.Compile)
})

func loadCatalog(t *testing.T) *registry.Catalog {
	t.Helper()
	cat, err := builtin()
	if err != nil {
		t.Fatalf("loading the built-in catalog: %v", err)
	}
	if _, ok := cat.Connector("github"); !ok {
		t.Fatalf("the built-in catalog has no github connector: %v", cat.Problems())
	}
	return cat
}

// env is a running admin API over a fresh database.
type env struct {
	t      *testing.T
	db     *database.DB
	srv    *httptest.Server
	server *servertest.Server
	token  string // operator token
	logs   *logtest.Buffer
	mu     sync.Mutex
	bodies []string // every response body, for canary checks
}

func newEnv(t *testing.T, db *database.DB) *env {
	t.Helper()
	e := &env{t: t, db: db, logs: &logtest.Buffer{}}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := servertest.Start(t, server.Config{DB: db, ConnectorCatalog: loadCatalog(t), Logger: logger})
	gen, _, err := srv.Operators().GenerateFirst(context.Background())
	if err != nil || gen.IsZero() {
		t.Fatalf("GenerateFirst = %v; want a generated token", err)
	}
	e.token, e.srv, e.server = gen.Reveal(), srv.HTTP, srv
	return e
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// errCode returns error.code of an error response.
func (r response) errCode(t *testing.T) string {
	t.Helper()
	var b switchboard.ErrorBody
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("not an error body (%v): %s", err, r.body)
	}
	return b.Error.Code
}

// sessionCred marks a credential of req that is a session cookie's token.
const sessionCred = "session:"

// req sends a request; token "" sends none, "-" the operator token, and
// one starting with sessionCred the session cookie (with its CSRF token).
func (e *env) req(method, path, token, contentType string, body io.Reader) response {
	e.t.Helper()
	r, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token == "-" {
		token = e.token
	}
	if session, ok := strings.CutPrefix(token, sessionCred); ok {
		r.AddCookie(&http.Cookie{Name: "sb_session", Value: session})
		r.Header.Set("X-CSRF-Token", members.CSRFToken(session))
	} else if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	res, err := e.srv.Client().Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.bodies = append(e.bodies, string(b))
	e.mu.Unlock()
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// do sends an authenticated request with a JSON body (when body != "").
func (e *env) do(method, path, body string) response {
	e.t.Helper()
	if body == "" {
		return e.req(method, path, "-", "", nil)
	}
	return e.req(method, path, "-", "application/json", strings.NewReader(body))
}

func (e *env) expect(r response, status int) response {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

// rows counts the rows of every table the API writes.
func (e *env) rows() map[string]int {
	out := map[string]int{}
	for _, table := range []string{"tenants", "instances", "secrets", "callers"} {
		out[table] = dbtest.Count(e.t, e.db, table, "")
	}
	return out
}

// assertNoCanary checks that no response body and no log line holds any
// of the secrets.
func (e *env) assertNoCanary(secretValues ...string) {
	e.t.Helper()
	e.mu.Lock()
	bodies := slices.Clone(e.bodies)
	e.mu.Unlock()
	logs := e.logs.String()
	for _, v := range secretValues {
		for _, b := range bodies {
			if strings.Contains(b, v) {
				e.t.Errorf("a response body holds a secret: %s", b)
			}
		}
		if strings.Contains(logs, v) {
			e.t.Errorf("the logs hold a secret:\n%s", logs)
		}
	}
}

func TestOpenAPIDocumentDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0") {
		t.Fatalf("openapi = %s, want 3.0.x", doc.OpenAPI)
	}

	param := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	routes := map[string]bool{}
	for _, r := range s.Router().Routes() {
		routes[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = true
			if strings.HasPrefix(path, "/v1/") {
				if op.Security == nil || len(*op.Security) == 0 {
					t.Errorf("%s %s: no security requirement", method, path)
				}
				if _, ok := op.Responses.Map()["401"]; !ok {
					t.Errorf("%s %s: no 401 response", method, path)
				}
				if method == http.MethodGet && path != "/v1/connectors" {
					checkListPaging(t, path, op)
				}
			}
		}
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in /openapi.json", r)
		}
	}
	for d := range documented {
		if !routes[d] {
			t.Errorf("/openapi.json describes %s, which is not a route", d)
		}
	}
	if len(routes) < 15 {
		t.Errorf("only %d routes registered", len(routes))
	}
	if _, ok := doc.Components.SecuritySchemes["operatorToken"]; !ok {
		t.Error("no bearer security scheme")
	}
}

func TestAdminFlow(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)

		e.expect(e.req("GET", "/healthz", "", "", nil), 200)
		if m := e.expect(e.req("GET", "/readyz", "", "", nil), 200).json(t); m["status"] != "ok" {
			t.Fatalf("readyz = %v", m)
		}

		ten := e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme","name":"Acme Corp"}`), 201).json(t)
		if ten["slug"] != "acme" || ten["name"] != "Acme Corp" || !strings.HasPrefix(ten["id"].(string), "ten_") {
			t.Fatalf("tenant = %v", ten)
		}
		if got := e.expect(e.do("GET", "/v1/tenants/acme", ""), 200).json(t); got["id"] != ten["id"] {
			t.Fatalf("get tenant = %v", got)
		}
		if l := e.expect(e.do("GET", "/v1/tenants", ""), 200).json(t)["tenants"].([]any); len(l) != 1 {
			t.Fatalf("tenants = %v", l)
		}

		// The catalog: secret fields show no default.
		var conns struct{ Connectors []api.ConnectorSummary }
		if err := json.Unmarshal(e.expect(e.do("GET", "/v1/connectors", ""), 200).body, &conns); err != nil {
			t.Fatal(err)
		}
		var gh *api.ConnectorSummary
		for i := range conns.Connectors {
			if conns.Connectors[i].ID == "github" {
				gh = &conns.Connectors[i]
			}
		}
		if gh == nil || gh.Version == "" || gh.Type != "openapi" || !slices.Contains(gh.AuthModes, "apiKey") || len(gh.Tags) == 0 {
			t.Fatalf("github connector = %+v", gh)
		}
		for _, f := range gh.Fields {
			if f.Secret && (f.Default != "" || f.Example != "") {
				t.Errorf("secret field %s shows a default or example", f.Name)
			}
			if f.Name == "GITHUB_API_URL" && f.Default == "" {
				t.Errorf("non-secret field %s hides its default", f.Name)
			}
		}
		var detail api.ConnectorDetail
		if err := json.Unmarshal(e.expect(e.do("GET", "/v1/connectors/github", ""), 200).body, &detail); err != nil {
			t.Fatal(err)
		}
		if detail.ID != "github" || len(detail.Entities) == 0 || len(detail.Entities[0].Actions) == 0 || detail.Guide == "" {
			t.Fatalf("connector detail = %+v", detail)
		}
		if c := e.expect(e.do("GET", "/v1/connectors/nope", ""), 404).errCode(t); c != "connector_not_found" {
			t.Fatalf("unknown connector code = %s", c)
		}

		// Install: 201, then an identical PUT is 200 and writes nothing.
		install := `{"connector_id":"github","auth_mode":"apiKey","fields":{"GITHUB_TOKEN":"` + canary + `"},"agents":["agent-1"]}`
		var v1, v2 tenants.InstanceView
		if err := json.Unmarshal(e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh", install), 201).body, &v1); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh", install), 200).body, &v2); err != nil {
			t.Fatal(err)
		}
		if v1.Instance == nil || v2.Instance == nil || v1.ID != v2.ID || v2.Revision != v1.Revision || !v2.UpdatedAt.Equal(v1.UpdatedAt) {
			t.Fatalf("install then re-install: %+v, %+v", v1.Instance, v2.Instance)
		}
		var got tenants.InstanceView
		if err := json.Unmarshal(e.expect(e.do("GET", "/v1/tenants/acme/instances/gh", ""), 200).body, &got); err != nil {
			t.Fatal(err)
		}
		var token *tenants.FieldView
		for i := range got.Fields {
			if got.Fields[i].Name == "GITHUB_TOKEN" {
				token = &got.Fields[i]
			}
		}
		if token == nil || !token.Set || !token.Secret || token.Value != "" || token.UpdatedAt == nil {
			t.Fatalf("GITHUB_TOKEN view = %+v", token)
		}
		if l := e.expect(e.do("GET", "/v1/tenants/acme/instances", ""), 200).json(t)["instances"].([]any); len(l) != 1 {
			t.Fatalf("instances = %v", l)
		}

		// Callers: the token is shown once.
		cr := e.expect(e.do("POST", "/v1/tenants/acme/callers", `{"name":"factory","kind":"agent-platform"}`), 201)
		if cr.header.Get("Cache-Control") != "no-store" {
			t.Error("the caller token response may be cached")
		}
		var created api.CreatedCaller
		if err := json.Unmarshal(cr.body, &created); err != nil {
			t.Fatal(err)
		}
		callerToken := created.Token
		if !strings.HasPrefix(callerToken, tenants.TokenPrefix) || created.Caller == nil || created.ID == "" || created.Kind != "agent-platform" {
			t.Fatalf("created caller = %s", cr.body)
		}
		list := e.expect(e.do("GET", "/v1/tenants/acme/callers", ""), 200)
		if strings.Contains(string(list.body), callerToken) || strings.Contains(string(list.body), `"token"`) {
			t.Fatalf("the caller list shows the token: %s", list.body)
		}
		if l := list.json(t)["callers"].([]any); len(l) != 1 {
			t.Fatalf("callers = %v", l)
		}
		if n := dbtest.Count(t, db, "callers", "token_hash = $1", callerToken); n != 0 {
			t.Fatal("the caller token is stored in clear")
		}
		rev := e.expect(e.do("DELETE", "/v1/tenants/acme/callers/"+string(created.ID), ""), 200).json(t)
		if rev["revoked_at"] == nil || rev["id"] != string(created.ID) {
			t.Fatalf("revoked = %v", rev)
		}

		// Delete removes the instance and its secret rows.
		if r := e.expect(e.do("DELETE", "/v1/tenants/acme/instances/gh", ""), 204); len(r.body) != 0 {
			t.Fatalf("204 with a body: %s", r.body)
		}
		if c := e.expect(e.do("GET", "/v1/tenants/acme/instances/gh", ""), 404).errCode(t); c != "instance_not_found" {
			t.Fatalf("code = %s", c)
		}
		if n := dbtest.Count(t, db, "secrets", ""); n != 0 {
			t.Fatalf("secret rows after delete = %d", n)
		}

		// The request log: one line per request, with the request id and
		// the tenant; the query string is never logged.
		e.expect(e.req("GET", "/v1/tenants/acme?token="+canary, "-", "", nil), 200)
		r := e.req("GET", "/healthz", "", "", nil)
		if !regexp.MustCompile(`^req_[a-z2-7]+$`).MatchString(r.header.Get(switchboard.RequestIDHeader)) {
			t.Errorf("generated request id = %q", r.header.Get(switchboard.RequestIDHeader))
		}
		rq, _ := http.NewRequest("GET", e.srv.URL+"/healthz", nil)
		rq.Header.Set(switchboard.RequestIDHeader, "upstream-id.42")
		res, err := e.srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get(switchboard.RequestIDHeader) != "upstream-id.42" {
			t.Errorf("a valid incoming request id was not kept: %q", res.Header.Get(switchboard.RequestIDHeader))
		}
		rq.Header.Set(switchboard.RequestIDHeader, "bad id\"{")
		if res, err = e.srv.Client().Do(rq); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get(switchboard.RequestIDHeader); !strings.HasPrefix(got, "req_") {
			t.Errorf("an invalid incoming request id was kept: %q", got)
		}
		var sawTenant, sawUpstreamID bool
		for line := range strings.Lines(e.logs.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line is not JSON: %s", line)
			}
			if m["msg"] != "request" {
				continue
			}
			if m["request_id"] == nil || m["method"] == nil || m["status"] == nil || m["duration_ms"] == nil || m["bytes"] == nil {
				t.Errorf("request log line lacks fields: %s", line)
			}
			if m["path"] == "/v1/tenants/acme/instances/gh" && m["tenant"] == "acme" {
				sawTenant = true
			}
			if m["request_id"] == "upstream-id.42" {
				sawUpstreamID = true
			}
			if strings.Contains(m["path"].(string), "?") {
				t.Errorf("a query string was logged: %s", line)
			}
		}
		if !sawTenant || !sawUpstreamID {
			t.Errorf("request log lines missing (tenant %v, upstream id %v):\n%s", sawTenant, sawUpstreamID, e.logs.String())
		}
		e.assertNoCanary(canary, e.token)
		// The caller token is in exactly one response (its creation) and
		// in no log line.
		e.mu.Lock()
		shown := 0
		for _, b := range e.bodies {
			if strings.Contains(b, callerToken) {
				shown++
			}
		}
		e.mu.Unlock()
		if shown != 1 || strings.Contains(e.logs.String(), callerToken) {
			t.Errorf("the caller token is in %d responses (want 1) or in the logs", shown)
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme"}`), 201)
		e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh",
			`{"connector_id":"github","auth_mode":"apiKey","fields":{"GITHUB_TOKEN":"`+canary+`"},"agents":["a"]}`), 201)
		before := e.rows()

		big := `{"slug":"big","name":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`
		tests := []struct {
			name, method, path, contentType string
			body                            io.Reader
			status                          int
			code                            string
			mention                         string // the message names this
		}{
			{"malformed JSON", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":`), 400, "invalid_json", ""},
			{"not JSON", "POST", "/v1/tenants", "application/json", strings.NewReader(`slug=x`), 400, "invalid_json", ""},
			{"empty body", "POST", "/v1/tenants", "application/json", strings.NewReader(``), 400, "invalid_json", ""},
			{"unknown field", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":"x","nmae":"y"}`), 400, "invalid_json", "nmae"},
			{"wrong type", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":5}`), 400, "invalid_json", "slug"},
			{"array body", "POST", "/v1/tenants", "application/json", strings.NewReader(`[]`), 400, "invalid_json", ""},
			{"trailing data", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":"x"} {"slug":"y"}`), 400, "invalid_json", ""},
			{"trailing garbage", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":"x"}]`), 400, "invalid_json", ""},
			{"body over 1 MiB", "POST", "/v1/tenants", "application/json", strings.NewReader(big), 413, "request_too_large", ""},
			{"body over 1 MiB, chunked", "POST", "/v1/tenants", "application/json", io.MultiReader(strings.NewReader(big)), 413, "request_too_large", ""},
			{"wrong content type", "POST", "/v1/tenants", "text/plain", strings.NewReader(`{"slug":"x"}`), 415, "unsupported_media_type", ""},
			{"no content type", "POST", "/v1/tenants", "", strings.NewReader(`{"slug":"x"}`), 415, "unsupported_media_type", ""},
			{"invalid slug", "POST", "/v1/tenants", "application/json; charset=utf-8", strings.NewReader(`{"slug":"Not A Slug"}`), 400, "invalid_slug", ""},
			{"duplicate tenant", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":"acme"}`), 409, "tenant_exists", ""},
			{"unknown tenant", "GET", "/v1/tenants/nope", "", nil, 404, "tenant_not_found", ""},
			{"install: undeclared field", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":"` + canary + `","EVIL":"x"}}`), 400, "undeclared_field", "EVIL"},
			{"install: field of the wrong type", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":5}}`), 400, "invalid_json", "fields.GITHUB_TOKEN"},
			{"install: agents of the wrong type", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","agents":"a"}`), 400, "invalid_json", "agents"},
			{"install: missing field", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[]}`), 400, "missing_field", "GITHUB_TOKEN"},
			{"install: no auth_mode", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","agents":["a"],"fields":{"GITHUB_TOKEN":"x"}}`), 400, "missing_property", "auth_mode"},
			{"install: no connector_id", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"auth_mode":"apiKey","agents":["a"]}`), 400, "missing_property", "connector_id"},
			{"update: no agents", "PUT", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey"}`), 400, "missing_property", "agents"},
			{"update: null agents", "PUT", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":null}`), 400, "missing_property", "agents"},
			{"update: no auth_mode", "PUT", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"connector_id":"github","agents":["a"]}`), 400, "missing_property", "auth_mode"},
			{"patch: unknown instance", "PATCH", "/v1/tenants/acme/instances/nope", "application/json",
				strings.NewReader(`{"agents":[]}`), 404, "instance_not_found", ""},
			{"patch: empty auth_mode", "PATCH", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"auth_mode":""}`), 400, "unsupported_auth_mode", ""},
			{"patch: undeclared field", "PATCH", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"fields":{"EVIL":"x"}}`), 400, "undeclared_field", "EVIL"},
			{"patch: unknown property", "PATCH", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"agnets":[]}`), 400, "invalid_json", "agnets"},
			{"install: unknown connector", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"nope","auth_mode":"apiKey","agents":[]}`), 400, "unknown_connector", ""},
			{"install: unknown tenant", "PUT", "/v1/tenants/nope/instances/gh", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":"x"}}`), 404, "tenant_not_found", ""},
			{"update: undeclared field", "PUT", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":"other","EVIL":"x"}}`), 400, "undeclared_field", ""},
			{"caller: invalid kind", "POST", "/v1/tenants/acme/callers", "application/json",
				strings.NewReader(`{"name":"x","kind":"robot"}`), 400, "invalid_kind", ""},
			{"caller: unknown tenant", "POST", "/v1/tenants/nope/callers", "application/json",
				strings.NewReader(`{"name":"x","kind":"cron"}`), 404, "tenant_not_found", ""},
			{"revoke: unknown caller", "DELETE", "/v1/tenants/acme/callers/cal_nope", "", nil, 404, "caller_not_found", ""},
			{"delete: unknown instance", "DELETE", "/v1/tenants/acme/instances/nope", "", nil, 404, "instance_not_found", ""},
			{"NUL in the path", "GET", "/v1/tenants/ac%00me", "", nil, 400, "invalid_text", `segment \"ac\\x00me\"`},
			{"NUL in the path of a PUT", "PUT", "/v1/tenants/acme/instances/g%00h", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":"x"}}`), 400, "invalid_text", "segment"},
			{"NUL in the query", "GET", "/v1/tenants/acme/audit?instance=g%00h", "", nil, 400, "invalid_text", `query parameter \"instance\"`},
			{"NUL in a body value", "POST", "/v1/tenants", "application/json", strings.NewReader(`{"slug":"ac\u0000me"}`), 400, "invalid_text", `field \"slug\"`},
			{"NUL in a secret field", "PUT", "/v1/tenants/acme/instances/gh2", "application/json",
				strings.NewReader(`{"connector_id":"github","auth_mode":"apiKey","agents":[],"fields":{"GITHUB_TOKEN":"` + canary + `\u0000"}}`), 400, "invalid_text", `field \"fields.GITHUB_TOKEN\"`},
			{"NUL in a list", "POST", "/v1/tenants/acme/callers", "application/json",
				strings.NewReader(`{"name":"x","kind":"cron","agent_id":"a","user_id":"\u0000"}`), 400, "invalid_text", `field \"user_id\"`},
			{"NUL in an allowlist", "PATCH", "/v1/tenants/acme/instances/gh", "application/json",
				strings.NewReader(`{"agents":["a","b\u0000"]}`), 400, "invalid_text", `field \"agents[1]\"`},
			{"unknown route", "GET", "/v1/nothing", "", nil, 404, "route_not_found", ""},
			{"wrong method", "PATCH", "/v1/tenants", "", nil, 405, "method_not_allowed", ""},
		}
		for _, tc := range tests {
			r := e.req(tc.method, tc.path, "-", tc.contentType, tc.body)
			if r.status != tc.status {
				t.Errorf("%s: status %d, want %d: %s", tc.name, r.status, tc.status, r.body)
				continue
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: content type %q", tc.name, r.header.Get("Content-Type"))
			}
			if c := r.errCode(t); c != tc.code {
				t.Errorf("%s: code %s, want %s: %s", tc.name, c, tc.code, r.body)
			}
			if tc.mention != "" && !strings.Contains(string(r.body), tc.mention) {
				t.Errorf("%s: the message does not name %s: %s", tc.name, tc.mention, r.body)
			}
		}
		if after := e.rows(); !maps(before, after) {
			t.Fatalf("bad input wrote rows: before %v, after %v", before, after)
		}
		// The failed update left the stored value alone.
		var v tenants.InstanceView
		if err := json.Unmarshal(e.expect(e.do("GET", "/v1/tenants/acme/instances/gh", ""), 200).body, &v); err != nil {
			t.Fatal(err)
		}
		if v.Revision != 1 {
			t.Fatalf("revision after failed updates = %d", v.Revision)
		}
		e.assertNoCanary(canary)
	})
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOperatorAuthentication(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		for _, tc := range []struct{ name, method, path, auth string }{
			{"no token", "GET", "/v1/tenants", ""},
			{"wrong token", "GET", "/v1/tenants", "Bearer sba_wrong"},
			{"empty bearer", "GET", "/v1/tenants", "Bearer "},
			{"basic scheme", "GET", "/v1/tenants", "Basic " + e.token},
			{"token without scheme", "GET", "/v1/tenants", e.token},
			{"caller route", "GET", "/v1/tenants/acme/callers", ""},
			{"create tenant", "POST", "/v1/tenants", "Bearer nope"},
			{"install", "PUT", "/v1/tenants/acme/instances/x", ""},
		} {
			r, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader(`{"slug":"evil"}`))
			r.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			res, err := e.srv.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: %d, WWW-Authenticate %q", tc.name, res.StatusCode, res.Header.Get("WWW-Authenticate"))
			}
			if c := (response{body: b}).errCode(t); c != "unauthorized" {
				t.Errorf("%s: code %s", tc.name, c)
			}
		}
		if n := dbtest.Count(t, db, "tenants", ""); n != 0 {
			t.Fatalf("unauthenticated requests wrote %d tenants", n)
		}
		// Lower-case scheme is accepted (RFC 9110: case-insensitive).
		r, _ := http.NewRequest("GET", e.srv.URL+"/v1/tenants", nil)
		r.Header.Set("Authorization", "bearer "+e.token)
		res, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("lower-case bearer: %d", res.StatusCode)
		}
		e.assertNoCanary(e.token)
	})
}

func TestInternalErrorsAreLoggedNotSent(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	e := newEnv(t, db)
	e.expect(e.do("GET", "/v1/tenants", ""), 200) // caches the operator token
	db.Close()
	r := e.req("GET", "/v1/tenants", "-", "", nil)
	if r.status != 500 || r.errCode(t) != "internal" {
		t.Fatalf("store failure: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "sql") || strings.Contains(string(r.body), "closed") {
		t.Fatalf("internal details sent: %s", r.body)
	}
	id := r.header.Get(switchboard.RequestIDHeader)
	var logged int
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, `"msg":"internal error"`) {
			logged++
			if !strings.Contains(line, `"request_id":"`+id+`"`) || !strings.Contains(line, "closed") {
				t.Errorf("internal error log line lacks the request id or the cause: %s", line)
			}
		}
	}
	if logged != 1 {
		t.Fatalf("internal error logged %d times, want once:\n%s", logged, e.logs.String())
	}
	ready := e.req("GET", "/readyz", "", "", nil)
	if ready.status != 503 {
		t.Fatalf("readyz with the store closed = %d", ready.status)
	}
	if m := ready.json(t); m["status"] != "unavailable" || m["reason"] == "" || strings.Contains(m["reason"].(string), "sql") {
		t.Fatalf("readyz body = %v", m)
	}
}

// TestRequestLogAndRequestID: RequestLog sets the request id on the
// response before the handler runs, where the agent-path transports read
// it (gateway.RequestLogger), and logs one secret-free line per request.
func TestRequestLogAndRequestID(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	h := api.RequestLog(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gateway.RequestLogger(logger, w).Info("inside", "id", w.Header().Get(switchboard.RequestIDHeader))
		w.(http.Flusher).Flush()
		w.WriteHeader(http.StatusTeapot) // ignored after Flush
		w.Write([]byte("hello"))
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/workspaces/acme/webhooks/gh.mcp?key=s3cret", strings.NewReader("body-s3cret"))
	req.Header.Set("Authorization", "Bearer header-s3cret")
	req.Header.Set(switchboard.RequestIDHeader, "abc")
	h.ServeHTTP(rec, req)
	out := logs.String()
	if strings.Contains(out, "s3cret") {
		t.Fatalf("the log holds a query string, header or body:\n%s", out)
	}
	var lines []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["request_id"] != "abc" || lines[0]["id"] != "abc" {
		t.Fatalf("log lines = %v", lines)
	}
	l := lines[1]
	if l["status"] != float64(200) || l["bytes"] != float64(5) || l["tenant"] != "acme" ||
		l["path"] != "/workspaces/acme/webhooks/gh.mcp" || l["method"] != "POST" {
		t.Fatalf("request line = %v", l)
	}
}

// TestRequestLogLineAttributes: the request line's attributes are all at
// the top level, in this order, with the JSON handler and the text one
// (RequestLog passes the ones after the fourth as a group without a key,
// which handlers inline), with and without the tenant and the trace id.
func TestRequestLogLineAttributes(t *testing.T) {
	t.Parallel()
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		path  string
		trace bool
		keys  string
		text  string
	}{
		{"/workspaces/acme/webhooks/gh.mcp", true,
			"time level msg request_id method path status duration_ms bytes tenant trace_id",
			`msg=request request_id=abc method=POST path=/workspaces/acme/webhooks/gh.mcp status=418 duration_ms=\S+ bytes=5 tenant=acme trace_id=4bf92f3577b34da6a3ce929d0e0e4736$`},
		{"/v1/tenants/acme/instances", false,
			"time level msg request_id method path status duration_ms bytes tenant",
			`msg=request request_id=abc method=POST path=/v1/tenants/acme/instances status=418 duration_ms=\S+ bytes=5 tenant=acme$`},
		{"/healthz", false,
			"time level msg request_id method path status duration_ms bytes",
			`msg=request request_id=abc method=POST path=/healthz status=418 duration_ms=\S+ bytes=5$`},
	} {
		serve := func(handler slog.Handler) {
			h := api.RequestLog(slog.New(handler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.trace {
					w.Header().Set("Traceresponse", trace)
				}
				w.WriteHeader(http.StatusTeapot)
				w.Write([]byte("hello"))
			}))
			req := httptest.NewRequest("POST", c.path, nil)
			req.Header.Set(switchboard.RequestIDHeader, "abc")
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		var js, text logtest.Buffer
		serve(slog.NewJSONHandler(&js, nil))
		serve(slog.NewTextHandler(&text, nil))
		dec := json.NewDecoder(strings.NewReader(js.String()))
		var keys []string
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k.(string))
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if _, nested := v.(map[string]any); nested {
				t.Errorf("%s: %s is an object: %s", c.path, k, js.String())
			}
		}
		if got := strings.Join(keys, " "); got != c.keys {
			t.Errorf("%s: JSON keys %q, want %q", c.path, got, c.keys)
		}
		if !regexp.MustCompile(c.text).MatchString(strings.TrimSpace(text.String())) {
			t.Errorf("%s: text line %q, want it to match %q", c.path, text.String(), c.text)
		}
	}
}

// checkListPaging requires of a list operation that it documents paging: the limit and cursor parameters, the
// 400 of a bad one, and next_cursor in the answer. The connector catalog
// (in memory, not a store list) is the one list that does not page.
func checkListPaging(t *testing.T, path string, op *openapi3.Operation) {
	t.Helper()
	ok := op.Responses.Map()["200"]
	if ok == nil || ok.Value == nil || ok.Value.Content["application/json"] == nil {
		return
	}
	schema := ok.Value.Content["application/json"].Schema.Value
	// A list answers its rows in an array named as its path's last
	// segment (the audit log: entries).
	key := strings.ReplaceAll(path[strings.LastIndex(path, "/")+1:], "-", "_")
	if key == "audit" {
		key = "entries"
	}
	if p := schema.Properties[key]; p == nil || !p.Value.Type.Is("array") {
		return
	}
	params := map[string]bool{}
	for _, p := range op.Parameters {
		params[p.Value.Name] = true
	}
	if !params["limit"] || !params["cursor"] || schema.Properties["next_cursor"] == nil || op.Responses.Map()["400"] == nil {
		t.Errorf("GET %s is a list that does not document limit, cursor, next_cursor and 400", path)
	}
}
