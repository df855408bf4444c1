package admission_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
)

// TestUpstreamWaits checks what each rate-limit header of an upstream
// answer makes later calls with the same credential do: fail fast with
// rate_limited and the time left, until the wait is over.
func TestUpstreamWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		header map[string]string
		wait   time.Duration // 0: no wait learnt
	}{
		{"429 Retry-After seconds", 429, map[string]string{"Retry-After": "30"}, 30 * time.Second},
		{"503 Retry-After date", 503, map[string]string{"Retry-After": start.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"429 without a header", 429, nil, time.Second},
		{"503 without Retry-After", 503, nil, 0},
		{"200 with quota left", 200, map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "60"}, 0},
		{"200 X-RateLimit exhausted, reset as a Unix time", 200, map[string]string{"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset": strconv.FormatInt(start.Add(45*time.Second).Unix(), 10)}, 45 * time.Second},
		{"403 X-RateLimit exhausted, reset in seconds", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12"}, 12 * time.Second},
		{"RateLimit-Remaining/Reset", 200, map[string]string{"RateLimit-Remaining": "0", "RateLimit-Reset": "7"}, 7 * time.Second},
		{"RateLimit structured", 200, map[string]string{"RateLimit": `"default";r=0;t=20`}, 20 * time.Second},
		{"RateLimit list", 200, map[string]string{"RateLimit": "limit=100, remaining=0, reset=15"}, 15 * time.Second},
		{"RateLimit with quota left", 200, map[string]string{"RateLimit": `"default";r=3;t=20`}, 0},
		{"a wait bounded to an hour", 429, map[string]string{"Retry-After": "86400"}, time.Hour},
	} {
		clk := &fakeClock{t: start}
		c := admission.New(admission.Options{Now: clk.Now})
		shared := admission.Call{Tenant: "t", Instance: "a", User: "u1", Connector: "crm"}
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		c.Learn(shared, tc.status, h)
		_, err := c.Admit(ctx, shared)
		if tc.wait == 0 {
			if err != nil {
				t.Errorf("%s: %v, want no wait", tc.name, err)
			}
			continue
		}
		e, ok := switchboard.AsError(err)
		if !ok || e.Code != "rate_limited" || e.RetryAfter != tc.wait {
			t.Errorf("%s: %v (retry after %v), want rate_limited for %s", tc.name, err, e, tc.wait)
			continue
		}
		// The instance's credential is shared by its users; another
		// instance's is not.
		other := shared
		other.User = "u2"
		if _, err := c.Admit(ctx, other); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("%s: another user of the shared credential: %v", tc.name, err)
		}
		other.Instance = "b"
		if _, err := c.Admit(ctx, other); err != nil {
			t.Errorf("%s: another instance: %v", tc.name, err)
		}
		clk.Add(tc.wait - time.Millisecond)
		if _, err := c.Admit(ctx, shared); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("%s: a millisecond before the end: %v", tc.name, err)
		}
		clk.Add(time.Millisecond)
		if _, err := c.Admit(ctx, shared); err != nil {
			t.Errorf("%s: once the wait is over: %v", tc.name, err)
		}
	}
}

// TestUpstreamWaitsPerUserCredential checks that with per-user
// credentials (the oauth modes) a wait holds only the user's own calls.
func TestUpstreamWaitsPerUserCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := admission.New(admission.Options{})
	alice := admission.Call{Tenant: "t", Instance: "a", User: "alice", Connector: "crm", PerUser: true}
	bob := alice
	bob.User = "bob"
	c.Learn(alice, 429, http.Header{"Retry-After": {"60"}})
	if _, err := c.Admit(ctx, alice); switchboard.CodeOf(err) != "rate_limited" {
		t.Errorf("alice: %v", err)
	}
	if _, err := c.Admit(ctx, bob); err != nil {
		t.Errorf("bob, with his own token: %v", err)
	}
}

// With IgnoreUpstreamWaits (serve --upstream-waits ignore) a 429 with
// Retry-After teaches nothing: the next call is admitted.
func TestUpstreamWaitsIgnored(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := admission.New(admission.Options{Now: clk.Now, IgnoreUpstreamWaits: true})
	call := admission.Call{Tenant: "t", Instance: "a", User: "u1", Connector: "crm"}
	c.Learn(call, 429, http.Header{"Retry-After": []string{"30"}})
	if _, err := c.Admit(context.Background(), call); err != nil {
		t.Fatalf("after an ignored 429: %v, want admitted", err)
	}
}
