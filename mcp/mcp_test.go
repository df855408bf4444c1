package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Canary API keys: they must reach the upstream and nothing else.
const (
	canaryA = "canary-key-acme-7f3a9c1e5b"
	canaryB = "canary-key-globex-2d8e4f6a0c"
)

func (s *stack) connect(t testing.TB, tenant, instance, token, agent string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:             s.mcpURL(tenant, instance),
		HTTPClient:           &http.Client{Transport: &headers{token: token, agent: agent, bodies: s.bodies}},
		DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		t.Cleanup(func() { sess.Close() })
	}
	return sess, err
}

func mustConnect(t testing.TB, s *stack, tenant, instance, token, agent string) *sdk.ClientSession {
	t.Helper()
	sess, err := s.connect(t, tenant, instance, token, agent)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return sess
}

func callTool(t testing.TB, sess *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s %v: %v", name, args, err)
	}
	return res
}

func resultText(t testing.TB, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content has %d items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// toolError returns the {"error": {...}} object of an isError result,
// checking that the text and the structured content agree.
func toolError(t testing.TB, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("result is not an error: %s", resultText(t, res))
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(resultText(t, res)), &fromText); err != nil {
		t.Fatalf("error text is not JSON: %v", err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	tx, _ := json.Marshal(fromText)
	if string(sc) != string(tx) {
		t.Errorf("structured content %s differs from text %s", sc, tx)
	}
	e, ok := fromText["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", tx)
	}
	if msg, _ := e["message"].(string); len(msg) > 500 || msg == "" {
		t.Errorf("error message %q is empty or longer than 500", msg)
	}
	return e
}

// rpcRefusal decodes a refused request's JSON-RPC error body. Its id is
// the request's (1 in toolsCall) when the body had one, else null.
func rpcRefusal(t testing.TB, r rawResponse) (int, string) {
	t.Helper()
	var body struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("refusal body %q is not JSON: %v", r.body, err)
	}
	if body.JSONRPC != "2.0" || (string(body.ID) != "null" && string(body.ID) != "1") {
		t.Errorf("refusal envelope = %s", r.body)
	}
	if !strings.HasPrefix(body.Error.Message, body.Error.Data.Code+": ") {
		t.Errorf("message %q does not start with its code %q", body.Error.Message, body.Error.Data.Code)
	}
	return body.Error.Code, body.Error.Data.Code
}

func toolsCall(name string, args map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	return b
}

func TestMCPEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		s := newStack(t, db)
		tokA := s.tenant(t, "acme", canaryA, "agent-1", "agent-2")
		tokB := s.tenant(t, "globex", canaryB, "agent-1")
		sess := mustConnect(t, s, "acme", "shop", tokA, "agent-1")

		t.Run("initialize", func(t *testing.T) {
			init := sess.InitializeResult()
			if init == nil || init.ServerInfo.Name != "switchboard/widgets" || init.Capabilities.Tools == nil {
				t.Fatalf("initialize result = %+v", init)
			}
			if init.ProtocolVersion == "" {
				t.Error("no protocol version negotiated")
			}
		})

		t.Run("tools/list", func(t *testing.T) {
			res, err := sess.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				raw, _ := json.Marshal(tool.InputSchema)
				if strings.Contains(string(raw), "$ref") {
					t.Errorf("tool %s schema has a $ref: %s", tool.Name, raw)
				}
				if tool.Name == "status" && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
					t.Errorf("status annotations = %+v", tool.Annotations)
				}
				if tool.Name != "widgets" {
					continue
				}
				var schema struct {
					Type       string `json:"type"`
					Properties struct {
						Action struct {
							Enum []string `json:"enum"`
						} `json:"action"`
					} `json:"properties"`
				}
				json.Unmarshal(raw, &schema)
				if got := schema.Properties.Action.Enum; !slices.Equal(got, []string{"create", "delete", "get", "list", "describe"}) || schema.Type != "object" {
					t.Errorf("widgets schema = %s", raw)
				}
				// widgets can DELETE: destructive (MCP's default, left out).
				if a := tool.Annotations; a == nil || (a.DestructiveHint != nil && !*a.DestructiveHint) || a.ReadOnlyHint {
					t.Errorf("widgets annotations = %+v", tool.Annotations)
				}
			}
			if !slices.Equal(names, []string{"status", "widgets"}) {
				t.Errorf("tools = %v, want [status widgets]", names)
			}
		})

		t.Run("ping", func(t *testing.T) {
			// The SDK client (v1.8.0) negotiates 2026-07-28 and then sends
			// ping without the per-request _meta that version requires, so
			// ping is checked as a client on 2025-06-18 sends it.
			r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-1", []byte(`{"jsonrpc": "2.0", "id": 7, "method": "ping"}`))
			if r.status != 200 || !strings.Contains(r.body, `"id":7`) || !strings.Contains(r.body, `"result":{}`) {
				t.Errorf("ping: %d %s", r.status, r.body)
			}
		})

		t.Run("tools/call reaches the upstream with the tenant's key", func(t *testing.T) {
			res := callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w1"})
			if res.IsError {
				t.Fatalf("error result: %s", resultText(t, res))
			}
			if got := resultText(t, res); !strings.Contains(got, `"owner": "acme"`) {
				t.Errorf("text = %s", got)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			if sc["id"] != "w1" || sc["owner"] != "acme" {
				t.Errorf("structured = %v", res.StructuredContent)
			}
		})

		t.Run("arrays and scalars are wrapped as result", func(t *testing.T) {
			res := callTool(t, sess, "widgets", map[string]any{"action": "list", "limit": 5})
			sc, _ := res.StructuredContent.(map[string]any)
			list, _ := sc["result"].([]any)
			if res.IsError || len(list) != 1 || list[0].(map[string]any)["limit"] != "5" {
				t.Errorf("list result = %v", res.StructuredContent)
			}
			res = callTool(t, sess, "status", map[string]any{"action": "get"})
			if sc, _ := res.StructuredContent.(map[string]any); sc["result"] != "ok" {
				t.Errorf("status result = %v", res.StructuredContent)
			}
			res = callTool(t, sess, "widgets", map[string]any{"action": "create", "body": map[string]any{"name": "gear"}})
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["owner"] != "acme" {
				t.Errorf("create result = %v", res.StructuredContent)
			}
			res = callTool(t, sess, "widgets", map[string]any{"action": "delete", "id": "w1"})
			if res.IsError {
				t.Errorf("delete (204) result is an error: %s", resultText(t, res))
			}
		})

		t.Run("describe is answered locally", func(t *testing.T) {
			before := s.up.hits.Load()
			res := callTool(t, sess, "widgets", map[string]any{"action": "describe", "target": "get"})
			sc, _ := res.StructuredContent.(map[string]any)
			schema, _ := sc["inputSchema"].(map[string]any)
			if res.IsError || sc["operation_id"] != "getWidget" || schema == nil {
				t.Errorf("describe get = %s", resultText(t, res))
			}
			res = callTool(t, sess, "widgets", map[string]any{"action": "describe"})
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || len(sc["actions"].([]any)) != 4 {
				t.Errorf("describe = %s", resultText(t, res))
			}
			if n := s.up.hits.Load() - before; n != 0 {
				t.Errorf("describe called the upstream %d times", n)
			}
		})

		t.Run("upstream failures are typed tool errors", func(t *testing.T) {
			for _, tc := range []struct {
				id, code  string
				retryMs   float64
				forbidden string
			}{
				{id: "denied", code: "reconnect_required", forbidden: "token revoked"},
				{id: "secret", code: "forbidden"},
				{id: "missing", code: "not_found"},
				{id: "slow-down", code: "rate_limited", retryMs: 7000},
				{id: "boom", code: "upstream_unavailable", forbidden: "stack trace"},
			} {
				e := toolError(t, callTool(t, sess, "widgets", map[string]any{"action": "get", "id": tc.id}))
				if e["code"] != tc.code {
					t.Errorf("%s: code = %v, want %s", tc.id, e["code"], tc.code)
				}
				if got, _ := e["retryAfterMs"].(float64); got != tc.retryMs {
					t.Errorf("%s: retryAfterMs = %v, want %v", tc.id, got, tc.retryMs)
				}
				if msg, _ := e["message"].(string); tc.forbidden != "" && strings.Contains(msg, tc.forbidden) {
					t.Errorf("%s: message %q repeats the upstream body", tc.id, msg)
				}
			}
		})

		t.Run("invalid arguments", func(t *testing.T) {
			before := s.up.hits.Load()
			for _, tc := range []struct {
				name string
				args map[string]any
				want []string
			}{
				{"no action", map[string]any{"id": "w1"}, []string{"action", "create, delete, get, list, describe"}},
				{"unknown action", map[string]any{"action": "explode"}, []string{"explode", "create, delete, get, list, describe"}},
				{"describe an unknown action", map[string]any{"action": "describe", "target": "explode"}, []string{"explode", "create, delete, get, list"}},
				{"action not a string", map[string]any{"action": 3}, []string{"action"}},
				{"missing path parameter", map[string]any{"action": "get"}, []string{"id"}},
				{"wrong type", map[string]any{"action": "list", "limit": "many"}, []string{"limit"}},
				{"unknown argument", map[string]any{"action": "list", "colour": "red"}, []string{"colour"}},
				{"body missing required", map[string]any{"action": "create", "body": map[string]any{}}, []string{"body"}},
			} {
				e := toolError(t, callTool(t, sess, "widgets", tc.args))
				msg, _ := e["message"].(string)
				if e["code"] != "invalid_arguments" {
					t.Errorf("%s: code = %v (%s)", tc.name, e["code"], msg)
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: message %q does not mention %q", tc.name, msg, w)
					}
				}
			}
			if n := s.up.hits.Load() - before; n != 0 {
				t.Errorf("upstream saw %d requests for invalid arguments", n)
			}
		})

		t.Run("unknown tool is -32602", func(t *testing.T) {
			_, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "gadgets", Arguments: map[string]any{}})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("err = %v, want JSON-RPC -32602", err)
			}
		})

		t.Run("refusals never reach the upstream", func(t *testing.T) {
			before := s.up.hits.Load()
			bogus := tenants.TokenPrefix + "not-a-real-token"
			for _, tc := range []struct {
				name, tenant, instance, token, agent string
				status, rpc                          int
				code                                 string
			}{
				{"no credential", "acme", "shop", "", "agent-1", 401, -32001, "unauthorized"},
				{"unknown credential", "acme", "shop", bogus, "agent-1", 401, -32001, "unauthorized"},
				{"credential of another tenant", "acme", "shop", tokB, "agent-1", 401, -32001, "unauthorized"},
				{"unknown tenant", "initech", "shop", tokA, "agent-1", 401, -32001, "unauthorized"},
				{"unknown instance", "acme", "attic", tokA, "agent-1", 404, -32001, "not_found"},
				{"no agent id", "acme", "shop", tokA, "", 403, -32001, "missing_agent_id"},
				{"agent not allowed", "acme", "shop", tokA, "intruder", 403, -32001, "agent_not_allowed"},
			} {
				r := s.post(t, s.mcpURL(tc.tenant, tc.instance), tc.token, tc.agent, toolsCall("widgets", map[string]any{"action": "get", "id": "w1"}))
				if r.status != tc.status {
					t.Errorf("%s: status %d, want %d (%s)", tc.name, r.status, tc.status, r.body)
					continue
				}
				rpc, code := rpcRefusal(t, r)
				if rpc != tc.rpc || code != tc.code {
					t.Errorf("%s: error %d %s, want %d %s", tc.name, rpc, code, tc.rpc, tc.code)
				}
				md := s.srv.URL + "/.well-known/oauth-protected-resource/workspaces/" + tc.tenant + "/webhooks/" + tc.instance + ".mcp"
				if tc.status == 401 && r.header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+md+`"` {
					t.Errorf("%s: WWW-Authenticate = %q", tc.name, r.header.Get("WWW-Authenticate"))
				}
			}
			// Unknown and foreign credentials get the very same answer.
			a := s.post(t, s.mcpURL("acme", "shop"), bogus, "agent-1", toolsCall("widgets", nil))
			b := s.post(t, s.mcpURL("acme", "shop"), tokB, "agent-1", toolsCall("widgets", nil))
			c := s.post(t, s.mcpURL("initech", "shop"), tokA, "agent-1", toolsCall("widgets", nil))
			if a.body != b.body || a.body != c.body {
				t.Errorf("refusals differ:\n%s\n%s\n%s", a.body, b.body, c.body)
			}
			// The official client sees the refusal at initialize.
			if _, err := s.connect(t, "acme", "shop", tokA, ""); err == nil || !strings.Contains(err.Error(), "missing_agent_id") {
				t.Errorf("connect without agent id: err = %v", err)
			}
			if _, err := s.connect(t, "acme", "shop", tokA, "intruder"); err == nil || !strings.Contains(err.Error(), "agent_not_allowed") {
				t.Errorf("connect as a foreign agent: err = %v", err)
			}
			if n := s.up.hits.Load() - before; n != 0 {
				t.Errorf("upstream saw %d refused requests", n)
			}
		})

		t.Run("bad input gets a clear error", func(t *testing.T) {
			before := s.up.hits.Load()
			huge := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"widgets","arguments":{"action":"get","id":"` +
				strings.Repeat("x", 1<<20) + `"}}}`)
			for _, tc := range []struct {
				name   string
				body   []byte
				status int
				rpc    int
				code   string
			}{
				{"malformed JSON", []byte(`{"jsonrpc": "2.0", "id": 1, "method": "tools/list"`), 400, -32700, "parse_error"},
				{"not JSON-RPC 2.0", []byte(`{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}`), 400, -32600, "invalid_request"},
				{"no method", []byte(`{"jsonrpc": "2.0", "id": 1}`), 400, -32600, "invalid_request"},
				{"not an object", []byte(`42`), 400, -32600, "invalid_request"},
				{"empty", nil, 400, -32600, "invalid_request"},
				{"over 1 MiB", huge, 413, -32600, "request_too_large"},
			} {
				r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-1", tc.body)
				if r.status != tc.status {
					t.Errorf("%s: status %d, want %d (%s)", tc.name, r.status, tc.status, r.body)
					continue
				}
				if rpc, code := rpcRefusal(t, r); rpc != tc.rpc || code != tc.code {
					t.Errorf("%s: error %d %s, want %d %s", tc.name, rpc, code, tc.rpc, tc.code)
				}
			}
			// A well-formed request for an unknown method is a JSON-RPC
			// error a client reads as the call's, not a transport failure.
			r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-1", []byte(`{"jsonrpc": "2.0", "id": 1, "method": "tools/explode"}`))
			if rpc, code := rpcRefusal(t, r); r.status != 200 || rpc != -32601 || code != "method_not_found" {
				t.Errorf("unknown method: status %d (%s)", r.status, r.body)
			}
			if n := s.up.hits.Load() - before; n != 0 {
				t.Errorf("upstream saw %d requests for bad input", n)
			}
		})

		t.Run("notifications are answered 202 with no body", func(t *testing.T) {
			r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-1", []byte(`{"jsonrpc": "2.0", "method": "notifications/initialized"}`))
			if r.status != http.StatusAccepted || r.body != "" {
				t.Errorf("notification: %d %q", r.status, r.body)
			}
		})

		t.Run("a single POST tools/call works without a session", func(t *testing.T) {
			r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-2", toolsCall("widgets", map[string]any{"action": "get", "id": "w9"}))
			if r.status != 200 || !strings.Contains(r.body, `\"id\": \"w9\"`) || r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("stateless call: %d %v %s", r.status, r.header, r.body)
			}
		})

		t.Run("tenants are isolated", func(t *testing.T) {
			sessB := mustConnect(t, s, "globex", "shop", tokB, "agent-1")
			res := callTool(t, sessB, "widgets", map[string]any{"action": "get", "id": "w1"})
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["owner"] != "globex" {
				t.Errorf("globex call = %v", res.StructuredContent)
			}
			res = callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w1"})
			if sc, _ := res.StructuredContent.(map[string]any); sc["owner"] != "acme" {
				t.Errorf("acme call after globex = %v", res.StructuredContent)
			}
			// agent-2 is allowed at acme, not at globex.
			r := s.post(t, s.mcpURL("globex", "shop"), tokB, "agent-2", toolsCall("widgets", map[string]any{"action": "get", "id": "w1"}))
			if _, code := rpcRefusal(t, r); r.status != 403 || code != "agent_not_allowed" {
				t.Errorf("globex as agent-2: %d %s", r.status, r.body)
			}
		})

		t.Run("changes invalidate the caches at once", func(t *testing.T) {
			ctx := context.Background()
			tok := s.caller(t, "acme", tenants.CallerRequest{Name: "short-lived", Kind: tenants.KindAgentPlatform})
			call := toolsCall("widgets", map[string]any{"action": "get", "id": "w1"})
			if r := s.post(t, s.mcpURL("acme", "shop"), tok, "agent-1", call); r.status != 200 {
				t.Fatalf("before revocation: %d %s", r.status, r.body)
			}
			callers, _ := s.svc.ListCallers(ctx, "acme")
			for _, c := range callers {
				if c.Name == "short-lived" {
					if _, err := s.svc.RevokeCaller(ctx, "acme", c.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if r := s.post(t, s.mcpURL("acme", "shop"), tok, "agent-1", call); r.status != 401 {
				t.Errorf("after revocation: %d %s", r.status, r.body)
			}

			// Removing an agent from the list takes effect on the next call.
			s.install(t, "acme", "shop", canaryA, "agent-1")
			if r := s.post(t, s.mcpURL("acme", "shop"), tokA, "agent-2", call); r.status != 403 {
				t.Errorf("agent-2 after removal: %d %s", r.status, r.body)
			}
			// A rotated key is used on the next call.
			const rotated = "canary-key-acme-rotated-91b2"
			s.install(t, "acme", "shop", rotated, "agent-1", "agent-2")
			res := callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w1"})
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["owner"] != "acme" {
				t.Errorf("after rotation: %s", resultText(t, res))
			}
			s.up.mu.Lock()
			delete(s.up.owners, canaryA)
			s.up.mu.Unlock()
			res = callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w2"})
			if res.IsError {
				t.Errorf("old key still in use: %s", resultText(t, res))
			}
		})

		// The server registers the OAuth modes (the hand-built stack this
		// test once ran on did not, and answered auth_mode_not_available):
		// a per-user instance called without a user is refused before any
		// upstream call.
		t.Run("a per-user instance called without a user is a tool error", func(t *testing.T) {
			url := secrets.New(s.up.srv.URL)
			key := secrets.New("irrelevant")
			if _, _, err := s.svc.Install(context.Background(), "acme", "oauthy", tenants.InstallRequest{
				ConnectorID: "widgets", AuthMode: "oauth",
				Fields: map[string]*secrets.Secret{"API_URL": &url, "API_KEY": &key}, Agents: []string{"agent-1"},
			}); err != nil {
				t.Fatal(err)
			}
			before := s.up.hits.Load()
			so := mustConnect(t, s, "acme", "oauthy", tokA, "agent-1")
			e := toolError(t, callTool(t, so, "widgets", map[string]any{"action": "get", "id": "w1"}))
			if e["code"] != "user_required" {
				t.Errorf("oauth instance: %v", e)
			}
			if s.up.hits.Load() != before {
				t.Error("upstream called without credentials")
			}
		})

		t.Run("App mode", func(t *testing.T) {
			appURL := func(tenant, instance, op string) string {
				return s.srv.URL + "/workspaces/" + tenant + "/apps/" + instance + "/ops/" + op
			}
			for _, tc := range []struct {
				name, tenant, op, token, agent, body string
				status                               int
				contains                             string
			}{
				{"by operationId", "acme", "getWidget", tokA, "agent-1", `{"id": "w1"}`, 200, `{"id": "w1", "owner": "acme"}`},
				{"created", "acme", "createWidget", tokA, "agent-1", `{"body": {"name": "cog"}}`, 201, `"owner": "acme"`},
				{"array body", "acme", "listWidgets", tokA, "agent-1", ``, 200, `[{"id": "w1"`},
				{"other tenant", "globex", "getWidget", tokB, "agent-1", `{"id": "w1"}`, 200, `"owner": "globex"`},
				{"upstream 404", "acme", "getWidget", tokA, "agent-1", `{"id": "missing"}`, 404, `"code":"not_found"`},
				{"upstream 429", "acme", "getWidget", tokA, "agent-1", `{"id": "slow-down"}`, 429, `"retryAfterMs":7000`},
				{"upstream 500", "acme", "getWidget", tokA, "agent-1", `{"id": "boom"}`, 502, `"code":"upstream_unavailable"`},
				{"invalid arguments", "acme", "getWidget", tokA, "agent-1", `{"id": 5, "extra": 1}`, 400, `"code":"invalid_arguments"`},
				{"not an object", "acme", "getWidget", tokA, "agent-1", `[1]`, 400, `"code":"invalid_json"`},
				{"unknown operation", "acme", "explodeWidget", tokA, "agent-1", `{}`, 404, `"code":"unknown_operation"`},
				{"no agent", "acme", "getWidget", tokA, "", `{"id": "w1"}`, 403, `"code":"missing_agent_id"`},
				{"foreign agent", "acme", "getWidget", tokA, "intruder", `{"id": "w1"}`, 403, `"code":"agent_not_allowed"`},
				{"foreign caller", "acme", "getWidget", tokB, "agent-1", `{"id": "w1"}`, 401, `"code":"unauthorized"`},
			} {
				r := s.post(t, appURL(tc.tenant, "shop", tc.op), tc.token, tc.agent, []byte(tc.body))
				if r.status != tc.status || !strings.Contains(r.body, tc.contains) {
					t.Errorf("%s: %d %s, want %d containing %s", tc.name, r.status, r.body, tc.status, tc.contains)
				}
			}
			before := s.up.hits.Load()
			r := s.post(t, appURL("acme", "shop", "getWidget"), tokA, "agent-1", []byte(`{"id": "`+strings.Repeat("y", 1<<20)+`"}`))
			if r.status != http.StatusRequestEntityTooLarge {
				t.Errorf("oversized App mode body: %d %s", r.status, r.body)
			}
			if s.up.hits.Load() != before {
				t.Error("oversized body reached the upstream")
			}
		})

		t.Run("canary keys appear in no response and no log line", func(t *testing.T) {
			for _, canary := range []string{canaryA, canaryB, "canary-key-acme-rotated"} {
				if strings.Contains(s.bodies.String(), canary) {
					t.Errorf("a response body contains the API key %s", canary)
				}
				if strings.Contains(s.logs.String(), canary) {
					t.Errorf("a log line contains the API key %s", canary)
				}
			}
			for _, want := range []string{
				`"msg":"mcp request refused","request_id":"req_fixture","tenant":"acme","instance":"shop","mode":"mcp","code":"agent_not_allowed"`,
				`"msg":"tool call failed","request_id":"req_fixture","tenant":"acme","instance":"shop","mode":"mcp","agent":"agent-1"`,
				`"msg":"app call failed","request_id":"req_fixture","tenant":"acme","instance":"shop","mode":"app"`,
			} {
				if !strings.Contains(s.logs.String(), want) {
					t.Errorf("no log line with %s", want)
				}
			}
		})
	})
}

// TestWarmCallNeedsNoDatabase closes the store after a first call: the
// second call is served from the caches alone.
func TestWarmCallNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	s := newStack(t, db)
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	sess := mustConnect(t, s, "acme", "shop", tok, "agent-1")
	if res := callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w1"}); res.IsError {
		t.Fatalf("cold call: %s", resultText(t, res))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res := callTool(t, sess, "widgets", map[string]any{"action": "get", "id": "w2"})
	if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["id"] != "w2" {
		t.Fatalf("warm call after closing the store: %s", resultText(t, res))
	}
	if _, err := sess.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("warm tools/list: %v", err)
	}
	// A new caller needs the store, which is gone: an error, not a panic.
	r := s.post(t, s.mcpURL("acme", "shop"), tenants.TokenPrefix+"unknown", "agent-1", toolsCall("widgets", nil))
	if r.status < 400 {
		t.Errorf("cold caller with the store closed: %d", r.status)
	}
}
