package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// Calls refused once the tenant is known get an audit row whose outcome is
// the refusal's code: an agent not on the allowlist, no agent, an unknown
// tool, an unknown App-mode operation, a bad caller token. A flood of
// refusals from one caller writes at most 10 rows.
func TestRefusedCallsAreAudited(t *testing.T) {
	t.Parallel()
	onBothStores(t, refusalsAudited)
}

func refusalsAudited(t *testing.T, databaseURL string) {
	up := newUpstream(t)
	s := startStack(t, databaseURL)
	s.adminCall(t, "POST", "/v1/tenants", `{"slug": "acme"}`, 201)
	c := s.adminCall(t, "POST", "/v1/tenants/acme/callers", `{"name": "platform", "kind": "agent-platform"}`, 201)
	token, _ := c["token"].(string)
	callerID, _ := c["id"].(string)
	s.adminCall(t, "PUT", "/v1/tenants/acme/instances/gh", fmt.Sprintf(`{"connector_id": "github", "auth_mode": "apiKey",
		"agents": ["triage-bot"], "fields": {"GITHUB_TOKEN": "k", "GITHUB_API_URL": %q}}`, up.URL), 201)

	callTool := func(tok, agent, tool string) int {
		h := map[string]string{"Authorization": "Bearer " + tok, "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2025-06-18"}
		if agent != "" {
			h["X-Agent-Id"] = agent
		}
		st, _ := s.call(t, "POST", "/workspaces/acme/webhooks/gh.mcp", h, fmt.Sprintf(
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"action":"get","owner":"o","repo":"r"}}}`, tool))
		return st
	}
	if st := callTool(token, "intruder", "repositories"); st != 403 {
		t.Fatalf("agent not allowed = %d", st)
	}
	if st := callTool(token, "", "repositories"); st != 403 {
		t.Fatalf("no agent = %d", st)
	}
	callTool(token, "triage-bot", "no_such_tool")
	if st := callTool("sbc_not-a-real-token", "triage-bot", "repositories"); st != 401 {
		t.Fatalf("bad token = %d", st)
	}
	if st, body := s.call(t, "POST", "/workspaces/acme/apps/gh/ops/noSuchOperation",
		map[string]string{"Authorization": "Bearer " + token, "X-Agent-Id": "triage-bot"}, `{}`); st != 404 {
		t.Fatalf("unknown operation = %d %s", st, body)
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("refused calls reached the upstream %d times", n)
	}

	db := s.db()
	want := map[string]string{ // outcome -> caller the row names
		"agent_not_allowed": callerID, "missing_agent_id": callerID, "unknown_tool": callerID,
		"unknown_operation": callerID, "unauthorized": "",
	}
	deadline := time.Now().Add(10 * time.Second)
	for outcome, caller := range want {
		for dbtest.Count(t, db, "audit_log", "outcome = $1 AND caller_id = $2 AND action = 'refused'", outcome, caller) != 1 {
			if time.Now().After(deadline) {
				rows := s.adminCall(t, "GET", "/v1/tenants/acme/audit", "", 200)
				t.Fatalf("no audit row with outcome %s for caller %q; rows: %v", outcome, caller, rows)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A flood from one caller: at most 10 rows a minute for it.
	for range 40 {
		callTool(token, "intruder", "repositories")
	}
	time.Sleep(500 * time.Millisecond) // the writer's interval is 200 ms
	if n := dbtest.Count(t, db, "audit_log", "caller_id = $1 AND action = 'refused'", callerID); n != 10 {
		t.Fatalf("a flood of refusals wrote %d rows for the caller, want the bound, 10", n)
	}
	if raw := fmt.Sprint(s.adminCall(t, "GET", "/v1/tenants/acme/audit", "", 200)); strings.Contains(raw, "sbc_not-a-real-token") {
		t.Fatal("the audit log shows a caller token")
	}
}
