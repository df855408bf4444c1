package tenantmcp_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// switchCatalog is the test catalog with a Stripe connector built from
// the shared Stripe description (test data, read where it lies; it must
// be there under CI=true).
func switchCatalog(t *testing.T) *registry.Catalog {
	t.Helper()
	spec := specstest.Read(t, "stripe.yaml")
	files := maps.Clone(testCatalog)
	files["stripe/connector.json"] = `{
  "id": "stripe", "name": "Stripe", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"],
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization", "format": "Bearer {SECRET:API_KEY}", "field": "API_KEY"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "required": true, "secret": true}],
  "openapi": "openapi.yaml", "base_url": "{ENV:API_URL}"
}`
	files["stripe/openapi.yaml"] = string(spec)
	return registrytest.Load(t, files)
}

// switchFixture is a server with tenant acme: crm (small) and stripe
// (hundreds of operations), both in the default tools mode, for agent
// bot; the loopback upstream records what it saw.
type switchFixture struct {
	url, token string
	tenant     *tenants.Tenant
	srv        *servertest.Server
	cat        *registry.Catalog

	mu  sync.Mutex
	saw []string
}

func newSwitchFixture(t *testing.T, db *database.DB, cat *registry.Catalog) *switchFixture {
	f := &switchFixture{cat: cat}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.saw = append(f.saw, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object": "list", "data": [{"id": "cus_1", "object": "customer"}], "has_more": false, "url": "/v1/customers"}`)
	}))
	t.Cleanup(up.Close)
	f.srv = servertest.Start(t, server.Config{DB: db, ConnectorCatalog: cat, AdminToken: secrets.New(operatorToken),
		Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}})
	f.url = f.srv.URL
	ctx := context.Background()
	svc := f.srv.Tenants()
	var err error
	if f.tenant, err = svc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct{ slug, key string }{{"crm", "crm-key-1"}, {"stripe", "sk_test_canary"}} {
		u, k := secrets.New(up.URL), secrets.New(in.key)
		if _, _, err := svc.Install(ctx, "acme", in.slug, tenants.InstallRequest{ConnectorID: in.slug, AuthMode: "apiKey",
			Fields: map[string]*secrets.Secret{"API_URL": &u, "API_KEY": &k}, Agents: []string{"bot"}}); err != nil {
			t.Fatalf("install %s: %v", in.slug, err)
		}
	}
	_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
	if err != nil {
		t.Fatal(err)
	}
	f.token = tok.Reveal()
	return f
}

// instanceSession connects the official SDK client to an instance
// endpoint as agent bot.
func (f *switchFixture) instanceSession(t *testing.T, instance string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.url + "/workspaces/acme/webhooks/" + instance + ".mcp",
		MaxRetries: -1, HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer " + f.token, "X-Agent-Id": "bot"}}}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", instance, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolNames lists an instance endpoint's tools, sorted.
func (f *switchFixture) toolNames(t *testing.T, instance string) []string {
	t.Helper()
	res, err := f.instanceSession(t, instance).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list of %s: %v", instance, err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// admin sends an admin API request with the operator token.
func (f *switchFixture) admin(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

const operatorToken = "operator-token-of-the-switch-test-0123456789"

var metaTools = []string{"call", "describe", "guide", "search"}

// listBytes is the size of the tools/list result of a connector's tools.
func listBytes(t *testing.T, cat *registry.Catalog, id string) int {
	conn, ok := cat.Connector(id)
	if !ok {
		t.Fatalf("no connector %s", id)
	}
	return registry.MCPToolsListSize(conn.Spec.Entities)
}

// TestInstanceToolsSwitch: an instance endpoint in the default tools mode
// (auto) serves its connector's tools while they fit the tenant's
// context budget, and the meta-tools scoped to the instance when they do
// not (a Stripe-size connector); a call through the meta-tools reaches
// the upstream with the instance's credential and is audited as a direct
// call; tools and meta override auto; the tenant's own budget decides
// auto; bad values are typed errors that change nothing. Official SDK
// client, both stores.
func TestInstanceToolsSwitch(t *testing.T) {
	t.Parallel()
	cat := switchCatalog(t)
	if n := listBytes(t, cat, "stripe"); n <= mcp.DefaultContextBudget {
		t.Fatalf("stripe's tools/list is %d bytes: not over the default budget, the test proves nothing", n)
	}
	if n := listBytes(t, cat, "crm"); n > mcp.DefaultContextBudget {
		t.Fatalf("crm's tools/list is %d bytes", n)
	}
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newSwitchFixture(t, db, cat)
		ctx := context.Background()

		// auto: the small connector serves its tools.
		if got := f.toolNames(t, "crm"); !slices.Equal(got, []string{"contacts"}) {
			t.Fatalf("crm tools = %v", got)
		}
		// auto: Stripe serves the meta-tools, scoped to the instance.
		if got := f.toolNames(t, "stripe"); !slices.Equal(got, metaTools) {
			t.Fatalf("stripe tools = %v", got)
		}
		cs := f.instanceSession(t, "stripe")
		// Serving the meta-tools, the endpoint still names itself as its
		// instance's app (as crm's, in tools mode, does), not as the
		// tenant endpoint.
		for slug, s := range map[string]*sdk.ClientSession{"stripe": cs, "crm": f.instanceSession(t, "crm")} {
			info := s.InitializeResult().ServerInfo
			conn, _ := f.cat.Connector(slug)
			if name := conn.Manifest.Name; info.Name != "switchboard/"+slug || info.Title != name {
				t.Errorf("%s initialize names %q %q, want switchboard/%s %q", slug, info.Name, info.Title, slug, name)
			}
		}
		out, isErr := call(t, cs, "search", map[string]any{"query": "list all customers", "limit": 20})
		hits := addresses(out)
		if isErr || len(hits) == 0 {
			t.Fatalf("search = %v", out)
		}
		for _, a := range hits {
			if !strings.HasPrefix(a, "stripe.") {
				t.Errorf("a search of the stripe endpoint found %s", a)
			}
		}
		// Other instances of the tenant are not in this endpoint's scope.
		if out, isErr := call(t, cs, "search", map[string]any{"query": "contacts", "instance": "crm"}); !isErr || errCode(out) != "unknown_connector" {
			t.Errorf("search of crm from the stripe endpoint = %v", out)
		}
		if out, isErr := call(t, cs, "call", map[string]any{"address": "crm.contacts.list"}); !isErr || errCode(out) != "unknown_connector" {
			t.Errorf("call of crm from the stripe endpoint = %v", out)
		}
		// The call reaches GET /v1/customers with the instance's key.
		var list string
		for _, a := range hits {
			d, isErr := call(t, cs, "describe", map[string]any{"address": a})
			if !isErr && d["safety"] == "readOnly" && strings.Contains(d["summary"].(string), "customers") {
				list = a
				break
			}
		}
		if list == "" {
			t.Fatalf("no read-only customers action among %v", hits)
		}
		out, isErr = call(t, cs, "call", map[string]any{"address": list, "arguments": map[string]any{}})
		if isErr || out["object"] != "list" {
			t.Fatalf("call %s = %v", list, out)
		}
		f.mu.Lock()
		saw := slices.Clone(f.saw)
		f.mu.Unlock()
		if !slices.Equal(saw, []string{"GET /v1/customers Bearer sk_test_canary"}) {
			t.Errorf("upstream saw %q", saw)
		}
		parts := strings.Split(list, ".")
		tool, action := strings.Join(parts[1:len(parts)-1], "."), parts[len(parts)-1]
		waitAudit(t, f.srv, f.tenant, "stripe", func(r audit.Entry) bool {
			return r.Tool == tool && r.Action == action && r.Agent == "bot" && r.Outcome == "ok"
		})

		// Explicit modes override auto, through the admin API; the view
		// says the mode.
		if st, v := f.admin(t, "PATCH", "/v1/tenants/acme/instances/stripe", `{"tools_mode": "tools"}`); st != 200 || v["tools_mode"] != "tools" {
			t.Fatalf("PATCH tools_mode tools = %d %v", st, v)
		}
		if got := f.toolNames(t, "stripe"); len(got) < 20 || slices.Contains(got, "search") {
			t.Errorf("stripe in tools mode lists %d tools: %v", len(got), got[:min(len(got), 5)])
		}
		if st, v := f.admin(t, "PATCH", "/v1/tenants/acme/instances/crm", `{"tools_mode": "meta"}`); st != 200 || v["tools_mode"] != "meta" {
			t.Fatalf("PATCH tools_mode meta = %d %v", st, v)
		}
		if got := f.toolNames(t, "crm"); !slices.Equal(got, metaTools) {
			t.Errorf("crm in meta mode = %v", got)
		}
		// A bad mode is typed and changes nothing, in PATCH and PUT.
		if st, v := f.admin(t, "PATCH", "/v1/tenants/acme/instances/crm", `{"tools_mode": "all"}`); st != 400 || errCode(v) != "invalid_tools_mode" {
			t.Errorf("PATCH bad tools_mode = %d %v", st, v)
		}
		if st, v := f.admin(t, "PUT", "/v1/tenants/acme/instances/crm", `{"connector_id": "crm", "auth_mode": "apiKey", "agents": ["bot"], "tools_mode": "TOOLS"}`); st != 400 || errCode(v) != "invalid_tools_mode" {
			t.Errorf("PUT bad tools_mode = %d %v", st, v)
		}
		// A PUT without tools_mode keeps it.
		if st, v := f.admin(t, "PUT", "/v1/tenants/acme/instances/crm", `{"connector_id": "crm", "auth_mode": "apiKey", "agents": ["bot"]}`); st != 200 || v["tools_mode"] != "meta" {
			t.Errorf("PUT without tools_mode = %d %v", st, v)
		}
		in, err := f.srv.Tenants().Store().Instance(ctx, f.tenant.ID, "crm")
		if err != nil || in.ToolsMode != tenants.ToolsMeta {
			t.Fatalf("crm stored = %+v, %v", in, err)
		}

		// The tenant's budget decides auto: Stripe back in auto serves
		// its tools at a budget of its tools/list's size, the meta-tools
		// one byte below.
		if st, _ := f.admin(t, "PATCH", "/v1/tenants/acme/instances/stripe", `{"tools_mode": "auto"}`); st != 200 {
			t.Fatalf("PATCH auto = %d", st)
		}
		if got := f.toolNames(t, "stripe"); !slices.Equal(got, metaTools) {
			t.Fatalf("stripe back in auto = %v", got)
		}
		size := listBytes(t, cat, "stripe")
		if st, v := f.admin(t, "PATCH", "/v1/tenants/acme", `{"mcp_context_budget": `+itoa(size)+`}`); st != 200 || v["mcp_context_budget"] != float64(size) {
			t.Fatalf("PATCH budget = %d %v", st, v)
		}
		if got := f.toolNames(t, "stripe"); len(got) < 20 {
			t.Errorf("stripe at a budget of %d = %v", size, got)
		}
		small := size - 1
		if st, _ := f.admin(t, "PATCH", "/v1/tenants/acme", `{"mcp_context_budget": `+itoa(small)+`}`); st != 200 {
			t.Fatalf("PATCH budget = %d", st)
		}
		if got := f.toolNames(t, "stripe"); !slices.Equal(got, metaTools) {
			t.Errorf("stripe at a budget of %d = %v", small, got)
		}
		for _, bad := range []string{`512`, `2000000`, `"16k"`, `1.5`} {
			if st, v := f.admin(t, "PATCH", "/v1/tenants/acme", `{"mcp_context_budget": `+bad+`}`); st != 400 || errCode(v) != "invalid_context_budget" {
				t.Errorf("PATCH budget %s = %d %v", bad, st, v)
			}
		}
		if st, v := f.admin(t, "GET", "/v1/tenants/acme", ``); st != 200 || v["mcp_context_budget"] != float64(small) {
			t.Errorf("budget after refused changes = %d %v", st, v)
		}
		// null: the operator's default again.
		if st, v := f.admin(t, "PATCH", "/v1/tenants/acme", `{"mcp_context_budget": null}`); st != 200 || v["mcp_context_budget"] != nil {
			t.Fatalf("PATCH budget null = %d %v", st, v)
		}
		if got := f.toolNames(t, "stripe"); !slices.Equal(got, metaTools) {
			t.Errorf("stripe at the default budget = %v", got)
		}
	})
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// waitAudit waits for an audit row of instance that match accepts.
func waitAudit(t *testing.T, srv *servertest.Server, tenant *tenants.Tenant, instance string, match func(audit.Entry) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := srv.AuditStore().List(context.Background(), tenant.ID, audit.Query{Instance: instance})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(rows, match) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching audit row of %s: %+v", instance, rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
