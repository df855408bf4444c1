package admission

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
)

// credKey names an upstream credential: an instance's own, or one user's
// of an instance (PerUser).
type credKey struct{ tenant, instance, user string }

func credOf(call Call) credKey {
	k := credKey{tenant: call.Tenant, instance: call.Instance}
	if call.PerUser {
		k.user = call.User
	}
	return k
}

// waits are the credentials an upstream told to wait, until when.
type waits struct {
	// n is how many are held: Admit skips the lock while it is 0.
	n     atomic.Int64
	mu    sync.Mutex
	until map[credKey]time.Time
}

// maxWait bounds a wait an upstream asks for.
const maxWait = time.Hour

// check refuses call while its credential is told to wait.
func (w *waits) check(c *Controller, call Call, now time.Time) error {
	if w.n.Load() == 0 {
		return nil
	}
	k := credOf(call)
	w.mu.Lock()
	until, ok := w.until[k]
	if ok && !now.Before(until) {
		delete(w.until, k)
		w.n.Store(int64(len(w.until)))
		ok = false
	}
	w.mu.Unlock()
	if !ok {
		return nil
	}
	c.metrics.AdmissionRefused(scopeUpstream, "upstream")
	wait := retryIn(until.Sub(now))
	return &switchboard.Error{Kind: switchboard.ErrUnavailable, Code: "rate_limited", RetryAfter: wait,
		Message: fmt.Sprintf("the upstream service asked to wait before the next call with this credential; retry after %s", wait)}
}

// Learn reads an upstream answer to call (its status and headers) for a
// wait: Retry-After on a 429 or 503, or an exhausted quota
// (X-RateLimit-Remaining: 0 with X-RateLimit-Reset, RateLimit-Remaining:
// 0 with RateLimit-Reset, or the RateLimit structured field with r=0 and
// t=). Until the wait ends, calls with the same credential are refused
// with rate_limited and the time left, without reaching the upstream.
func (c *Controller) Learn(call Call, status int, h http.Header) {
	if c == nil || h == nil || c.opts.IgnoreUpstreamWaits {
		return
	}
	now := c.now()
	wait, ok := upstreamWait(status, h, now)
	if !ok {
		return
	}
	wait = min(wait, maxWait)
	if wait <= 0 {
		return
	}
	k := credOf(call)
	until := now.Add(wait)
	w := &c.upstream
	w.mu.Lock()
	if len(w.until) >= maxWaits {
		for k, u := range w.until {
			if !now.Before(u) {
				delete(w.until, k)
			}
		}
	}
	if cur, ok := w.until[k]; (!ok || until.After(cur)) && len(w.until) < maxWaits {
		w.until[k] = until
	}
	w.n.Store(int64(len(w.until)))
	w.mu.Unlock()
}

// maxWaits bounds the credentials held waiting.
const maxWaits = 100_000

// Canonical header keys read (http.Header's own form, so that reading
// them allocates nothing).
const (
	hRetryAfter       = "Retry-After"
	hXRemaining       = "X-Ratelimit-Remaining"
	hXReset           = "X-Ratelimit-Reset"
	hRemaining        = "Ratelimit-Remaining"
	hReset            = "Ratelimit-Reset"
	hRateLimit        = "Ratelimit"
	epochSecondsAfter = 1_000_000_000 // a reset above this is a Unix time
)

func first(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// upstreamWait is the wait an answer asks for, if any.
func upstreamWait(status int, h http.Header, now time.Time) (time.Duration, bool) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if d, ok := retryAfter(first(h, hRetryAfter), now); ok {
			return d, true
		}
	}
	if first(h, hXRemaining) == "0" {
		if d, ok := reset(first(h, hXReset), now); ok {
			return d, true
		}
	}
	if first(h, hRemaining) == "0" {
		if d, ok := reset(first(h, hReset), now); ok {
			return d, true
		}
	}
	if v := first(h, hRateLimit); v != "" {
		if d, ok := structuredWait(v); ok {
			return d, true
		}
	}
	if status == http.StatusTooManyRequests {
		// A 429 that says nothing more: a second.
		return time.Second, true
	}
	return 0, false
}

// retryAfter reads Retry-After: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(maxWait/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now), true
	}
	return 0, false
}

// reset reads a quota's reset: seconds from now, or a Unix time (GitHub's
// X-RateLimit-Reset).
func reset(v string, now time.Time) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	if f > epochSecondsAfter {
		return time.Unix(0, int64(f*float64(time.Second))).Sub(now), true
	}
	return time.Duration(min(f, float64(maxWait/time.Second)) * float64(time.Second)), true
}

// structuredWait reads the RateLimit field of the IETF draft, in its
// structured form (`"default";r=0;t=30`) or its older list form
// (`limit=100, remaining=0, reset=30`): a wait of t (reset) seconds when
// r (remaining) is 0.
func structuredWait(v string) (time.Duration, bool) {
	remaining, resetIn := "", ""
	for part := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ';' || r == ',' }) {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "r", "remaining":
			remaining = strings.TrimSpace(val)
		case "t", "reset":
			resetIn = strings.TrimSpace(val)
		}
	}
	if remaining != "0" {
		return 0, false
	}
	n, err := strconv.ParseFloat(resetIn, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(min(n, float64(maxWait/time.Second)) * float64(time.Second)), true
}
