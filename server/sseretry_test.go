package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestForwardedStreamRetryField: the event stream answering a 2025-11-25
// caller's tools/call to an mcp_remote or mcp_local instance begins with
// the SSE retry field (SEP-1699), before the result; a 2026-07-28
// caller's does not.
func TestForwardedStreamRetryField(t *testing.T) {
	t.Parallel()
	script := testServerScript(t)
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		up := sdk.NewServer(&sdk.Implementation{Name: "hosted", Version: "1"}, nil)
		up.AddTool(&sdk.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hosted"}}}, nil
			})
		hosted := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up },
			&sdk.StreamableHTTPOptions{Stateless: true}))
		t.Cleanup(hosted.Close)
		files := localCatalog(t)
		files["proxy/connector.json"] = proxyManifest
		srv := servertest.Start(t, server.Config{DB: db, DataDir: t.TempDir(), ConnectorCatalog: registrytest.Load(t, files)})
		svc := srv.Tenants()
		if _, err := svc.CreateTenant(ctx, "acme", "acme"); err != nil {
			t.Fatal(err)
		}
		for slug, f := range map[string][3]string{"remote": {"proxy", "MCP_URL", hosted.URL}, "local": {"everything", "SERVER_JS", script}} {
			v := secrets.New(f[2])
			if _, _, err := svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: f[0],
				Fields: map[string]*secrets.Secret{f[1]: &v}, Agents: []string{"agent-1"}}); err != nil {
				t.Fatalf("Install %s: %v", slug, err)
			}
		}
		_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		if err != nil {
			t.Fatal(err)
		}
		call := func(instance, version, accept string) (string, string) {
			t.Helper()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
			if version == "2026-07-28" {
				body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{},` +
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/acme/webhooks/"+instance+".mcp", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok.Reveal())
			req.Header.Set("X-Agent-Id", "agent-1")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			req.Header.Set("Mcp-Protocol-Version", version)
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "whoami")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result"`) {
				t.Fatalf("%s %s: %d %s", instance, version, resp.StatusCode, b)
			}
			return resp.Header.Get("Content-Type"), string(b)
		}
		const both = "application/json, text/event-stream"
		for _, instance := range []string{"remote", "local"} {
			if ct, b := call(instance, "2025-11-25", both); !strings.HasPrefix(ct, "text/event-stream") || !strings.HasPrefix(b, "retry: ") {
				t.Errorf("%s 2025-11-25: %s, begins %.40q", instance, ct, b)
			}
			if _, b := call(instance, "2026-07-28", both); strings.Contains(b, "retry:") {
				t.Errorf("%s 2026-07-28 carries the retry field: %.80q", instance, b)
			}
		}
	})
}
