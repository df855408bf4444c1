package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// waitingUpstream is a hosted MCP server whose tool "wait" blocks until
// its request is cancelled, and reports it.
type waitingUpstream struct {
	url       string
	started   chan struct{}
	cancelled chan struct{}
}

func newWaitingUpstream(t *testing.T, stateless bool) *waitingUpstream {
	w := &waitingUpstream{started: make(chan struct{}, 4), cancelled: make(chan struct{}, 4)}
	up := sdk.NewServer(&sdk.Implementation{Name: "waiting", Version: "1"}, nil)
	up.AddTool(&sdk.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			w.started <- struct{}{}
			select {
			case <-ctx.Done():
				w.cancelled <- struct{}{}
			case <-time.After(30 * time.Second):
			}
			return &sdk.CallToolResult{}, nil
		})
	// A stateless server sees a request's cancellation when its HTTP
	// request ends (PropagateRequestCancellation); a session's, in the
	// session's notifications/cancelled.
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up },
		&sdk.StreamableHTTPOptions{Stateless: stateless, PropagateRequestCancellation: true}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// TestForwardedCancellation: a caller's cancellation of a tools/call to an
// instance proxying an MCP server cancels the request to that server (the
// loopback tool, which waits for it, reports it) and the call is audited
// as cancelled: a 2025-11-25 caller's notifications/cancelled naming the
// request, or a 2026-07-28 caller closing its HTTP request; for an
// mcp_remote instance (a stateless and a stateful hosted server) and an
// mcp_local one (a stdio process, which receives notifications/cancelled).
// A notifications/cancelled of another agent of the same caller cancels
// nothing.
func TestForwardedCancellation(t *testing.T) {
	t.Parallel()
	script := testServerScript(t)
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		// The hosted servers close after Switchboard (cleanups run last
		// first), which closes its sessions to them.
		stateless, stateful := newWaitingUpstream(t, true), newWaitingUpstream(t, false)
		files := localCatalog(t)
		files["proxy/connector.json"] = proxyManifest
		srv := servertest.Start(t, server.Config{DB: db, DataDir: t.TempDir(),
			Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}, ConnectorCatalog: registrytest.Load(t, files)})
		svc := srv.Tenants()
		acme, err := svc.CreateTenant(ctx, "acme", "acme")
		if err != nil {
			t.Fatal(err)
		}
		install := func(slug, connector, field, value string) {
			v := secrets.New(value)
			if _, _, err := svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: connector,
				Fields: map[string]*secrets.Secret{field: &v}, Agents: []string{"agent-1", "agent-2"}}); err != nil {
				t.Fatalf("Install %s: %v", slug, err)
			}
		}
		install("stateless", "proxy", "MCP_URL", stateless.url)
		install("stateful", "proxy", "MCP_URL", stateful.url)
		install("local", "everything", "SERVER_JS", script)
		_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		if err != nil {
			t.Fatal(err)
		}
		token := tok.Reveal()
		reports := t.TempDir()

		// post sends one JSON-RPC message as an agent of the caller.
		post := func(ctx context.Context, instance, agent, version, body string, headers ...string) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/workspaces/acme/webhooks/"+instance+".mcp", strings.NewReader(body))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Agent-Id", agent)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", version)
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			return http.DefaultClient.Do(req)
		}
		// watch waits for the proxied server to receive the call, and to
		// see it cancelled.
		type watch struct {
			started   func() bool
			cancelled func() bool
		}
		watchOf := func(instance string, n int) (watch, string) {
			switch instance {
			case "stateless", "stateful":
				u := map[string]*waitingUpstream{"stateless": stateless, "stateful": stateful}[instance]
				wait := func(c chan struct{}) func() bool {
					return func() bool {
						select {
						case <-c:
							return true
						case <-time.After(10 * time.Second):
							return false
						}
					}
				}
				return watch{wait(u.started), wait(u.cancelled)}, "{}"
			}
			report := filepath.Join(reports, fmt.Sprintf("cancelled-%d", n))
			poll := func(path string) func() bool {
				return func() bool {
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
						if _, err := os.Stat(path); err == nil {
							return true
						}
					}
					return false
				}
			}
			args, _ := json.Marshal(map[string]string{"report": report})
			return watch{poll(report + ".started"), poll(report)}, string(args)
		}
		audited := func(instance string, n int) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				srv.Audit().Flush(ctx)
				rows, err := srv.AuditStore().List(ctx, acme.ID, audit.Query{Limit: 500})
				if err != nil {
					t.Fatal(err)
				}
				count := 0
				for _, r := range rows {
					if r.Instance == instance && r.Tool == "wait" && r.Outcome == "cancelled" {
						count++
					}
				}
				if count >= n {
					return
				}
			}
			t.Errorf("%s: fewer than %d audit rows of wait cancelled", instance, n)
		}

		n := 0
		for _, instance := range []string{"stateless", "stateful", "local"} {
			t.Run(instance+"/notifications-cancelled", func(t *testing.T) {
				n++
				w, args := watchOf(instance, n)
				id := 100 + n
				answered := make(chan string, 1)
				go func() {
					resp, err := post(ctx, instance, "agent-1", "2025-11-25",
						fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait","arguments":%s}}`, id, args))
					if err != nil {
						answered <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answered <- string(b)
				}()
				if !w.started() {
					t.Fatal("the proxied server did not receive the call")
				}
				cancelled := func(agent string) {
					resp, err := post(ctx, instance, agent, "2025-11-25",
						fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"changed my mind"}}`, id))
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						t.Errorf("notifications/cancelled: %d", resp.StatusCode)
					}
				}
				// Another agent's cancellation of the same id is not this
				// request's.
				cancelled("agent-2")
				select {
				case out := <-answered:
					t.Fatalf("another agent's cancellation ended the call: %s", out)
				case <-time.After(300 * time.Millisecond):
				}
				cancelled("agent-1")
				if !w.cancelled() {
					t.Error("the proxied server's request was not cancelled")
				}
				// The request ends; the SDK's server sends no result for a
				// cancelled request.
				select {
				case out := <-answered:
					if strings.Contains(out, `"result"`) && !strings.Contains(out, `"code":"cancelled"`) {
						t.Errorf("the cancelled call answered %s", out)
					}
				case <-time.After(10 * time.Second):
					t.Error("the cancelled call's request did not end")
				}
				audited(instance, 1)
			})
			t.Run(instance+"/request-closed", func(t *testing.T) {
				n++
				w, args := watchOf(instance, n)
				rctx, closeRequest := context.WithCancel(ctx)
				defer closeRequest()
				done := make(chan struct{})
				go func() {
					defer close(done)
					resp, err := post(rctx, instance, "agent-1", "2026-07-28",
						fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait","arguments":%s,`+
							`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 100+n, args),
						"Mcp-Method", "tools/call", "Mcp-Name", "wait")
					if err == nil {
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							t.Errorf("tools/call: %d %s", resp.StatusCode, b)
						}
					}
				}()
				if !w.started() {
					t.Fatal("the proxied server did not receive the call")
				}
				closeRequest()
				<-done
				if !w.cancelled() {
					t.Error("the proxied server's request was not cancelled")
				}
				audited(instance, 2)
			})
		}
	})
}
