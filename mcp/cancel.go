package mcp

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
)

// Cancellation of forwarded requests. The endpoint is stateless in every
// era, so the SDK's server cannot cancel a request itself: a caller's
// notifications/cancelled (2025 eras) arrives in a POST of its own, with
// no session, and the SDK ties a handler to its HTTP request only from
// 2026-07-28 on, where closing the request is the cancellation. So a
// request to an instance proxying an MCP server is registered, while it
// runs, under its caller and its JSON-RPC id; a notifications/cancelled
// of the same caller (credential, agent, acting user) on the same
// instance naming that id cancels it, and so does the request's HTTP
// request ending (its caller cannot receive the answer any more: the
// endpoint keeps no stream to resume). The forwarded request's context
// (remoteTools) ends then, the SDK's client cancels the request to the
// proxied server (notifications/cancelled, its HTTP request closed), and
// the call is audited as cancelled.
//
// Request ids are the caller's own: two clients sharing a credential may
// use the same id at once. An id that names more than one request in
// progress cancels none of them.

// cancelKey identifies a forwarded request in progress.
type cancelKey struct {
	caller, agent, subject, tenant, instance string
	id                                       string // the raw JSON id
}

// inflight are the forwarded requests in progress.
type inflight struct {
	mu    sync.Mutex
	calls map[cancelKey][]*tracked
}

// tracked is one forwarded request in progress.
type tracked struct{ cancel context.CancelFunc }

// callCtxKey carries, in a forwarded request's context, the context that
// ends when its caller cancels it (the middleware's own context does not:
// the SDK's server detaches it from the HTTP request).
type callCtxKey struct{}

// keyOf returns the key of a request of p to t with id.
func keyOf(p *auth.Principal, t *gateway.Target, id []byte) cancelKey {
	k := cancelKey{agent: p.AgentID, subject: p.Subject(), tenant: string(t.Instance.TenantID),
		instance: t.Instance.Slug, id: string(bytes.TrimSpace(id))}
	if p.Caller != nil {
		k.caller = string(p.Caller.ID)
	}
	return k
}

// track registers a forwarded request while it runs: it returns r with a
// context that its caller's notifications/cancelled (or the end of r)
// cancels, and the function that forgets it.
func (f *inflight) track(r *http.Request, key cancelKey) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	tr := &tracked{cancel: cancel}
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[cancelKey][]*tracked{}
	}
	f.calls[key] = append(f.calls[key], tr)
	f.mu.Unlock()
	done := func() {
		f.mu.Lock()
		list := slices.DeleteFunc(f.calls[key], func(x *tracked) bool { return x == tr })
		if len(list) == 0 {
			delete(f.calls, key)
		} else {
			f.calls[key] = list
		}
		f.mu.Unlock()
		cancel()
	}
	return r.WithContext(context.WithValue(ctx, callCtxKey{}, ctx)), done
}

// cancel cancels the request registered under key, when exactly one is.
func (f *inflight) cancel(key cancelKey) bool {
	f.mu.Lock()
	var tr *tracked
	if list := f.calls[key]; len(list) == 1 {
		tr = list[0]
	}
	f.mu.Unlock()
	if tr == nil {
		return false
	}
	tr.cancel()
	return true
}

// cancellable returns ctx ending also when the caller cancels the
// forwarded request ctx serves, and the function that releases it.
func cancellable(ctx context.Context) (context.Context, func()) {
	cc, ok := ctx.Value(callCtxKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(cc, func() { cancel(context.Cause(cc)) })
	return ctx, func() { stop(); cancel(nil) }
}

// cancelledID returns the requestId of a notifications/cancelled.
func cancelledID(env *envelope) ([]byte, bool) {
	if env.method != "notifications/cancelled" || env.id != nil {
		return nil, false
	}
	var buf [4]member
	params, _ := scanObject(buf[:0], env.params)
	for _, p := range params {
		if p.key == "requestId" {
			return p.raw, true
		}
	}
	return nil, false
}
