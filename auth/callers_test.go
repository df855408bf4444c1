package auth_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

type noCatalog struct{}

func (noCatalog) Connector(string) (*registry.Connector, bool) { return nil, false }

func request(token string, header ...string) *http.Request {
	r, _ := http.NewRequest("POST", "http://127.0.0.1/workspaces/x/webhooks/y.mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestCallersAuthenticate(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store, svc := tenantService(t, db, "acme", "globex")
		callers := auth.NewCallers(store)
		t.Cleanup(callers.Wait)
		svc.Subscribe(callers.Invalidate)
		issue := func(tenant string, req tenants.CallerRequest) (*tenants.Caller, string) {
			c, tok, err := svc.CreateCaller(ctx, tenant, req)
			if err != nil {
				t.Fatal(err)
			}
			return c, tok.Reveal()
		}
		platform, platTok := issue("acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindAgentPlatform, Trusted: true,
			UserMode: tenants.UserHeader, ExternalSubjects: []string{"u-9"}})
		_, untrustedTok := issue("acme", tenants.CallerRequest{Name: "u", Kind: tenants.KindAgentPlatform})
		if _, _, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "h", Kind: tenants.KindAgentPlatform,
			UserMode: tenants.UserHeader}); switchboard.CodeOf(err) != "invalid_user_mode" {
			t.Errorf("untrusted header-mode caller: err = %v, want invalid_user_mode", err)
		}
		_, cronTok := issue("acme", tenants.CallerRequest{Name: "c", Kind: tenants.KindCron, AgentID: "cron-bot", UserID: "u-1"})
		_, bareCronTok := issue("acme", tenants.CallerRequest{Name: "c2", Kind: tenants.KindCron})
		_, globexTok := issue("globex", tenants.CallerRequest{Name: "g", Kind: tenants.KindAgentPlatform})

		for _, tc := range []struct {
			name, tenant string
			r            *http.Request
			agent, user  string
			fail         bool
			// code is the refusal's code when not "unauthorized".
			code string
		}{
			{name: "platform names agent and user", tenant: "acme", r: request("Bearer "+platTok, "X-Agent-Id", "agent-1", "X-User-Id", "u-9"), agent: "agent-1", user: "u-9"},
			{name: "platform names a non-member", tenant: "acme", r: request("Bearer "+platTok, "X-Agent-Id", "agent-1", "X-User-Id", "u-10"), fail: true, code: "user_not_found"},
			{name: "untrusted platform asserting a user", tenant: "acme", r: request("Bearer "+untrustedTok, "X-Agent-Id", "agent-1", "X-User-Id", "u-9"), fail: true, code: "user_assertion_refused"},
			{name: "untrusted platform, empty X-User-Id", tenant: "acme", r: request("Bearer "+untrustedTok, "X-User-Id", ""), fail: true, code: "user_assertion_refused"},
			{name: "untrusted platform without a user", tenant: "acme", r: request("Bearer "+untrustedTok, "X-Agent-Id", "agent-1"), agent: "agent-1"},
			{name: "scheme is case-insensitive", tenant: "acme", r: request("bearer "+platTok, "X-Agent-Id", "agent-1"), agent: "agent-1"},
			{name: "platform without agent", tenant: "acme", r: request("Bearer " + platTok)},
			{name: "fixed identity wins over the agent header", tenant: "acme", r: request("Bearer "+cronTok, "X-Agent-Id", "agent-1"), agent: "cron-bot", user: "u-1"},
			{name: "fixed user refuses X-User-Id", tenant: "acme", r: request("Bearer "+cronTok, "X-User-Id", "u-9"), fail: true, code: "user_assertion_refused"},
			{name: "non-platform callers cannot name an agent", tenant: "acme", r: request("Bearer "+bareCronTok, "X-Agent-Id", "agent-1")},
			{name: "overlong agent id dropped", tenant: "acme", r: request("Bearer "+platTok, "X-Agent-Id", strings.Repeat("a", 129))},
			{name: "no header", tenant: "acme", r: request(""), fail: true},
			{name: "basic auth", tenant: "acme", r: request("Basic " + platTok), fail: true},
			{name: "unknown token", tenant: "acme", r: request("Bearer sbc_nope"), fail: true},
			{name: "token of another tenant", tenant: "acme", r: request("Bearer " + globexTok), fail: true},
			{name: "right token, other tenant's URL", tenant: "globex", r: request("Bearer " + platTok), fail: true},
			{name: "unknown tenant", tenant: "initech", r: request("Bearer " + platTok), fail: true},
		} {
			p, err := callers.Authenticate(ctx, tc.r, tc.tenant)
			if tc.fail {
				want := tc.code
				if want == "" {
					want = "unauthorized"
				}
				if got := switchboard.CodeOf(err); got != want {
					t.Errorf("%s: err = %v, want %s", tc.name, err, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if p.AgentID != tc.agent || p.UserID != tc.user || p.TenantSlug != tc.tenant {
				t.Errorf("%s: principal = %+v", tc.name, p)
			}
		}
		// The unknown token and the foreign one are refused alike.
		_, e1 := callers.Authenticate(ctx, request("Bearer sbc_nope"), "acme")
		_, e2 := callers.Authenticate(ctx, request("Bearer "+globexTok), "acme")
		_, e3 := callers.Authenticate(ctx, request("Bearer "+platTok), "initech")
		if e1.Error() != e2.Error() || e1.Error() != e3.Error() {
			t.Errorf("refusals differ: %v / %v / %v", e1, e2, e3)
		}

		p, err := callers.Authenticate(ctx, request("Bearer "+platTok, "X-Agent-Id", "a"), "acme")
		if err != nil || !p.Trusted || p.Kind != tenants.KindAgentPlatform || p.Caller.ID != platform.ID {
			t.Fatalf("before revocation: %+v, %v", p, err)
		}
		if _, err := svc.RevokeCaller(ctx, "acme", platform.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := callers.Authenticate(ctx, request("Bearer "+platTok), "acme"); err == nil {
			t.Error("a revoked caller is still accepted")
		}
	})
}
