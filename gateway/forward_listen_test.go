package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/tenants"
)

// listenFixture is a proxied server whose tool "grow" adds a tool and a
// prompt, and whose resource test://watched can be subscribed to.
func listenFixture(t *testing.T) (*sdk.Server, string) {
	up := sdk.NewServer(&sdk.Implementation{Name: "lists", Version: "1"}, &sdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	up.AddResource(&sdk.Resource{URI: "test://watched", Name: "watched"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "test://watched", Text: "w"}}}, nil
	})
	up.AddPrompt(&sdk.Prompt{Name: "first"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{}, nil
	})
	up.AddTool(&sdk.Tool{Name: "grow", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			up.AddTool(&sdk.Tool{Name: "grown", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return &sdk.CallToolResult{}, nil
				})
			up.AddPrompt(&sdk.Prompt{Name: "grown"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return &sdk.GetPromptResult{}, nil
			})
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grew"}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, &sdk.StreamableHTTPOptions{Stateless: true}))
	// Switchboard's session keeps its listen to the server open.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return up, srv.URL
}

// TestForwardedListen: a 2026-07-28 caller listening on an mcp_remote
// instance (the official client opens its subscriptions/listen itself)
// receives the proxied server's tools and prompts list-changed
// notifications and the updates of the resource it subscribed to, and
// the instance's tool list is the new one at once; a caller of another
// instance of the same connector, proxying another server, receives none
// of them.
func TestForwardedListen(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		up, upURL := listenFixture(t)
		_, otherURL := listenFixture(t)
		cat := registrytest.Load(t, map[string]string{"headers/connector.json": headersManifest})
		s := newStack(t, db, cat, &clock{})
		s.tenant(t, "acme")
		for slug, u := range map[string]string{"ls": upURL, "other": otherURL} {
			if _, _, err := s.svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: "headers",
				Fields: fieldsOf(map[string]string{"MCP_URL": u}), Agents: []string{"agent-1"}}); err != nil {
				t.Fatalf("Install: %v", err)
			}
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		hc := &http.Client{Transport: &agentTransport{token: token, agent: "agent-1"}}

		type seen struct {
			mu  sync.Mutex
			got []string
		}
		connect := func(slug string, w *seen) *sdk.ClientSession {
			note := func(what string) {
				w.mu.Lock()
				w.got = append(w.got, what)
				w.mu.Unlock()
			}
			client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
				ToolListChangedHandler:   func(context.Context, *sdk.ToolListChangedRequest) { note("tools") },
				PromptListChangedHandler: func(context.Context, *sdk.PromptListChangedRequest) { note("prompts") },
				ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
					note("updated " + r.Params.URI)
				},
			})
			sess, err := client.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: s.srv.URL + "/workspaces/acme/webhooks/" + slug + ".mcp", HTTPClient: hc, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("Connect %s: %v", slug, err)
			}
			t.Cleanup(func() { sess.Close() })
			if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://watched"}); err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			return sess
		}
		var mine, theirs seen
		sess := connect("ls", &mine)
		connect("other", &theirs)
		before, err := sess.ListTools(ctx, nil)
		if err != nil || len(before.Tools) != 1 {
			t.Fatalf("ListTools: %v %+v", err, before)
		}

		waitFor := func(w *seen, want ...string) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				w.mu.Lock()
				ok := true
				for _, x := range want {
					ok = ok && slices.Contains(w.got, x)
				}
				w.mu.Unlock()
				if ok {
					return
				}
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("received %q, want %q", w.got, want)
		}
		// The listens are open once the caller's listen is acknowledged;
		// the grow call's changes reach them.
		time.Sleep(200 * time.Millisecond)
		if _, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "grow", Arguments: map[string]any{}}); err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		waitFor(&mine, "tools", "prompts")
		after, err := sess.ListTools(ctx, nil)
		if err != nil || len(after.Tools) != 2 {
			t.Errorf("tools after the change: %v %+v", err, after)
		}
		up.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "test://watched"})
		waitFor(&mine, "updated test://watched")
		time.Sleep(100 * time.Millisecond)
		theirs.mu.Lock()
		defer theirs.mu.Unlock()
		if len(theirs.got) != 0 {
			t.Errorf("the other instance's caller received %q", theirs.got)
		}
	})
}

// TestForwardedListenOutlivesTimeout: the upstream client's timeout
// (300 ms here) bounds each forwarded request, not the session: a
// caller's listen on an mcp_remote instance still receives the proxied
// server's tools list change several timeouts later, while a tools/call
// the proxied server never answers ends at the timeout with the typed
// error.
func TestForwardedListenOutlivesTimeout(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const timeout = 300 * time.Millisecond
		up, upURL := listenFixture(t)
		release := make(chan struct{})
		defer close(release)
		up.AddTool(&sdk.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				<-release
				return &sdk.CallToolResult{}, nil
			})
		cat := registrytest.Load(t, map[string]string{"headers/connector.json": headersManifest})
		s := newStackWith(t, db, cat, &clock{}, func(cfg *server.Config) {
			cfg.UpstreamClient = egress.NewClient(egress.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Timeout: timeout})
		})
		s.tenant(t, "acme")
		if _, _, err := s.svc.Install(ctx, "acme", "ls", tenants.InstallRequest{ConnectorID: "headers",
			Fields: fieldsOf(map[string]string{"MCP_URL": upURL}), Agents: []string{"agent-1"}}); err != nil {
			t.Fatalf("Install: %v", err)
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		changed := make(chan struct{}, 4)
		client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
		})
		sess, err := client.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint:   s.srv.URL + "/workspaces/acme/webhooks/ls.mcp",
			HTTPClient: &http.Client{Transport: &agentTransport{token: token, agent: "agent-1"}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer sess.Close()
		if _, err := sess.ListTools(ctx, nil); err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		time.Sleep(5 * timeout)
		if res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "grow", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("CallTool grow: %v %+v", err, res)
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("the listen received no tools list change after five upstream timeouts")
		}

		start := time.Now()
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("CallTool hang: %v", err)
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				text = tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, `"code":"upstream_unavailable"`) || !strings.Contains(text, "did not answer in time") {
			t.Errorf("hanging call: %s", text)
		}
		if took < timeout || took > 10*time.Second {
			t.Errorf("the hanging call ended after %v, timeout %v", took, timeout)
		}
	})
}
