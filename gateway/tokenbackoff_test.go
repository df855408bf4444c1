package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestTokenBackoffReachesTheAgent: calls of an instance whose token
// endpoint fails get token_request_failed with retryAfterMs, and the
// endpoint sees one request for five calls (issue 10 §3).
func TestTokenBackoffReachesTheAgent(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"temporarily_unavailable"}`))
	}))
	t.Cleanup(tokenSrv.Close)
	s := newStack(t, dbtest.SQLite(t), loadCRM(t), &clock{})
	s.tenant(t, "acme")
	s.install(t, "acme", "cc", "clientCredentials", map[string]string{"API_URL": tokenSrv.URL + "/api", "CLIENT_ID": "svc",
		"CLIENT_SECRET": "svc-secret", "TOKEN_URL": tokenSrv.URL + "/token"}, agent)
	token := s.caller(t, "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindAgentPlatform})
	for i := range 5 {
		r := s.callTool(t, "acme", "cc", token, agent, "", nil, nil)
		if r.code != "token_request_failed" || !strings.Contains(r.raw, `"retryAfterMs":`) {
			t.Fatalf("call %d = %+v, want token_request_failed with retryAfterMs", i, r)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("5 calls made %d token requests, want 1", n)
	}
}
