//lint:file-ignore SA1019 tests the relay of the logging feature SEP-2577 deprecates

package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/tenants"
)

// fixtureKey is the proxied server's API key: a secret of the instance,
// which the server also puts in what it sends back.
const fixtureKey = "canary-forward-7d21b0-KEY"

const fixtureManifest = `{
  "id": "fixture", "name": "Fixture", "version": "1.0.0", "type": "mcp_remote", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [
    {"name": "MCP_URL", "label": "MCP server URL", "required": true},
    {"name": "API_KEY", "label": "API key", "required": true, "secret": true}
  ],
  "mcp_config": {"url": "{ENV:MCP_URL}", "headers": {"X-Api-Key": "{SECRET:API_KEY}"}}
}`

// contentResult is a tool result with content of every type and
// structured content.
func contentResult() *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: "plain text"},
			&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}, MIMEType: "image/png"},
			&sdk.AudioContent{Data: []byte{'R', 'I', 'F', 'F', 9, 8, 7}, MIMEType: "audio/wav"},
			&sdk.ResourceLink{URI: "test://linked", Name: "linked", MIMEType: "text/plain", Description: "a link"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://embedded", MIMEType: "text/plain", Text: "embedded text"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://blob", MIMEType: "application/octet-stream", Blob: []byte{0, 255, 7}}},
		},
		StructuredContent: map[string]any{"n": 42.0, "list": []any{"a", true, nil}, "nested": map[string]any{"x": "y"}},
	}
}

// newFixtureServer is the proxied MCP server: the official SDK's server
// over Streamable HTTP (stateless), checking the instance's key.
func newFixtureServer(t *testing.T) *httptest.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "content", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return contentResult(), nil })
	s.AddTool(&sdk.Tool{Name: "leak", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://key", MIMEType: "text/plain", Text: "key " + fixtureKey}},
			}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "steps", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			for i, step := range []float64{0, 50, 100} {
				req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "step " + string(rune('1'+i)) + " key " + fixtureKey})
				if tok := req.Params.GetProgressToken(); tok != nil {
					req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: step, Total: 100, Message: "at " + fixtureKey})
				}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["ok"].(*sdk.ElicitResult); ok {
				if req.Params.RequestState != "state-1" {
					return nil, errors.New("tampered state")
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "answer " + r.Action}}}, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"ok": &sdk.ElicitParams{Mode: "form", Message: "Proceed?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"go": map[string]any{"type": "boolean"}}}}},
				RequestState: "state-1"}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != fixtureKey {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestForwardedMCP calls a proxied MCP server through an mcp_remote
// instance with the official SDK client: content of every type comes
// back as the server sent it, the instance's key redacted wherever it
// appears; the server's progress and log notifications reach the caller
// of the call that caused them; an input-required result goes to the
// caller, whose answer goes back to the server.
func TestForwardedMCP(t *testing.T) {
	t.Parallel()
	fixture := newFixtureServer(t)
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cat := registrytest.Load(t, map[string]string{"fixture/connector.json": fixtureManifest})
		s := newStack(t, db, cat, &clock{})
		s.tenant(t, "acme")
		if _, _, err := s.svc.Install(ctx, "acme", "fx", tenants.InstallRequest{ConnectorID: "fixture", AuthMode: "apiKey",
			Fields: fieldsOf(map[string]string{"MCP_URL": fixture.URL, "API_KEY": fixtureKey}), Agents: []string{"agent-1"}}); err != nil {
			t.Fatalf("Install: %v", err)
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})

		var (
			mu       sync.Mutex
			progress []*sdk.ProgressNotificationParams
			logs     []*sdk.LoggingMessageParams
			asked    []string
		)
		hc := &http.Client{Transport: &agentTransport{token: token, agent: "agent-1"}}
		client := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, &sdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, r.Params)
				mu.Unlock()
			},
			LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
				mu.Lock()
				logs = append(logs, r.Params)
				mu.Unlock()
			},
			ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, r.Params.Message)
				mu.Unlock()
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"go": true}}, nil
			},
		})
		sess, err := client.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint: s.srv.URL + "/workspaces/acme/webhooks/fx.mcp", HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer sess.Close()

		t.Run("content of every type passes unchanged", func(t *testing.T) {
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "content", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			want := contentResult()
			got, _ := json.Marshal(res.Content)
			exp, _ := json.Marshal(want.Content)
			if string(got) != string(exp) {
				t.Errorf("content =\n%s\nwant\n%s", got, exp)
			}
			if !reflect.DeepEqual(res.StructuredContent, want.StructuredContent) {
				t.Errorf("structuredContent = %#v, want %#v", res.StructuredContent, want.StructuredContent)
			}
		})

		t.Run("the instance's key is redacted in embedded resources", func(t *testing.T) {
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "leak", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if b, _ := json.Marshal(res); strings.Contains(string(b), fixtureKey) || !strings.Contains(string(b), "[REDACTED]") {
				t.Errorf("result = %s", b)
			}
		})

		t.Run("progress and logs reach the caller", func(t *testing.T) {
			params := &sdk.CallToolParams{Name: "steps", Arguments: map[string]any{},
				Meta: sdk.Meta{sdk.MetaKeyLogLevel: "info"}}
			params.SetProgressToken("caller-token-1")
			res, err := sess.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("CallTool: %v %+v", err, res)
			}
			// The SDK's client hands notifications to their handlers after
			// the reader has moved on: the response may overtake them.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n := len(progress) + len(logs)
				mu.Unlock()
				if n >= 6 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(progress) != 3 {
				t.Fatalf("%d progress notifications, want 3", len(progress))
			}
			for i, p := range progress {
				if p.ProgressToken != "caller-token-1" || p.Progress != []float64{0, 50, 100}[i] || p.Total != 100 ||
					strings.Contains(p.Message, fixtureKey) {
					t.Errorf("progress %d = %+v", i, p)
				}
			}
			if len(logs) != 3 {
				t.Fatalf("%d log notifications, want 3", len(logs))
			}
			for i, l := range logs {
				d, _ := l.Data.(string)
				if l.Level != "info" || !strings.HasPrefix(d, "step "+string(rune('1'+i))) || strings.Contains(d, fixtureKey) {
					t.Errorf("log %d = %+v", i, l)
				}
			}
		})

		t.Run("an input-required result is answered by the caller", func(t *testing.T) {
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "confirm", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			text := ""
			if len(res.Content) == 1 {
				text = res.Content[0].(*sdk.TextContent).Text
			}
			mu.Lock()
			defer mu.Unlock()
			if text != "answer accept" || len(asked) != 1 || asked[0] != "Proceed?" {
				t.Errorf("result %q after questions %q", text, asked)
			}
		})
	})
}
