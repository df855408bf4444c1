package admission_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustLimit(t *testing.T, s string) admission.Limit {
	t.Helper()
	l, err := admission.ParseLimit(s)
	if err != nil {
		t.Fatalf("ParseLimit(%q): %v", s, err)
	}
	return l
}

func TestParseLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want admission.Limit
	}{
		{"off", admission.Limit{}},
		{"", admission.Limit{}},
		{"concurrency=5", admission.Limit{Concurrency: 5}},
		{"rate=20", admission.Limit{Rate: 20}},
		{"rate=120/m, burst=3", admission.Limit{Rate: 2, Burst: 3}},
		{"concurrency=2,rate=3600/h", admission.Limit{Concurrency: 2, Rate: 1}},
	} {
		got, err := admission.ParseLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, err := admission.ParseLimit(got.String()); err != nil || again != got {
			t.Errorf("ParseLimit(%q.String() = %q) = %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"concurrency=-1", "rate=fast", "rate=1/d", "burst", "colour=blue", "rate=NaN"} {
		if _, err := admission.ParseLimit(bad); err == nil {
			t.Errorf("ParseLimit(%q) accepted", bad)
		}
	}
}

// TestTenantLimitsStayWithinTheOperators checks that a tenant may lower
// the operator's limits and never raise them, and that the limits in
// force are the lower of the two per field.
func TestTenantLimitsStayWithinTheOperators(t *testing.T) {
	t.Parallel()
	ops := admission.Limits{Tenant: admission.Limit{Concurrency: 10, Rate: 5}, User: admission.Limit{Rate: 1, Burst: 2}}
	for _, tc := range []struct {
		name string
		own  admission.Limits
		ok   bool
	}{
		{"lower", admission.Limits{Tenant: admission.Limit{Concurrency: 3, Rate: 2}}, true},
		{"where the operator set none", admission.Limits{Instance: admission.Limit{Concurrency: 100, Rate: 50}}, true},
		{"more calls in flight", admission.Limits{Tenant: admission.Limit{Concurrency: 11}}, false},
		{"a faster rate", admission.Limits{User: admission.Limit{Rate: 1.5}}, false},
		{"a bigger burst", admission.Limits{User: admission.Limit{Burst: 3}}, false},
		{"negative", admission.Limits{Instance: admission.Limit{Concurrency: -1}}, false},
		{"the connector scope", admission.Limits{Connector: admission.Limit{Rate: 1}}, false},
	} {
		err := tc.own.Check(ops)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Check = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && switchboard.CodeOf(err) != "invalid_limits" {
			t.Errorf("%s: code %s, want invalid_limits", tc.name, switchboard.CodeOf(err))
		}
	}
	in := admission.Limits{Tenant: admission.Limit{Concurrency: 3}, Instance: admission.Limit{Rate: 7}}.Within(ops)
	want := admission.Limits{Tenant: admission.Limit{Concurrency: 3, Rate: 5}, Instance: admission.Limit{Rate: 7}, User: ops.User}
	if in != want {
		t.Errorf("Within = %+v, want %+v", in, want)
	}
}

func call(tenant, instance, user string) admission.Call {
	return admission.Call{Tenant: tenant, Instance: instance, User: user, Connector: "crm"}
}

// TestConcurrencyPerScope checks each scope's bound on the calls in
// flight: the call over it is refused with concurrency_limited and a
// retry delay, other keys are not affected, and ending a call frees its
// slot.
func TestConcurrencyPerScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := admission.New(admission.Options{Defaults: admission.Limits{
		Tenant: admission.Limit{Concurrency: 4}, Instance: admission.Limit{Concurrency: 3}, User: admission.Limit{Concurrency: 2}}})
	var held []admission.Ticket
	admit := func(cl admission.Call) error {
		tk, err := c.Admit(ctx, cl)
		if err == nil {
			held = append(held, tk)
		}
		return err
	}
	for range 2 {
		if err := admit(call("t1", "a", "u1")); err != nil {
			t.Fatal(err)
		}
	}
	err := admit(call("t1", "a", "u1"))
	checkRefusal(t, err, "concurrency_limited", "user")
	if err := admit(call("t1", "a", "u2")); err != nil {
		t.Fatalf("another user: %v", err)
	}
	checkRefusal(t, admit(call("t1", "a", "u3")), "concurrency_limited", "instance")
	if err := admit(call("t1", "b", "u3")); err != nil {
		t.Fatalf("another instance: %v", err)
	}
	checkRefusal(t, admit(call("t1", "c", "u4")), "concurrency_limited", "tenant")
	if err := admit(call("t2", "a", "u1")); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	// A refused call holds no slot: ending one admitted call lets exactly
	// one more in.
	held[0].Done()
	if err := admit(call("t1", "c", "u4")); err != nil {
		t.Fatalf("after a call ended: %v", err)
	}
	checkRefusal(t, admit(call("t1", "c", "u5")), "concurrency_limited", "tenant")
}

func checkRefusal(t *testing.T, err error, code, scope string) {
	t.Helper()
	e, ok := switchboard.AsError(err)
	if !ok || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if e.RetryAfter <= 0 {
		t.Errorf("%s without a retry delay", code)
	}
	if !errors.Is(err, switchboard.ErrUnavailable) || !strings.Contains(e.Message, scope) {
		t.Errorf("err = %v, want an unavailable refusal naming the %s", err, scope)
	}
	if p := switchboard.ProblemOf(err); p.Status != 429 || p.Detail.RetryAfterMs <= 0 {
		t.Errorf("rendered as %d retryAfterMs %d, want 429 with a delay", p.Status, p.Detail.RetryAfterMs)
	}
}

// TestRatePerScope checks the token buckets on a fake clock: a burst,
// then one call per refill; the refusal's delay is when the next token
// comes; a refusal by one scope takes no token from another.
func TestRatePerScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	c := admission.New(admission.Options{Now: clk.Now, Defaults: admission.Limits{
		Instance: mustLimit(t, "rate=2/s,burst=4"), User: mustLimit(t, "rate=1/s,burst=2")}})
	admit := func(cl admission.Call) error {
		tk, err := c.Admit(ctx, cl)
		tk.Done()
		return err
	}
	for i := range 2 {
		if err := admit(call("t", "a", "u1")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	err := admit(call("t", "a", "u1"))
	checkRefusal(t, err, "rate_limited", "user")
	if e, _ := switchboard.AsError(err); e.RetryAfter != time.Second {
		t.Errorf("retry after %s, want 1s (one token at 1/s)", e.RetryAfter)
	}
	// u1's refusals took nothing from the instance: u2 gets its 2.
	for i := range 2 {
		if err := admit(call("t", "a", "u2")); err != nil {
			t.Fatalf("u2 call %d: %v", i, err)
		}
	}
	checkRefusal(t, admit(call("t", "a", "u3")), "rate_limited", "instance")
	clk.Add(500 * time.Millisecond) // the instance gets 1 token, u1 half of one
	checkRefusal(t, admit(call("t", "a", "u1")), "rate_limited", "user")
	if err := admit(call("t", "a", "u3")); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	// Over a minute at a steady 10 calls a second from fresh users, the
	// instance admits its rate (2/s), within one burst.
	admitted := 0
	for i := range 600 {
		clk.Add(100 * time.Millisecond)
		if admit(call("t", "a", "v"+string(rune('a'+i%26)))) == nil {
			admitted++
		}
	}
	if admitted < 120 || admitted > 124 {
		t.Errorf("%d calls admitted in 60 s at 2/s (burst 4), want 120..124", admitted)
	}
}

// TestNoLimitNoAllocation checks the cost of admission in the call path:
// nothing allocated when no limit applies (reading an upstream answer's
// rate-limit headers included), nor for a warm limited key.
func TestNoLimitNoAllocation(t *testing.T) {
	ctx := context.Background()
	free := admission.New(admission.Options{})
	cl := call("t", "a", "u")
	answer := http.Header{"Content-Type": {"application/json"}, "X-Ratelimit-Remaining": {"4999"}}
	if n := testing.AllocsPerRun(1000, func() {
		tk, _ := free.Admit(ctx, cl)
		free.Learn(cl, 200, answer)
		tk.Done()
	}); n != 0 {
		t.Errorf("%v allocations a call without limits", n)
	}
	limited := admission.New(admission.Options{Defaults: admission.Limits{Tenant: admission.Limit{Concurrency: 100, Rate: 1e9},
		User: admission.Limit{Concurrency: 10}}})
	if n := testing.AllocsPerRun(1000, func() {
		tk, _ := limited.Admit(ctx, cl)
		tk.Done()
	}); n != 0 {
		t.Errorf("%v allocations a call under limits", n)
	}
}

// TestTenantOwnLimits stores a tenant's own limits on both stores: over
// the operator's is refused and not stored; within, they apply at once on
// the replica that set them, and to another replica when it reads them
// (Load, which Admit runs every Refresh).
func TestTenantOwnLimits(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := tenants.NewService(tenants.NewStore(db, nil), nil)
		ten, err := svc.CreateTenant(ctx, "acme", "Acme")
		if err != nil {
			t.Fatal(err)
		}
		ops := admission.Limits{Instance: admission.Limit{Concurrency: 5}}
		a := admission.New(admission.Options{Defaults: ops, Store: admission.NewStore(db)})
		b := admission.New(admission.Options{Defaults: ops, Store: admission.NewStore(db)})
		if _, err := a.SetTenant(ctx, ten.ID, admission.Limits{Instance: admission.Limit{Concurrency: 6}}); switchboard.CodeOf(err) != "invalid_limits" {
			t.Fatalf("over the operator's: %v", err)
		}
		if v, err := a.Tenant(ctx, ten.ID); err != nil || v.Own != (admission.Limits{}) {
			t.Fatalf("after a refused set: %+v, %v", v, err)
		}
		v, err := a.SetTenant(ctx, ten.ID, admission.Limits{Instance: admission.Limit{Concurrency: 1}})
		if err != nil || v.Effective.Instance.Concurrency != 1 || v.Operator != ops {
			t.Fatalf("SetTenant = %+v, %v", v, err)
		}
		cl := call(string(ten.ID), "a", "u")
		tk, err := a.Admit(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Done()
		checkRefusal(t, func() error { _, err := a.Admit(ctx, cl); return err }(), "concurrency_limited", "instance")
		// Replica b still has the operator's until it reads the store.
		if got := b.Limits(string(ten.ID)).Instance.Concurrency; got != 5 {
			t.Errorf("b before reading: %d", got)
		}
		if err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Limits(string(ten.ID)).Instance.Concurrency; got != 1 {
			t.Errorf("b after reading: %d, want 1", got)
		}
		// Zero goes back to the operator's.
		if _, err := a.SetTenant(ctx, ten.ID, admission.Limits{}); err != nil {
			t.Fatal(err)
		}
		if got := a.Limits(string(ten.ID)).Instance.Concurrency; got != 5 {
			t.Errorf("after clearing: %d, want 5", got)
		}
		if n := dbtest.Count(t, db, "admission_limits", "tenant_id = $1", string(ten.ID)); n != 0 {
			t.Errorf("%d rows after clearing", n)
		}
	})
}

// TestConcurrencyQueues checks the bounded wait at a concurrency limit: a
// call over it waits for a call in flight to end and is admitted when one
// does; when none ends within QueueWait it is refused with
// concurrency_limited and a retry delay, having waited QueueWait, no more
// than the queue allows; a caller that goes away stops waiting at once.
func TestConcurrencyQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const queue = 300 * time.Millisecond
	c := admission.New(admission.Options{QueueWait: queue, Defaults: admission.Limits{Instance: admission.Limit{Concurrency: 1}}})
	first, err := c.Admit(ctx, call("t", "a", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		tk     admission.Ticket
		err    error
		waited time.Duration
	}
	queued := func(ctx context.Context) <-chan result {
		out := make(chan result, 1)
		go func() {
			start := time.Now()
			tk, err := c.Admit(ctx, call("t", "a", "u2"))
			out <- result{tk, err, time.Since(start)}
		}()
		return out
	}
	second := queued(ctx)
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-second:
		t.Fatalf("a call over the limit did not wait: %v after %s", r.err, r.waited)
	default:
	}
	first.Done()
	r := <-second
	if r.err != nil || r.waited >= queue {
		t.Fatalf("the queued call: %v after %s, want admitted when the first ended", r.err, r.waited)
	}
	// Nothing ends now: the next call waits the whole queue, then is
	// refused.
	third := <-queued(ctx)
	checkRefusal(t, third.err, "concurrency_limited", "instance")
	if third.waited < queue || third.waited > queue+5*time.Second {
		t.Errorf("refused after %s, want after the queue's %s", third.waited, queue)
	}
	// A caller gone while queued is refused at once.
	gone, cancel := context.WithCancel(ctx)
	fourth := queued(gone)
	time.Sleep(20 * time.Millisecond)
	cancel()
	if r := <-fourth; r.err == nil || r.waited >= queue {
		t.Errorf("a cancelled queued call: %v after %s", r.err, r.waited)
	}
	// The refused calls hold no slot: ending the second lets one in at
	// once.
	r.tk.Done()
	if tk, err := c.Admit(ctx, call("t", "a", "u3")); err != nil {
		t.Errorf("after the second ended: %v", err)
	} else {
		tk.Done()
	}
}
