// Package mcprelay relays what a proxied MCP server (an mcp_remote or
// mcp_local instance's) sends about a request in flight — its progress
// and log notifications — to the caller of that request, and to no one
// else, with the instance's secrets redacted; and it passes the caller's
// side of the protocol that belongs to one request (its client
// capabilities on the stateless 2026-07-28 era) to the proxied server.
//
// The caller's side (package mcp) puts a *Call in the request's context
// (WithCall); the client session to the proxied server, built with
// Table.Install, registers it under a fresh progress token while the
// request is in flight and sends that token, never the caller's, so that
// callers sharing one session never see each other's notifications.
//
// A progress notification names its token and reaches its call exactly.
// A log notification names no request: it is relayed when exactly one
// request is in flight on the session (the common case, always so for a
// session used by one caller at a time) and dropped otherwise, so that a
// log line of one caller's request never reaches another caller.
//
//lint:file-ignore SA1019 relays the logging feature SEP-2577 deprecates, which proxied servers still use
package mcprelay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Call is the caller's side of one forwarded request. Nil functions drop
// what they would relay.
type Call struct {
	// Progress relays a progress notification of the request; its token
	// is already the caller's.
	Progress func(*sdk.ProgressNotificationParams)
	// Log relays a log notification; the caller's session applies the
	// caller's log level.
	Log func(*sdk.LoggingMessageParams)
	// Capabilities, when set, are the caller's client capabilities as its
	// request's _meta carried them (2026-07-28): they are sent to the
	// proxied server in place of Switchboard's own, so that the server
	// asks for input (elicitation, sampling, roots) only when the caller
	// can give it.
	Capabilities any
	// ProgressToken is the caller's progress token (nil: none asked).
	ProgressToken any
}

type callKey struct{}

// WithCall returns ctx carrying c for the request sent with it.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Table is the requests in flight on one client session. The zero value
// is ready to use.
type Table struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]*Call
	// red redacts what is relayed (the instance's and the call's
	// secrets); set by Install's caller through SetRedactor.
	red *secrets.Redactor
	// received counts the progress and log notifications read from the
	// session's connection, handled those relayed (or dropped) by the
	// client's handlers, which run after the reader has moved on: a
	// response can overtake the notifications sent before it, so a
	// request waits, once answered, until handled reaches what was
	// received by then (drain). changed is closed at each handled one.
	received, handled uint64
	changed           chan struct{}
	// toolsChanged runs when the server's tools change (OnToolsChanged).
	toolsChanged func()
}

// SetRedactor sets the redactor applied to every relayed notification.
func (t *Table) SetRedactor(red *secrets.Redactor) {
	t.mu.Lock()
	t.red = red
	t.mu.Unlock()
}

// Options returns client options relaying notifications through t (o's
// other fields kept), those about a request to its caller and those that
// outlive a request to the listening callers (Listen); add t's middleware
// to the client built with them (Install). The multi round-trip
// middleware of the SDK's client is disabled: an input-required result
// goes back to the caller, who alone can answer it.
func (t *Table) Options(o sdk.ClientOptions) *sdk.ClientOptions {
	o.ProgressNotificationHandler = t.progress
	o.LoggingMessageHandler = t.log
	o.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	t.listHandlers(&o)
	return &o
}

// Install adds the middleware registering each outgoing request of
// client (built with t.Options).
func (t *Table) Install(client *sdk.Client) {
	client.AddSendingMiddleware(t.sending)
}

// loggingLevel is asked of the proxied server for a request whose caller
// takes logs: everything, the caller's session filters by its own level.
const loggingLevel sdk.LoggingLevel = "debug"

func (t *Table) sending(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		params := req.GetParams()
		if params == nil || isNotification(method) {
			return next(ctx, method, req)
		}
		c := callOf(ctx)
		t.mu.Lock()
		if t.calls == nil {
			t.calls = map[string]*Call{}
		}
		t.next++
		token := "switchboard-" + strconv.FormatUint(t.next, 10)
		t.calls[token] = c
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			delete(t.calls, token)
			t.mu.Unlock()
		}()
		if c != nil {
			defer t.drain(ctx)
			meta := params.GetMeta()
			if meta == nil {
				meta = map[string]any{}
			}
			if c.ProgressToken != nil && c.Progress != nil {
				meta["progressToken"] = token
			}
			if c.Log != nil {
				meta[sdk.MetaKeyLogLevel] = loggingLevel
			}
			if c.Capabilities != nil {
				meta[sdk.MetaKeyClientCapabilities] = c.Capabilities
			}
			params.SetMeta(meta)
		}
		return next(ctx, method, req)
	}
}

func isNotification(method string) bool {
	return len(method) > len("notifications/") && method[:len("notifications/")] == "notifications/"
}

// drainWait bounds how long an answered request waits for the
// notifications read before its response to be relayed.
const drainWait = 2 * time.Second

// drain waits until every notification received so far is handled.
func (t *Table) drain(ctx context.Context) {
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	t.mu.Lock()
	want := t.received
	for t.handled < want {
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
		t.mu.Lock()
	}
	t.mu.Unlock()
}

// noteReceived counts a progress or log notification read from the
// connection.
func (t *Table) noteReceived() {
	t.mu.Lock()
	t.received++
	t.mu.Unlock()
}

// noteHandled counts one handled by the client's handlers.
func (t *Table) noteHandled() {
	t.mu.Lock()
	t.handled++
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	t.mu.Unlock()
}

// relayed reports whether a JSON-RPC message is a notification the
// table's handlers take.
func relayed(method string, isCall bool) bool {
	return !isCall && (method == "notifications/progress" || method == "notifications/message")
}

// Transport is inner with its connection's reads counted (see drain), for
// a transport whose connection the SDK's client uses through the
// Connection interface alone (stdio; not Streamable HTTP, whose
// connection the client also tells of session changes: count its event
// streams with CountEvents).
func (t *Table) Transport(inner sdk.Transport) sdk.Transport {
	return &countingTransport{inner: inner, t: t}
}

type countingTransport struct {
	inner sdk.Transport
	t     *Table
}

func (c *countingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Connection: conn, t: c.t}, nil
}

type countingConn struct {
	sdk.Connection
	t *Table
}

func (c *countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Request); ok && err == nil && relayed(r.Method, r.IsCall()) {
		c.t.noteReceived()
	}
	return msg, err
}

// CountEvents is body, an event stream of the proxied server, with the
// notifications it carries counted as they are read (see drain).
func (t *Table) CountEvents(body io.ReadCloser) io.ReadCloser {
	return &eventCounter{ReadCloser: body, t: t}
}

// maxEventLine bounds the line an eventCounter keeps; a longer line
// (never a notification it counts) is not looked at.
const maxEventLine = 64 << 10

type eventCounter struct {
	io.ReadCloser
	t    *Table
	line []byte
	long bool
}

func (e *eventCounter) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, b := range p[:n] {
		switch {
		case b == '\n':
			if !e.long {
				e.count(e.line)
			}
			e.line, e.long = e.line[:0], false
		case len(e.line) < maxEventLine:
			e.line = append(e.line, b)
		default:
			e.long = true
		}
	}
	return n, err
}

func (e *eventCounter) count(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte("notifications/")) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &m) == nil && relayed(m.Method, m.ID != nil) {
		e.t.noteReceived()
	}
}

func (t *Table) progress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	defer t.noteHandled()
	if req == nil || req.Params == nil {
		return
	}
	token, _ := req.Params.ProgressToken.(string)
	t.mu.Lock()
	c, red := t.calls[token], t.red
	t.mu.Unlock()
	if c == nil || c.Progress == nil || c.ProgressToken == nil {
		return
	}
	p := *req.Params
	p.ProgressToken = c.ProgressToken
	p.Message = red.String(p.Message)
	p.Meta = nil
	c.Progress(&p)
}

func (t *Table) log(_ context.Context, req *sdk.LoggingMessageRequest) {
	defer t.noteHandled()
	if req == nil || req.Params == nil {
		return
	}
	t.mu.Lock()
	var c *Call
	if len(t.calls) == 1 {
		for _, only := range t.calls {
			c = only
		}
	}
	red := t.red
	t.mu.Unlock()
	if c == nil || c.Log == nil {
		return
	}
	p := *req.Params
	p.Logger = red.String(p.Logger)
	p.Data = red.Value(p.Data)
	p.Meta = nil
	c.Log(&p)
}

// RPCError is a JSON-RPC error the proxied server answered a request
// with: an upstream_rejected *registry.UpstreamError (the message
// redacted and bounded) that also keeps the server's own JSON-RPC code and
// data (redacted), which the caller gets back as the server gave them.
type RPCError struct {
	*registry.UpstreamError
	RPCCode int64
	Data    json.RawMessage
}

func (e *RPCError) Unwrap() error { return e.UpstreamError }

// Refused is the error of a JSON-RPC error je of the proxied server
// (named by who, "the hosted MCP server"), answered with HTTP status
// (0 when none), with red's values redacted.
func Refused(je *jsonrpc.Error, status int, red *secrets.Redactor, who string) *RPCError {
	msg := red.String(je.Message)
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e := &RPCError{UpstreamError: &registry.UpstreamError{Code: "upstream_rejected", Status: status,
		Message: who + " refused the request: " + strings.ToValidUTF8(msg, "?")}, RPCCode: je.Code}
	if len(je.Data) > 0 && len(je.Data) <= 4096 && json.Valid(je.Data) {
		e.Data = red.Bytes(je.Data)
	}
	return e
}

// Cancelled is the error of a request to a proxied server whose caller
// went away (ctx is done): the caller cancelled it, closed its request,
// or reached its own deadline. The request to the proxied server is
// cancelled with it (the SDK's client sends notifications/cancelled and
// closes the request's stream).
func Cancelled(ctx context.Context) error {
	return switchboard.E(switchboard.ErrUnavailable, "cancelled", "the request was cancelled by its caller").WithCause(context.Cause(ctx))
}
