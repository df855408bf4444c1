package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
)

// resolveOutput resolves a tool's outputSchema from its JSON, as a client
// reads it.
func resolveOutput(t *testing.T, schema any) *jsonschema.Resolved {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	if js.Type != "object" {
		t.Fatalf("outputSchema is not an object schema: %s", raw)
	}
	// Permissive: nothing a vendor may omit is required, no object is
	// closed (the conversion writes additionalProperties false as not {}).
	if strings.Contains(string(raw), `"required"`) || strings.Contains(string(raw), `"not"`) || strings.Contains(string(raw), `"enum"`) {
		t.Errorf("outputSchema is not permissive: %s", raw)
	}
	r, err := js.Resolve(nil)
	if err != nil {
		t.Fatalf("outputSchema does not resolve: %v", err)
	}
	return r
}

// TestOutputSchema checks that tools/list declares outputSchema on tools
// whose answers the description knows, and that every successful
// tools/call result's structuredContent conforms to it, in both protocol
// eras: answers with fields the description lacks, without fields it
// requires, with enum values it does not list, arrays and scalars
// (wrapped as {"result": ...}), no body, and the describe action.
func TestOutputSchema(t *testing.T) {
	t.Parallel()
	s := newStack(t, dbtest.SQLite(t))
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	for _, version := range []string{"2025-06-18", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "output-test", Version: "1"}, nil)
			sess, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint:             s.mcpURL("acme", "shop"),
				HTTPClient:           &http.Client{Transport: &headers{token: tok, agent: "agent-1", bodies: s.bodies}},
				DisableStandaloneSSE: true,
			}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer sess.Close()
			list, err := sess.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			schemas := map[string]*jsonschema.Resolved{}
			for _, tool := range list.Tools {
				if tool.OutputSchema == nil {
					t.Fatalf("tool %s has no outputSchema", tool.Name)
				}
				schemas[tool.Name] = resolveOutput(t, tool.OutputSchema)
			}
			calls := []struct {
				tool string
				args map[string]any
				want string // in the structured content
			}{
				{"widgets", map[string]any{"action": "get", "id": "w1"}, `"owner":"acme"`},
				{"widgets", map[string]any{"action": "list", "limit": 2}, `"result":[{`},
				{"widgets", map[string]any{"action": "create", "body": map[string]any{"name": "a"}}, `"created":{"name":"a"}`},
				{"widgets", map[string]any{"action": "delete", "id": "w1"}, `{"result":null}`},
				{"widgets", map[string]any{"action": "describe", "target": "get"}, `"operation_id":"getWidget"`},
				{"widgets", map[string]any{"action": "describe"}, `"actions":[`},
				{"status", map[string]any{"action": "get"}, `{"result":"ok"}`},
			}
			for _, c := range calls {
				res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil || res.IsError {
					t.Fatalf("%s %v: %v %s", c.tool, c.args, err, resultText(t, res))
				}
				b, _ := json.Marshal(res.StructuredContent)
				if !strings.Contains(string(b), c.want) {
					t.Errorf("%s %v: structuredContent %s, want %s", c.tool, c.args, b, c.want)
				}
				var v any
				json.Unmarshal(b, &v)
				if err := schemas[c.tool].Validate(v); err != nil {
					t.Errorf("%s %v: structuredContent %s does not conform: %v", c.tool, c.args, b, err)
				}
			}
			// Errors are results with isError; the schema does not apply.
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "widgets", Arguments: map[string]any{"action": "get", "id": "missing"}})
			if err != nil || !res.IsError {
				t.Errorf("missing widget: %v %+v", err, res)
			}
			// An answer that is not JSON still has structured content
			// that conforms, when the tool declares an output schema.
			for _, body := range []string{"plain text", "<html></html>", ""} {
				sc := mcp.StructuredContent(body, true)
				b, _ := json.Marshal(sc)
				var v any
				json.Unmarshal(b, &v)
				if err := schemas["widgets"].Validate(v); err != nil || v == nil {
					t.Errorf("body %q: structuredContent %s does not conform: %v", body, b, err)
				}
			}
			if sc := mcp.StructuredContent("plain text", false); sc != nil {
				t.Errorf("a tool without output schema got structured content for text: %v", sc)
			}
		})
	}
}
