package registry

import (
	"context"
	"sync"
	"time"
)

// deadlines cancels upstream calls at their deadline, with one timer for
// all of them. A call's context is a cancel context of the caller's (so
// that a caller who goes away still cancels the upstream request) that
// the timer cancels with context.DeadlineExceeded as its cause (which the
// transport returns, so the error is the timeout's): what
// context.WithTimeout does, without a timer context, its timer and its
// callback per call (a tools/call's upstream deadline was 7 of its
// allocations, its own and those of the transport's context under it).
//
// The timer is armed for the earliest deadline registered; when it fires
// it cancels the calls past their deadline and is armed again for the
// earliest of the rest. Calls that end before their deadline only leave
// the set, so with calls much shorter than their timeout it fires about
// once per timeout.
type deadlines struct {
	mu    sync.Mutex
	calls map[uint64]deadlineCall
	seq   uint64
	timer *time.Timer
	armed time.Time // when the timer fires; zero when it is not armed
}

type deadlineCall struct {
	at     time.Time
	cancel context.CancelCauseFunc
}

// upstreamDeadlines are the Dispatchers' (a deadline is absolute, so one
// set serves every timeout).
var upstreamDeadlines = &deadlines{}

// withTimeout returns a context of ctx that is canceled, cause
// context.DeadlineExceeded, when d has passed, and its handle, whose end
// must be called when the call is done (a handle, not a function: a
// closure would be an allocation per call).
func (ds *deadlines) withTimeout(ctx context.Context, d time.Duration) (context.Context, deadlineHandle) {
	return ds.withDeadline(ctx, time.Now().Add(d))
}

// withDeadline is withTimeout with a deadline at a time.
func (ds *deadlines) withDeadline(ctx context.Context, at time.Time) (context.Context, deadlineHandle) {
	cctx, cancel := context.WithCancelCause(ctx)
	ds.mu.Lock()
	ds.seq++
	id := ds.seq
	if ds.calls == nil {
		ds.calls = make(map[uint64]deadlineCall)
	}
	ds.calls[id] = deadlineCall{at: at, cancel: cancel}
	if ds.armed.IsZero() || at.Before(ds.armed) {
		ds.arm(at)
	}
	ds.mu.Unlock()
	return cctx, deadlineHandle{ds: ds, id: id, cancel: cancel}
}

// deadlineHandle is a call registered by deadlines.withTimeout.
type deadlineHandle struct {
	ds     *deadlines
	id     uint64
	cancel context.CancelCauseFunc
}

// end removes the call from the set and cancels its context.
func (h deadlineHandle) end() {
	h.ds.mu.Lock()
	delete(h.ds.calls, h.id)
	h.ds.mu.Unlock()
	h.cancel(context.Canceled)
}

// postpone moves the call's deadline to at, a later one (the timer, armed
// for an earlier deadline, finds the call not yet due and arms itself for
// the earliest left). A call past its deadline stays cancelled.
func (h deadlineHandle) postpone(at time.Time) {
	h.ds.mu.Lock()
	if c, ok := h.ds.calls[h.id]; ok {
		c.at = at
		h.ds.calls[h.id] = c
	}
	h.ds.mu.Unlock()
}

// arm sets the timer to fire at at; ds.mu is held.
func (ds *deadlines) arm(at time.Time) {
	ds.armed = at
	d := time.Until(at)
	if ds.timer == nil {
		ds.timer = time.AfterFunc(d, ds.fire)
		return
	}
	ds.timer.Reset(d)
}

// fire cancels the calls whose deadline has passed and arms the timer for
// the earliest deadline left.
func (ds *deadlines) fire() {
	ds.mu.Lock()
	now := time.Now()
	var next time.Time
	var expired []context.CancelCauseFunc
	for id, c := range ds.calls {
		if !c.at.After(now) {
			expired = append(expired, c.cancel)
			delete(ds.calls, id)
			continue
		}
		if next.IsZero() || c.at.Before(next) {
			next = c.at
		}
	}
	ds.armed = time.Time{}
	if !next.IsZero() {
		ds.arm(next)
	}
	ds.mu.Unlock()
	for _, cancel := range expired {
		cancel(context.DeadlineExceeded)
	}
}
