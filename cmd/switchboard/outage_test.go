package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outageAnswer is one HTTP answer during the outage.
type outageAnswer struct {
	status     int
	retryAfter string
	body       []byte
}

func outageRequest(t *testing.T, method, url, body string, header map[string]string) outageAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return outageAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
}

// storeUnavailable checks an ErrorBody (or, rpc, a JSON-RPC error's data)
// for code store_unavailable with a retry delay.
func storeUnavailable(t *testing.T, what string, a outageAnswer, rpc bool) {
	t.Helper()
	var m struct {
		Error struct {
			Code         any   `json:"code"`
			RetryAfterMs int64 `json:"retryAfterMs"`
			Data         struct {
				Code         string `json:"code"`
				RetryAfterMs int64  `json:"retryAfterMs"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("%s: %d %s: %v", what, a.status, a.body, err)
	}
	code, retry := m.Error.Code, m.Error.RetryAfterMs
	if rpc {
		code, retry = m.Error.Data.Code, m.Error.Data.RetryAfterMs
	}
	if a.status != http.StatusServiceUnavailable || code != "store_unavailable" || retry <= 0 || a.retryAfter == "" {
		t.Errorf("%s during the outage: %d (Retry-After %q) %s, want 503 store_unavailable with retryAfterMs", what, a.status, a.retryAfter, a.body)
	}
}

// With Postgres stopped, every surface answers store_unavailable (503,
// retryAfterMs, Retry-After) instead of an untyped internal error: the
// admin API (GET and PUT), an MCP request and an App-mode call on a process
// whose caches are cold (refused before any tool runs). A process that has
// the instance cached serves its calls, and their audit rows reach the
// store once it is back. When Postgres is back, the same requests succeed.
func TestStoreOutageIsTyped(t *testing.T) {
	t.Parallel()
	r := newAuditRig(t)
	warm := r.start(t, t.TempDir())
	cold := r.start(t, t.TempDir())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "outage", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   warm.url + "/workspaces/acme/webhooks/gh.mcp",
		HTTPClient: &http.Client{Transport: userHeader{r.token}}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	r.pg.Stop()
	admin := map[string]string{"Authorization": "Bearer " + operatorToken, "Content-Type": "application/json"}
	storeUnavailable(t, "admin GET", outageRequest(t, "GET", warm.url+"/v1/tenants/acme/instances/gh", "", admin), false)
	put := `{"connector_id": "github", "auth_mode": "apiKey", "agents": ["bot"], "fields": {"GITHUB_TOKEN": "k2"}}`
	storeUnavailable(t, "admin PUT", outageRequest(t, "PUT", warm.url+"/v1/tenants/acme/instances/gh", put, admin), false)

	// The warm process loaded the instance with its credentials in one
	// query when the session started: it serves the call from its cache,
	// and the call's audit row waits in the spool until the store is back.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories",
		Arguments: map[string]any{"action": "get", "owner": "o", "repo": "r1"}})
	if err != nil || res.IsError {
		b, _ := json.Marshal(res)
		t.Errorf("tools/call on the warm process during the outage: %v %s, want it served from the cache", err, b)
	}

	agent := map[string]string{"Authorization": "Bearer " + r.token, "X-Agent-Id": "bot", "X-User-Id": "u2", "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
	call := `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "repositories", "arguments": {"action": "get", "owner": "o", "repo": "r2"}}}`
	storeUnavailable(t, "MCP on a cold process", outageRequest(t, "POST", cold.url+"/workspaces/acme/webhooks/gh.mcp", call, agent), true)
	storeUnavailable(t, "App mode on a cold process", outageRequest(t, "POST", cold.url+"/workspaces/acme/apps/gh/ops/getRepo",
		`{"owner": "o", "repo": "r3"}`, agent), false)

	r.pg.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := outageRequest(t, "GET", warm.url+"/v1/tenants/acme/instances/gh", "", admin)
		if a.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin GET after the outage: %d %s", a.status, a.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories",
		Arguments: map[string]any{"action": "get", "owner": "o", "repo": "r4"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call after the outage: %v %+v", err, res)
	}
	if a := outageRequest(t, "POST", cold.url+"/workspaces/acme/webhooks/gh.mcp", call, agent); a.status != http.StatusOK {
		t.Errorf("MCP on the cold process after the outage: %d %s", a.status, a.body)
	}
	if missing, hits, _ := r.missing(t, 20*time.Second); len(missing) > 0 {
		t.Errorf("calls %v of %d that reached the upstream have no audit row after the outage", missing, hits)
	}
	if t.Failed() {
		t.Logf("warm: %.3000s\ncold: %.3000s", warm.logs.String(), cold.logs.String())
	}
}
