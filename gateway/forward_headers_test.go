package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/tenants"
)

const headersManifest = `{
  "id": "headers", "name": "Headers", "version": "1.0.0", "type": "mcp_remote", "scope": "global",
  "auth": {"type": "none"},
  "env": [{"name": "MCP_URL", "label": "MCP server URL", "required": true}],
  "mcp_config": {"url": "{ENV:MCP_URL}"}
}`

// TestForwardedParamHeaders: a 2026-07-28 call to a forwarded tool whose
// arguments are annotated x-mcp-header (SEP-2243) is refused by
// Switchboard (400, -32020) when its Mcp-Param-* headers do not match
// the arguments, and never reaches the proxied server; a matching call
// (the official client writes the headers itself) goes through. Tools of
// the proxied server with a string, an integer and a nested annotated
// argument.
func TestForwardedParamHeaders(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		var calls atomic.Int64
		up := sdk.NewServer(&sdk.Implementation{Name: "headers", Version: "1"}, nil)
		echo := func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}}}, nil
		}
		up.AddTool(&sdk.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer","x-mcp-header":"Level"},"note":{"type":"string"}}}`)}, echo)
		up.AddTool(&sdk.Tool{Name: "nested", InputSchema: json.RawMessage(`{"type":"object","properties":{
			"opts":{"type":"object","properties":{"flag":{"type":"boolean","x-mcp-header":"Flag"}}}}}`)}, echo)
		h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, &sdk.StreamableHTTPOptions{Stateless: true})
		fixture := httptest.NewServer(h)
		t.Cleanup(fixture.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cat := registrytest.Load(t, map[string]string{"headers/connector.json": headersManifest})
		s := newStack(t, db, cat, &clock{})
		s.tenant(t, "acme")
		if _, _, err := s.svc.Install(ctx, "acme", "hd", tenants.InstallRequest{ConnectorID: "headers",
			Fields: fieldsOf(map[string]string{"MCP_URL": fixture.URL}), Agents: []string{"agent-1"}}); err != nil {
			t.Fatalf("Install: %v", err)
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		endpoint := s.srv.URL + "/workspaces/acme/webhooks/hd.mcp"
		hc := &http.Client{Transport: &agentTransport{token: token, agent: "agent-1"}}

		// The official client mirrors the annotated arguments itself.
		sess, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer sess.Close()
		if _, err := sess.ListTools(ctx, nil); err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"region", map[string]any{"region": "eu west ", "level": 3, "note": "n"}},
			{"region", map[string]any{"region": "Zürich"}},
			{"nested", map[string]any{"opts": map[string]any{"flag": true}}},
			{"nested", map[string]any{}},
		} {
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil || res.IsError {
				t.Errorf("%s %v: %v %+v", c.tool, c.args, err, res)
			}
		}
		before := calls.Load()
		if before != 4 {
			t.Fatalf("%d calls reached the server, want 4", before)
		}

		raw := func(tool, args string, headers map[string]string) (int, string) {
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,
				"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},
				"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", tool)
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		for _, c := range []struct {
			name, tool, args string
			headers          map[string]string
		}{
			{"missing header", "region", `{"region":"eu"}`, nil},
			{"value differs", "region", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "us"}},
			{"invalid base64", "region", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?=", "Mcp-Param-Level": "1"}},
			{"unpadded base64", "region", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}},
			{"header for an absent argument", "region", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-Level": "2"}},
			{"integer differs", "region", `{"level":2}`, map[string]string{"Mcp-Param-Level": "3"}},
			{"not a primitive", "region", `{"level":2.5}`, map[string]string{"Mcp-Param-Level": "2.5"}},
			{"nested boolean differs", "nested", `{"opts":{"flag":false}}`, map[string]string{"Mcp-Param-Flag": "true"}},
		} {
			status, body := raw(c.tool, c.args, c.headers)
			if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32020`) || !strings.Contains(body, "header_mismatch") {
				t.Errorf("%s: %d %s", c.name, status, body)
			}
		}
		for _, c := range []struct {
			name, tool, args string
			headers          map[string]string
		}{
			{"base64 of the value", "region", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8=?="}},
			{"integer by value", "region", `{"level":100}`, map[string]string{"Mcp-Param-Level": "1e2"}},
			{"nested boolean", "nested", `{"opts":{"flag":false}}`, map[string]string{"Mcp-Param-Flag": "false"}},
		} {
			if status, body := raw(c.tool, c.args, c.headers); status != http.StatusOK || strings.Contains(body, `"error"`) {
				t.Errorf("%s: %d %s", c.name, status, body)
			}
		}
		if n := calls.Load() - before; n != 3 {
			t.Errorf("%d raw calls reached the server, want the 3 with matching headers", n)
		}
	})
}
