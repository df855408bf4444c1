package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/tenants"
)

const hostedManifest = `{
  "id": "hosted", "name": "Hosted", "version": "1.0.0", "type": "mcp_remote", "scope": "global",
  "auth": {"type": "none"},
  "env": [{"name": "MCP_URL", "label": "MCP server URL", "required": true}],
  "mcp_config": {"url": "{ENV:MCP_URL}"}
}`

// TestLateNotificationOfASeenChange checks, on both stores, that the
// notification of a change an instance's load already saw committed
// (which can arrive after the load, on every replica, the one that made
// the change included) neither drops the cached instance nor fails the
// call in progress on it, while a change the load did not see drops it:
// a later one, and, on Postgres, one whose transaction took a lower
// sequence but committed after the load (sequences are taken before
// commit).
func TestLateNotificationOfASeenChange(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		entered, release := make(chan struct{}, 1), make(chan struct{})
		up := sdk.NewServer(&sdk.Implementation{Name: "hosted", Version: "1"}, nil)
		up.AddTool(&sdk.Tool{Name: "hold", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "held"}}}, nil
			})
		hosted := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up },
			&sdk.StreamableHTTPOptions{Stateless: true}))
		defer hosted.Close()

		s := newStack(t, db, registrytest.Load(t, map[string]string{"hosted/connector.json": hostedManifest}), &clock{})
		s.tenant(t, "acme")
		if _, _, err := s.svc.Install(ctx, "acme", "box", tenants.InstallRequest{ConnectorID: "hosted",
			Fields: fieldsOf(map[string]string{"MCP_URL": hosted.URL}), Agents: []string{agent}}); err != nil {
			t.Fatalf("Install: %v", err)
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		// The changes so far, as the change log numbered them: the
		// notifications a listener may still deliver.
		var seen []tenants.Change
		rows, err := db.QueryContext(ctx, `SELECT seq, payload FROM change_log ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var (
				c       tenants.Change
				payload string
			)
			if err := rows.Scan(&c.Seq, &payload); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(payload), &c); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, c)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 3 || seen[0].Instance != "" || seen[1].Instance != "box" {
			t.Fatalf("change log = %+v, want the tenant's, the install's and the caller's", seen)
		}

		// A call resolves the instance (a load), then the late
		// notifications of the changes the load saw arrive, as the
		// listener delivers them (the tenant's creation, the install, the
		// caller's creation): before the call reaches the hosted server,
		// and again while it is there.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/workspaces/acme/webhooks/box.mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Agent-Id", agent)
		p, loaded, err := s.gw.Authorize(ctx, req, "acme", "box")
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		resolve := func() *gateway.Target {
			t.Helper()
			target, err := s.gw.Resolve(ctx, "acme", "box")
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			return target
		}
		for _, c := range seen {
			s.gw.Invalidate(c)
		}
		before := db.Statements()
		if resolve() != loaded || db.Statements() != before {
			t.Error("a late notification of a change the load saw dropped the cached instance")
		}
		type result struct {
			res *sdk.CallToolResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := s.gw.CallRemote(ctx, loaded, p, &sdk.CallToolParams{Name: "hold", Arguments: map[string]any{}})
			done <- result{res, err}
		}()
		select {
		case <-entered:
			for _, c := range seen {
				s.gw.Invalidate(c)
			}
			close(release)
		case r := <-done:
			t.Fatalf("the call ended before reaching the hosted server: %v %+v", r.err, r.res)
		case <-ctx.Done():
			t.Fatal("the call never reached the hosted server")
		}
		r := <-done
		if r.err != nil || r.res.IsError || len(r.res.Content) != 1 {
			t.Fatalf("the call in progress: %v %+v", r.err, r.res)
		}
		if text, ok := r.res.Content[0].(*sdk.TextContent); !ok || text.Text != "held" {
			t.Fatalf("the call in progress answered %+v", r.res.Content)
		}
		if resolve() != loaded {
			t.Error("a late notification of a change the load saw dropped the cached instance during a call")
		}

		// A change made after the load drops it (its own delivery here).
		agents := []string{agent, "agent-2"}
		if _, err := s.svc.Patch(ctx, "acme", "box", tenants.InstancePatch{Agents: &agents}); err != nil {
			t.Fatalf("Patch: %v", err)
		}
		reloaded := resolve()
		if reloaded == loaded {
			t.Fatal("a change made after the load left the cached instance")
		}
		// Its late notification, again, leaves the reloaded instance.
		patched := lastSeq(t, db)
		if patched <= seen[2].Seq {
			t.Fatalf("the patch's sequence %d, after %d", patched, seen[2].Seq)
		}
		s.gw.Invalidate(tenants.Change{Tenant: seen[1].Tenant, TenantSlug: "acme", Instance: "box", Seq: patched})
		if resolve() != reloaded {
			t.Error("the late notification of the change the reload saw dropped the cached instance")
		}
		if !db.Dialect.Replicated() {
			return // writers are serialized: a sequence commits before any higher one
		}

		// A change whose transaction took its sequence before another
		// change committed, and committed after the load that saw the
		// other: its notification drops what the load cached.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		payload, _ := json.Marshal(tenants.Change{Tenant: seen[1].Tenant, TenantSlug: "acme", Instance: "box"})
		late, err := db.LogChangeTx(ctx, tx, tenants.ChangesChannel, payload)
		if err != nil {
			t.Fatal(err)
		}
		agents = []string{agent}
		if _, err := s.svc.Patch(ctx, "acme", "box", tenants.InstancePatch{Agents: &agents}); err != nil {
			t.Fatalf("Patch: %v", err)
		}
		if top := lastSeq(t, db); top <= late {
			t.Fatalf("the patch's sequence %d, the open transaction's %d", top, late)
		}
		current := resolve()
		if current == reloaded {
			t.Fatal("the second patch left the cached instance")
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		s.gw.Invalidate(tenants.Change{Tenant: seen[1].Tenant, TenantSlug: "acme", Instance: "box", Seq: late})
		if resolve() == current {
			t.Error("the notification of a change committed after the load, with a lower sequence than one the load saw, left the cached instance")
		}
	})
}

// lastSeq is the highest sequence of the change log.
func lastSeq(t *testing.T, db *database.DB) int64 {
	t.Helper()
	var seq int64
	if err := db.QueryRowContext(context.Background(), `SELECT max(seq) FROM change_log`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}
