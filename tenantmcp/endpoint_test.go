package tenantmcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// testCatalog has two connectors: crm (contacts: list, create, delete;
// a guide that is not required) and desk (tickets, with a required guide).
var testCatalog = map[string]string{
	"crm/connector.json": `{
  "id": "crm", "name": "CRM", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"],
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "required": true, "secret": true}],
  "docs": {"guide": "guide.md"},
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"crm/guide.md": "# CRM\n\nContacts are people you sell to.\n\n## Deleting\n\nAsk the user before deleting a contact.\n",
	"crm/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "CRM", "version": "1"},
  "paths": {
    "/contacts": {
      "get": {"operationId": "listContacts", "x-entity": "contacts", "x-action": "list", "summary": "List contacts",
        "parameters": [{"name": "email", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}},
      "post": {"operationId": "createContact", "x-entity": "contacts", "x-action": "create", "summary": "Create a contact",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["email"],
          "properties": {"email": {"type": "string"}, "name": {"type": "string"}}}}}},
        "responses": {"201": {"description": "created"}}}
    },
    "/contacts/{id}": {
      "delete": {"operationId": "deleteContact", "x-entity": "contacts", "x-action": "delete", "summary": "Delete a contact",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "gone"}}}
    }
  }
}`,
	"desk/connector.json": `{
  "id": "desk", "name": "Help Desk", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"],
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "required": true, "secret": true}],
  "docs": {"guide": "guide.md", "guide_required": true},
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"desk/guide.md": "# Help Desk\n\nTickets are customer requests.\n\n## Priorities\n\nUse p1 only for outages.\n",
	"desk/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Desk", "version": "1"},
  "paths": {
    "/tickets": {
      "post": {"operationId": "openTicket", "x-entity": "tickets", "x-action": "create", "summary": "Open a support ticket",
        "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"subject": {"type": "string"}}}}}},
        "responses": {"201": {"description": "created"}}}
    }
  }
}`,
}

// fixture is a server with tenant acme: crm and desk for agent bot,
// hidden (crm) for agent other only; the upstream records what it saw.
type fixture struct {
	url, token string
	tenant     *tenants.Tenant
	srv        *servertest.Server

	mu  sync.Mutex
	saw []string // method path x-api-key
}

func newFixture(t *testing.T, db *database.DB, configure ...func(*server.Config)) *fixture {
	f := &fixture{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.saw = append(f.saw, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Api-Key"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true, "data": [{"email": "ann@example.test"}]}`)
	}))
	t.Cleanup(up.Close)
	cfg := server.Config{DB: db, ConnectorCatalog: registrytest.Load(t, testCatalog),
		Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}}
	for _, c := range configure {
		c(&cfg)
	}
	f.srv = servertest.Start(t, cfg)
	f.url = f.srv.URL
	ctx := context.Background()
	svc := f.srv.Tenants()
	var err error
	if f.tenant, err = svc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	install := func(slug, connector, key string, agents ...string) {
		u, k := secrets.New(up.URL), secrets.New(key)
		if _, _, err := svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: connector, AuthMode: "apiKey",
			Fields: map[string]*secrets.Secret{"API_URL": &u, "API_KEY": &k}, Agents: agents}); err != nil {
			t.Fatalf("install %s: %v", slug, err)
		}
	}
	install("crm", "crm", "crm-key-1", "bot")
	install("desk", "desk", "desk-key-2", "bot")
	install("hidden", "crm", "hidden-key-3", "other")
	_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
	if err != nil {
		t.Fatal(err)
	}
	f.token = tok.Reveal()
	return f
}

type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// session connects the official SDK client as agent.
func (f *fixture) session(t *testing.T, agent string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.url + "/workspaces/acme/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer " + f.token, "X-Agent-Id": agent}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: not JSON: %s", tool, text)
	}
	return out, res.IsError
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func addresses(out map[string]any) []string {
	var a []string
	rs, _ := out["results"].([]any)
	for _, r := range rs {
		a = append(a, r.(map[string]any)["address"].(string))
	}
	return a
}

// TestTenantEndpoint: an agent with the official SDK finds, describes and
// calls actions across the tenant's instances through one endpoint; the
// call takes the instance endpoint's path (the instance's credential
// upstream, schema validation, audit); instances whose allowlist does not
// admit the agent never appear; a required guide is enforced with a
// sealed token; failures are typed.
func TestTenantEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		cs := f.session(t, "bot")
		ctx := context.Background()
		if info := cs.InitializeResult().ServerInfo; info.Name != "switchboard/tenant" {
			t.Errorf("the tenant endpoint names itself %q", info.Name)
		}

		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, []string{"call", "describe", "guide", "search"}) {
			t.Fatalf("tools = %v", names)
		}

		out, isErr := call(t, cs, "search", map[string]any{"query": "create a contact with an email and a name"})
		if isErr || len(addresses(out)) == 0 || addresses(out)[0] != "crm.contacts.create" {
			t.Fatalf("search = %v", out)
		}
		first := out["results"].([]any)[0].(map[string]any)
		if first["safety"] != "write" || first["guideRequired"] != false {
			t.Errorf("hit = %v", first)
		}
		// Never an instance the agent is not allowed.
		out, _ = call(t, cs, "search", map[string]any{"query": "contacts", "limit": 50})
		for _, a := range addresses(out) {
			if strings.HasPrefix(a, "hidden.") {
				t.Errorf("search shows %s to an agent not on its allowlist", a)
			}
		}
		if len(addresses(out)) != 3 {
			t.Errorf("contacts search = %v", addresses(out))
		}
		// Safety filter and paging.
		out, _ = call(t, cs, "search", map[string]any{"query": "contacts", "safety": "readOnly"})
		if a := addresses(out); !slices.Equal(a, []string{"crm.contacts.list"}) {
			t.Errorf("readOnly search = %v", a)
		}
		var paged []string
		cursor := ""
		for range 5 {
			args := map[string]any{"query": "contacts", "limit": 1}
			if cursor != "" {
				args["cursor"] = cursor
			}
			out, _ = call(t, cs, "search", args)
			paged = append(paged, addresses(out)...)
			cursor, _ = out["nextCursor"].(string)
			if cursor == "" {
				break
			}
		}
		if len(paged) != 3 || len(slices.Compact(slices.Sorted(slices.Values(paged)))) != 3 {
			t.Errorf("paged = %v", paged)
		}
		out, isErr = call(t, cs, "search", map[string]any{"query": "contacts", "cursor": "bogus"})
		if !isErr || errCode(out) != "invalid_cursor" {
			t.Errorf("bad cursor = %v", out)
		}
		out, _ = call(t, cs, "search", map[string]any{"query": "contacts", "grouped": true})
		if g, _ := out["groups"].([]any); len(g) != 1 || g[0].(map[string]any)["instance"] != "crm" {
			t.Errorf("grouped = %v", out)
		}
		for _, filter := range []map[string]any{{"instance": "hidden"}, {"connector": "connector:nope"}} {
			filter["query"] = "contacts"
			out, isErr = call(t, cs, "search", filter)
			if e := out["error"].(map[string]any); !isErr || e["code"] != "unknown_connector" || e["retryable"] != false {
				t.Errorf("search %v = %v", filter, out)
			}
		}

		// describe
		out, isErr = call(t, cs, "describe", map[string]any{"address": "crm.contacts.create"})
		if isErr || out["truncated"] != false || !slices.Contains(toStrings(out["required"]), "body") ||
			!strings.Contains(fmt.Sprint(out["inputSchema"]), "email") {
			t.Fatalf("describe = %v", out)
		}
		if g, _ := out["guide"].(map[string]any); g["connector"] != "connector:crm" || g["summary"] != "Contacts are people you sell to." || g["required"] != false {
			t.Errorf("describe's guide = %v", out["guide"])
		}
		out, isErr = call(t, cs, "describe", map[string]any{"address": "crm.contacts.fly"})
		if !isErr || errCode(out) != "unknown_tool" {
			t.Errorf("describe of an unknown action = %v", out)
		}

		// call: the instance's own credential goes upstream.
		out, isErr = call(t, cs, "call", map[string]any{"address": "crm.contacts.list", "arguments": map[string]any{"email": "ann@example.test"}})
		if isErr || out["ok"] != true {
			t.Fatalf("call = %v", out)
		}
		f.mu.Lock()
		if !slices.Equal(f.saw, []string{"GET /contacts crm-key-1"}) {
			t.Errorf("upstream saw %q", f.saw)
		}
		f.mu.Unlock()
		// Validation is the instance endpoint's: the body's required email.
		out, isErr = call(t, cs, "call", map[string]any{"address": "crm.contacts.create", "arguments": map[string]any{"body": map[string]any{"name": "x"}}})
		if e, _ := out["error"].(map[string]any); !isErr || e["code"] != "invalid_arguments" || e["retryable"] != false {
			t.Errorf("invalid call = %v", out)
		}
		// The agent's allowlist is the instance's.
		out, isErr = call(t, cs, "call", map[string]any{"address": "hidden.contacts.list"})
		if !isErr || errCode(out) != "unknown_connector" {
			t.Errorf("call of a hidden instance = %v", out)
		}

		// A required guide: guide_required, then guide, then the call.
		out, isErr = call(t, cs, "call", map[string]any{"address": "desk.tickets.create", "arguments": map[string]any{"body": map[string]any{"subject": "help"}}})
		e, _ := out["error"].(map[string]any)
		if !isErr || e["code"] != "guide_required" || e["reason"] != "connector_required" || e["guide"] != "connector:desk" {
			t.Fatalf("call before the guide = %v", out)
		}
		out, _ = call(t, cs, "search", map[string]any{"query": "open a support ticket"})
		if rs := out["results"].([]any); rs[0].(map[string]any)["guideRequired"] != true {
			t.Errorf("search hit of a required guide = %v", rs[0])
		}
		g, isErr := call(t, cs, "guide", map[string]any{"connector": "connector:desk"})
		if isErr || g["required"] != true || g["summary"] != "Tickets are customer requests." || g["guideToken"] == "" {
			t.Fatalf("guide = %v", g)
		}
		if s := g["sections"].([]any); len(s) != 1 || s[0].(map[string]any)["title"] != "Priorities" {
			t.Errorf("sections = %v", s)
		}
		tok := g["guideToken"].(string)
		out, isErr = call(t, cs, "call", map[string]any{"address": "desk.tickets.create", "guideToken": tok, "arguments": map[string]any{"body": map[string]any{"subject": "help"}}})
		if isErr {
			t.Fatalf("call after the guide = %v", out)
		}
		// A token is the agent's own: another agent's session cannot use it.
		other := f.session(t, "other")
		out, isErr = call(t, other, "call", map[string]any{"address": "desk.tickets.create", "guideToken": tok})
		if !isErr || errCode(out) != "unknown_connector" {
			t.Errorf("other agent's call of desk = %v", out)
		}
		// A destructive action of a connector with a guide needs it read.
		out, isErr = call(t, cs, "call", map[string]any{"address": "crm.contacts.delete", "arguments": map[string]any{"id": "c1"}})
		if e, _ := out["error"].(map[string]any); !isErr || e["code"] != "guide_required" || e["reason"] != "approval_required" {
			t.Errorf("destructive call = %v", out)
		}
		// A forged or tampered token reads as none.
		out, _ = call(t, cs, "call", map[string]any{"address": "desk.tickets.create", "guideToken": tok[:len(tok)-4] + "AAAA"})
		if errCode(out) != "guide_required" {
			t.Errorf("tampered token = %v", out)
		}

		// Audited as the instance endpoint audits: tool and action.
		deadline := time.Now().Add(10 * time.Second)
		for {
			rows, err := f.srv.AuditStore().List(ctx, f.tenant.ID, audit.Query{Instance: "crm"})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range rows {
				found = found || (r.Tool == "contacts" && r.Action == "list" && r.Agent == "bot" && r.Outcome == "ok")
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no audit row of the call: %+v", rows)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func toStrings(v any) []string {
	var s []string
	list, _ := v.([]any)
	for _, x := range list {
		s = append(s, fmt.Sprint(x))
	}
	return s
}

// TestTenantEndpointRefusals: no credential, no agent, other methods.
func TestTenantEndpointRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.SQLite(t))
	post := func(h map[string]string, method string) (int, string) {
		req, _ := http.NewRequest(method, f.url+"/workspaces/acme/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, body := post(nil, http.MethodPost); st != 401 || !strings.Contains(body, `"code":"unauthorized"`) && !strings.Contains(body, "unauthorized") {
		t.Errorf("no credential = %d %s", st, body)
	}
	if st, body := post(map[string]string{"Authorization": "Bearer " + f.token}, http.MethodPost); st != 403 || !strings.Contains(body, "missing_agent_id") {
		t.Errorf("no agent = %d %s", st, body)
	}
	if st, body := post(map[string]string{"Authorization": "Bearer " + f.token, "X-Agent-Id": "bot", "Origin": "http://evil.test"}, http.MethodPost); st != 403 || !strings.Contains(body, "forbidden_origin") {
		t.Errorf("foreign origin = %d %s", st, body)
	}
	if st, _ := post(map[string]string{"Authorization": "Bearer " + f.token, "X-Agent-Id": "bot"}, http.MethodGet); st != 405 {
		t.Errorf("GET = %d", st)
	}
}

// TestTenantEndpointProtocolVersions: tools/list and a search answer in
// every protocol version the SDK serves (the instance endpoint's), with
// the raw requests each version's clients send.
func TestTenantEndpointProtocolVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.SQLite(t))
	for _, v := range append([]string{""}, sdk.SupportedProtocolVersions()...) {
		for _, m := range []struct{ method, name, params string }{
			{"tools/list", "", `{}`},
			{"tools/call", "search", `{"name":"search","arguments":{"query":"list contacts"}}`},
		} {
			params := m.params
			if v >= "2026-07-28" {
				params = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}},` + params[1:]
				if params[len(params)-2] == ',' {
					params = params[:len(params)-2] + "}"
				}
			}
			req, _ := http.NewRequest(http.MethodPost, f.url+"/workspaces/acme/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"`+m.method+`","params":`+params+`}`))
			req.Header.Set("Authorization", "Bearer "+f.token)
			req.Header.Set("X-Agent-Id", "bot")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if v != "" {
				req.Header.Set("Mcp-Protocol-Version", v)
			}
			if v >= "2026-07-28" {
				req.Header.Set("Mcp-Method", m.method)
				if m.name != "" {
					req.Header.Set("Mcp-Name", m.name)
				}
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			want := `"name":"search"`
			if m.method == "tools/call" {
				want = `crm.contacts.list`
			}
			if res.StatusCode != 200 || !strings.Contains(string(b), want) {
				t.Errorf("version %q %s = %d %s", v, m.method, res.StatusCode, b)
			}
		}
	}
}
