package auth_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/registry"
)

// failingTokenEndpoint answers every token request 503
// temporarily_unavailable and counts them.
func failingTokenEndpoint(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		time.Sleep(50 * time.Millisecond) // long enough for calls to pile up behind it
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"temporarily_unavailable"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestFailedTokenRequestsBackOff: 20 calls on two replicas against a
// failing token endpoint make one token request, not 20 (issue 10 §3);
// every call gets a typed error with a retry delay; after the delay one
// more request goes out and the delay grows.
func TestFailedTokenRequestsBackOff(t *testing.T) {
	t.Parallel()
	tokenSrv, requests := failingTokenEndpoint(t)
	a, b := twoReplicas(t, authztest.New(t, authztest.Options{}))
	fields := map[string]string{auth.FieldClientID: "svc", auth.FieldClientSecret: "svc-secret", auth.FieldTokenURL: tokenSrv.URL + "/token"}
	calls := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			r := a
			if i%2 == 1 {
				r = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = r.call(t, r.input(registry.ModeClientCredentials, fields, ""))
			}()
		}
		wg.Wait()
		return errs
	}
	retryAfter := func(errs []error) (lo, hi time.Duration) {
		t.Helper()
		lo = time.Hour
		for _, err := range errs {
			e, ok := switchboard.AsError(err)
			if !ok || e.Code != "token_request_failed" || e.RetryAfter <= 0 {
				t.Fatalf("call error = %v, want token_request_failed with a retry delay", err)
			}
			lo, hi = min(lo, e.RetryAfter), max(hi, e.RetryAfter)
		}
		return lo, hi
	}

	_, hi := retryAfter(calls())
	if n := requests.Load(); n != 1 {
		t.Fatalf("20 calls made %d token requests to a failing endpoint, want 1", n)
	}
	if hi > time.Second {
		t.Fatalf("first retry delay %v, want at most 1 s", hi)
	}
	for i := range 10 {
		r := []*rig{a, b}[i%2]
		if _, err := r.call(t, r.input(registry.ModeClientCredentials, fields, "")); err == nil {
			t.Fatal("a call succeeded against a failing token endpoint")
		}
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("10 more calls within the delay made %d token requests, want 0", n-1)
	}
	a.clk.advance(time.Second + time.Millisecond)
	lo, hi := retryAfter(calls())
	if n := requests.Load(); n != 2 {
		t.Fatalf("after the delay 20 calls made %d more token requests, want 1", n-1)
	}
	if lo < 500*time.Millisecond || hi > 2*time.Second {
		t.Fatalf("second retry delays %v..%v, want within [1 s, 2 s] less elapsed time", lo, hi)
	}
}
