package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// benchCall posts one warm tools/call and checks it succeeded.
func benchCall(b *testing.B, client *http.Client, url, token, user string, body []byte) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-Id", agent)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(out), `"isError":true`) {
		b.Fatalf("%d %s", resp.StatusCode, out)
	}
}

var benchBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"me","arguments":{"action":"get"}}}`)

// BenchmarkToolsCallAPIKey and BenchmarkToolsCallCachedToken measure a
// warm tools/call through the whole in-process stack with an apiKey
// instance and with an oauth instance whose user's access token is cached:
// the difference is the cost of the token path.
//
//	go test -run '^$' -bench 'ToolsCall|Refresh' ./gateway
func BenchmarkToolsCallAPIKey(b *testing.B) {
	as := authztest.New(b, authztest.Options{})
	up := newUpstream(b, as)
	s := newStack(b, dbtest.SQLite(b), loadCRM(b), &clock{})
	s.tenant(b, "acme")
	s.install(b, "acme", "crm", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"}, agent)
	token := s.caller(b, "acme", headerPlatform("alice", "bob", "carol"))
	url := s.srv.URL + "/workspaces/acme/webhooks/crm.mcp"
	client := &http.Client{}
	benchCall(b, client, url, token, "alice", benchBody)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchCall(b, client, url, token, "alice", benchBody)
	}
}

func BenchmarkToolsCallCachedToken(b *testing.B) {
	as := authztest.New(b, authztest.Options{})
	up := newUpstream(b, as)
	up.memo = &sync.Map{}
	s := newStack(b, dbtest.SQLite(b), loadCRM(b), &clock{})
	as.AddClient(authztest.Client{ID: "crm-app", Secret: "bench-secret", Scopes: []string{"contacts.read"},
		RedirectURIs: []string{redirectFor(s, "acme", "crm")}})
	s.tenant(b, "acme")
	s.install(b, "acme", "crm", "oauth", oauthFields(as, up, "crm-app", "bench-secret"), agent)
	token := s.caller(b, "acme", headerPlatform("alice", "bob", "carol"))
	if st, page := s.connect(b, s.newBrowser(as, "alice", token), "acme", "crm"); st != 200 {
		b.Fatalf("connect = %d %s", st, page)
	}
	url := s.srv.URL + "/workspaces/acme/webhooks/crm.mcp"
	client := &http.Client{}
	benchCall(b, client, url, token, "alice", benchBody)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchCall(b, client, url, token, "alice", benchBody)
	}
}

// BenchmarkRefresh measures a tools/call whose access token has expired:
// the lock, the refresh at the authorization server (with rotation), the
// commit and the upstream call.
func BenchmarkRefresh(b *testing.B) {
	as := authztest.New(b, authztest.Options{})
	up := newUpstream(b, as)
	clk := &clock{}
	s := newStack(b, dbtest.SQLite(b), loadCRM(b), clk)
	as.AddClient(authztest.Client{ID: "crm-app", Secret: "bench-secret", Scopes: []string{"contacts.read"},
		RedirectURIs: []string{redirectFor(s, "acme", "crm")}})
	s.tenant(b, "acme")
	s.install(b, "acme", "crm", "oauth", oauthFields(as, up, "crm-app", "bench-secret"), agent)
	token := s.caller(b, "acme", headerPlatform("alice", "bob", "carol"))
	if st, page := s.connect(b, s.newBrowser(as, "alice", token), "acme", "crm"); st != 200 {
		b.Fatalf("connect = %d %s", st, page)
	}
	url := s.srv.URL + "/workspaces/acme/webhooks/crm.mcp"
	client := &http.Client{}
	before := as.TokenRequests("refresh_token")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clk.advance(2 * time.Hour)
		benchCall(b, client, url, token, "alice", benchBody)
	}
	b.StopTimer()
	if n := as.TokenRequests("refresh_token") - before; n != b.N {
		b.Fatalf("refreshes = %d, want %d", n, b.N)
	}
}
