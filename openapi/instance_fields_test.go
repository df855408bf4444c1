package openapi_test

// Issue 14 classes 7 and 8, through the whole agent path: a generated
// connector installed with chosen field values, an agent calling with MCP
// tools/call, and loopback upstreams that see what the gateway sends.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// fixturePackage generates the connector package of a test fixture and
// loads it as a one-connector catalog.
func fixturePackage(t *testing.T, file string) (*registry.Catalog, *registry.Connector) {
	t.Helper()
	spec, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	return catalogOf(t, &compiled{spec: spec, result: r}, file)
}

// installWith installs conn for tenant acme in auth mode with exactly the
// given field values and connects an agent to the instance.
func installWith(t *testing.T, cat *registry.Catalog, conn *registry.Connector, mode string, values map[string]string) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: cat})
	svc := srv.Tenants()
	if _, err := svc.CreateTenant(ctx, "acme", "acme"); err != nil {
		t.Fatal(err)
	}
	fields := map[string]*secrets.Secret{}
	for k, v := range values {
		s := secrets.New(v)
		fields[k] = &s
	}
	if _, _, err := svc.Install(ctx, "acme", fidelity.Instance, tenants.InstallRequest{
		ConnectorID: conn.Manifest.ID, AuthMode: mode, Fields: fields, Agents: []string{fidelity.Agent},
	}); err != nil {
		t.Fatalf("install in mode %q: %v", mode, err)
	}
	_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := fidelity.Connect(ctx, srv.URL, "acme", tok, http.DefaultTransport)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// callOp calls the operation id through MCP and returns the tool result.
func callOp(t *testing.T, sess *sdk.ClientSession, conn *registry.Connector, id string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	for _, e := range conn.Spec.Entities {
		for _, a := range e.Actions {
			if a.Op.ID != id {
				continue
			}
			in := map[string]any{"action": a.Name}
			for k, v := range args {
				in[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: e.Name, Arguments: in})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			return res
		}
	}
	t.Fatalf("no action calls %s", id)
	return nil
}

// recorder is a loopback upstream that keeps the method and path of
// each request.
type recorder struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestOperationServersAreFields (issue 14 class 8): each absolute server
// an operation or path names is an instance field whose default is the
// description's URL, its variables fields too; calls go where the
// instance's fields say, so loopback test doubles receive them.
func TestOperationServersAreFields(t *testing.T) {
	t.Parallel()
	cat, conn := fixturePackage(t, "opservers.yaml")
	m := &conn.Manifest
	want := map[string]string{
		"https://uploads.example.test/v2":    "{ENV:OP_UPLOADS_URL}",
		"https://reports.example.test/eu/v1": "{ENV:OP_EXAMPLE_URL}",
	}
	if len(m.Servers) != len(want) {
		t.Fatalf("manifest servers %v, want %v", m.Servers, want)
	}
	for k, v := range want {
		if m.Servers[k] != v {
			t.Errorf("server %s -> %q, want %q", k, m.Servers[k], v)
		}
	}
	for name, def := range map[string]string{
		"OP_UPLOADS_URL": "https://uploads.example.test/v2",
		"OP_EXAMPLE_URL": "https://{ENV:OP_SUBDOMAIN}.example.test/{ENV:OP_REGION}/v1",
		"OP_REGION":      "eu",
		"OP_SUBDOMAIN":   "reports",
	} {
		f, ok := m.Field(name)
		if !ok || f.Default != def || f.Secret || f.Required {
			t.Errorf("field %s: %+v (declared %v), want an optional field defaulting to %q", name, f, ok, def)
		}
	}
	// Unset, every server is the description's; a region alone moves the
	// regional server.
	got := registry.ServerURLs(m, map[string]secrets.Secret{"OP_REGION": secrets.New("ap")})
	if got["https://reports.example.test/eu/v1"] != "https://reports.example.test/ap/v1" || got["https://uploads.example.test/v2"] != "https://uploads.example.test/v2" {
		t.Errorf("server URLs with region ap: %v", got)
	}

	api, uploads, reports := newRecorder(t), newRecorder(t), newRecorder(t)
	sess := installWith(t, cat, conn, "", map[string]string{
		"OP_API_URL":     api.URL + "/v1",
		"OP_UPLOADS_URL": uploads.URL + "/v2",
		// The regional server's URL at a test double, its region
		// variable still a field of its own.
		"OP_EXAMPLE_URL": reports.URL + "/{ENV:OP_REGION}/v1",
		"OP_REGION":      "ap",
	})
	for id, args := range map[string]map[string]any{
		"getThing":   {"id": "1"},
		"uploadFile": {"body": map[string]any{"name": "a.txt"}},
		"getReport":  {"id": "7"},
	} {
		if res := callOp(t, sess, conn, id, args); res.IsError {
			t.Errorf("%s: %s", id, toolText(res))
		}
	}
	for _, c := range []struct {
		r    *recorder
		want string
	}{{api, "GET /v1/things/1"}, {uploads, "POST /v2/files"}, {reports, "GET /ap/v1/reports/7"}} {
		if got := c.r.requests(); len(got) != 1 || got[0] != c.want {
			t.Errorf("upstream got %v, want [%s]", got, c.want)
		}
	}
}

// TestPerOperationSecurity (issue 14 class 7): the auth modes come from
// the schemes the operations accept (a declared scheme no operation
// names is not offered), and each operation is sent the credential it
// accepts: the bearer token to an oauth2 operation, the header, query or
// cookie API key to one that takes that key, nothing to a public one.
// The upstream validates every request with openapi3filter, its
// security checks included, against the credentials installed.
func TestPerOperationSecurity(t *testing.T) {
	t.Parallel()
	cat, conn := fixturePackage(t, "opsecurity.yaml")
	a := conn.Manifest.Auth
	if got := strings.Join(a.Modes, ","); got != "apiKey,accessToken,oauth" {
		t.Errorf("modes %s, want apiKey,accessToken,oauth", got)
	}
	for _, f := range conn.Manifest.Env {
		if strings.Contains(f.Description, "X-Private-App") {
			t.Errorf("field %s is for a scheme no operation accepts", f.Name)
		}
	}
	secret := map[string]string{"OP_TOKEN": "tok-oauth", "OP_API_KEY": "key-header", "OP_QUERY_KEY": "key-query", "OP_COOKIE_KEY": "key-cookie"}
	// What each scheme must carry.
	check := map[string]func(*http.Request) bool{
		"oauth":     func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer tok-oauth" },
		"headerKey": func(r *http.Request) bool { return r.Header.Get("X-Api-Key") == "key-header" },
		"queryKey":  func(r *http.Request) bool { return r.URL.Query().Get("api_key") == "key-query" },
		"cookieKey": func(r *http.Request) bool {
			c, err := r.Cookie("session")
			return err == nil && c.Value == "key-cookie"
		},
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("testdata/opsecurity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{} // operation id -> credentials it carried
	upstream := httptest.NewUnstartedServer(nil)
	upstream.Start()
	t.Cleanup(upstream.Close)
	doc.Servers = openapi3.Servers{{URL: upstream.URL + "/v1"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	upstream.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A server's request has no scheme and host in its URL; the
		// router matches the description's server against them.
		r.URL.Scheme, r.URL.Host = "http", r.Host
		route, params, err := router.FindRoute(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		var carried []string
		for _, name := range []string{"oauth", "headerKey", "queryKey", "cookieKey"} {
			if check[name](r) {
				carried = append(carried, name)
			}
		}
		mu.Lock()
		seen[route.Operation.OperationID] = carried
		mu.Unlock()
		err = openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if !check[in.SecuritySchemeName](in.RequestValidationInput.Request) {
					return fmt.Errorf("no valid %s credential", in.SecuritySchemeName)
				}
				return nil
			}},
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	})
	values := map[string]string{"OP_API_URL": upstream.URL + "/v1"}
	for k, v := range secret {
		values[k] = v
	}
	sess := installWith(t, cat, conn, "accessToken", values)
	want := map[string]struct {
		args    map[string]any
		carried string
	}{
		"listContacts":   {nil, "oauth"},
		"getContact":     {map[string]any{"id": "c1"}, "headerKey"},
		"updateContact":  {map[string]any{"id": "c1", "body": map[string]any{"name": "Ada"}}, "oauth"},
		"searchContacts": {map[string]any{"q": "ada"}, "queryKey"},
		"exportContacts": {nil, "cookieKey"},
		"getStatus":      {nil, ""},
	}
	for id, w := range want {
		if res := callOp(t, sess, conn, id, w.args); res.IsError {
			t.Errorf("%s: %s", id, toolText(res))
		}
		mu.Lock()
		got, ok := seen[id]
		mu.Unlock()
		if !ok || strings.Join(got, ",") != w.carried {
			t.Errorf("%s carried %v (sent %v), want exactly %q", id, got, ok, w.carried)
		}
	}

	// An instance in mode apiKey with the key and the token: the oauth2
	// operation still gets the token, the key operation the key.
	sess = installWith(t, cat, conn, "apiKey", values)
	for _, id := range []string{"listContacts", "getContact"} {
		if res := callOp(t, sess, conn, id, want[id].args); res.IsError {
			t.Errorf("mode apiKey, %s: %s", id, toolText(res))
		}
		mu.Lock()
		got := strings.Join(seen[id], ",")
		mu.Unlock()
		if got != want[id].carried {
			t.Errorf("mode apiKey, %s carried %s, want %s", id, got, want[id].carried)
		}
	}
}

// TestOAuthOnlyOperationsOfferTokenModes (issue 14 class 7, the case of
// the issue): every operation requires oauth2, a private-app header
// scheme is declared too; the connector offers the token modes only and
// installs in mode accessToken.
func TestOAuthOnlyOperationsOfferTokenModes(t *testing.T) {
	t.Parallel()
	spec := []byte(`openapi: 3.0.3
info: {title: Hub, version: 1.0.0, description: Every operation takes OAuth.}
servers: [{url: "https://api.example.test"}]
security: [{oauth: [crm.read]}]
components:
  securitySchemes:
    oauth:
      type: oauth2
      flows: {authorizationCode: {authorizationUrl: "https://auth.example.test/a", tokenUrl: "https://auth.example.test/t", scopes: {crm.read: Read.}}}
    privateApp: {type: apiKey, in: header, name: private-app}
paths:
  /deals:
    get:
      operationId: listDeals
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
`)
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen = req.Header.Get("Authorization") + "|" + req.Header.Get("private-app")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer upstream.Close()
	cat, conn := catalogOf(t, &compiled{spec: spec, result: r}, "hub.yaml")
	a := conn.Manifest.Auth
	if a.Type != "oauth2" || strings.Join(a.Modes, ",") != "accessToken,oauth" || a.Field != "" || len(a.Schemes) != 0 {
		t.Fatalf("auth %+v, want oauth2 with modes accessToken and oauth, no key", a)
	}
	sess := installWith(t, cat, conn, "accessToken", map[string]string{"HUB_API_URL": upstream.URL, "HUB_TOKEN": "tok-1"})
	if res := callOp(t, sess, conn, "listDeals", nil); res.IsError {
		t.Fatalf("listDeals: %s", toolText(res))
	}
	if seen != "Bearer tok-1|" {
		t.Errorf("upstream saw %q, want the bearer token only", seen)
	}
}
