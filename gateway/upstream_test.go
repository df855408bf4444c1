package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestUpstreamRateLimitHeadersAreLearnt runs a loopback vendor that
// answers one instance 429 with Retry-After: 30, and reports another's
// quota exhausted (X-RateLimit-Remaining: 0) on a 200 until a reset a
// minute away: the next calls with those credentials fail fast with
// rate_limited and the time left (retryAfterMs), without reaching the
// vendor, while a third instance's calls still go through.
func TestUpstreamRateLimitHeadersAreLearnt(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		var hits [3]atomic.Int64
		reset := time.Now().Add(time.Minute).Unix()
		vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.Header.Get("X-Api-Key") {
			case "slow-key":
				hits[0].Add(1)
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"message":"slow down"}`)
				return
			case "quota-key":
				hits[1].Add(1)
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
			default:
				hits[2].Add(1)
			}
			io.WriteString(w, `{"user":"api-key"}`)
		}))
		defer vendor.Close()
		s, _ := newAdmissionStack(t, db, admission.Options{})
		s.tenant(t, "acme")
		s.svc.SetVerifier(nil)
		s.install(t, "acme", "slow", "apiKey", map[string]string{"API_URL": vendor.URL, "API_KEY": "slow-key"}, agent)
		s.install(t, "acme", "quota", "apiKey", map[string]string{"API_URL": vendor.URL, "API_KEY": "quota-key"}, agent)
		s.install(t, "acme", "free", "apiKey", map[string]string{"API_URL": vendor.URL, "API_KEY": "free-key"}, agent)
		token := s.caller(t, "acme", headerPlatform("alice", "bob"))

		if r := appCall(t, s.srv.URL, "acme", "slow", token, "alice"); r.status != 429 || r.code != "rate_limited" || r.retryAfterMs != 30_000 {
			t.Fatalf("the vendor's 429: %+v", r)
		}
		if r := appCall(t, s.srv.URL, "acme", "quota", token, "alice"); r.status != 200 {
			t.Fatalf("the last call of the quota: %+v", r)
		}
		for _, user := range []string{"alice", "bob"} {
			r := appCall(t, s.srv.URL, "acme", "slow", token, user)
			if r.status != 429 || r.code != "rate_limited" || r.retryAfterMs <= 25_000 || r.retryAfterMs > 30_000 {
				t.Errorf("slow, as %s, while told to wait: %+v", user, r)
			}
			r = appCall(t, s.srv.URL, "acme", "quota", token, user)
			if r.status != 429 || r.code != "rate_limited" || r.retryAfterMs <= 50_000 || r.retryAfterMs > 61_000 {
				t.Errorf("quota, as %s, until its reset: %+v", user, r)
			}
			tr := s.callTool(t, "acme", "slow", token, agent, user, nil, nil)
			if tr.code != "rate_limited" {
				t.Errorf("slow over MCP as %s: %+v", user, tr)
			}
		}
		if n := hits[0].Load(); n != 1 {
			t.Errorf("the rate-limiting vendor was called %d times, want once", n)
		}
		if n := hits[1].Load(); n != 1 {
			t.Errorf("the exhausted quota was called %d times, want once", n)
		}
		if r := appCall(t, s.srv.URL, "acme", "free", token, "bob"); r.status != 200 || hits[2].Load() != 1 {
			t.Errorf("another credential: %+v", r)
		}
	})
}
