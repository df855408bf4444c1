package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/tenants"
)

const proxyManifest = `{
  "id": "proxy", "name": "Proxy", "version": "1.0.0", "type": "mcp_remote", "scope": "global",
  "auth": {"type": "none"},
  "env": [{"name": "MCP_URL", "label": "MCP server URL", "required": true}],
  "mcp_config": {"url": "{ENV:MCP_URL}"}
}`

// TestShutdownClosesRemoteSessions: a server built as serve builds it
// holds a client session to the hosted server of an mcp_remote instance,
// with the listen stream the SDK's client keeps open to a 2026-07-28
// server; once Serve has returned and the server is closed (what serve
// does at shutdown), nothing is left open to the hosted server, whose own
// Close (which waits for every request in progress) returns at once.
func TestShutdownClosesRemoteSessions(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		up := sdk.NewServer(&sdk.Implementation{Name: "hosted", Version: "1"}, nil)
		up.AddTool(&sdk.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil
			})
		listening := make(chan struct{}, 8)
		handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, &sdk.StreamableHTTPOptions{Stateless: true})
		hosted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Method") == "subscriptions/listen" {
				listening <- struct{}{}
			}
			handler.ServeHTTP(w, r)
		}))
		defer hosted.CloseClientConnections() // only if the assertion failed

		keys, err := secrets.NewKeyring(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(ctx, server.Config{DB: db, Keyring: keys,
			ConnectorCatalog: registrytest.Load(t, map[string]string{"proxy/connector.json": proxyManifest}),
			AllowUpstreams:   []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
			ShutdownTimeout:  time.Second})
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(sctx, ln) }()

		svc := srv.Tenants()
		if _, err := svc.CreateTenant(ctx, "acme", "acme"); err != nil {
			t.Fatal(err)
		}
		u := secrets.New(hosted.URL)
		if _, _, err := svc.Install(ctx, "acme", "hosted", tenants.InstallRequest{ConnectorID: "proxy",
			Fields: map[string]*secrets.Secret{"MCP_URL": &u}, Agents: []string{"agent-1"}}); err != nil {
			t.Fatalf("Install: %v", err)
		}
		_, token, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		if err != nil {
			t.Fatal(err)
		}
		client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
		sess, err := client.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint:   "http://" + ln.Addr().String() + "/workspaces/acme/webhooks/hosted.mcp",
			HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token.Reveal(), "X-Agent-Id": "agent-1"}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer sess.Close()
		if res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("CallTool: %v %+v", err, res)
		}
		select {
		case <-listening:
		case <-time.After(10 * time.Second):
			t.Fatal("Switchboard's session opened no listen stream to the hosted server")
		}

		stop()
		if err := <-served; err != nil {
			t.Logf("Serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		closed := make(chan struct{})
		go func() { hosted.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the hosted server's Close still waits for a stream of Switchboard's session after the shutdown")
		}
	})
}
