// Package mcpremote is the upstream dispatcher of connectors of type
// mcp_remote: an instance proxies a hosted MCP server. Its URL and headers
// come from the manifest's mcp_config with the instance's fields
// substituted; the server is reached with the official SDK's client over
// Streamable HTTP through an egress client. One client session per
// instance is kept in its Conn, closed when the instance changes; the
// remote tool list is cached with it for ToolsTTL.
package mcpremote

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
	"github.com/switchboardhq/switchboard/secrets"
)

// ToolsTTL is how long a remote server's tool list is served from the
// cache before it is asked again.
const ToolsTTL = 5 * time.Minute

// maxTools bounds the tools taken from a remote server.
const maxTools = 1000

// Is reports whether conn proxies a hosted MCP server.
func Is(conn *registry.Connector) bool {
	return conn != nil && conn.Manifest.Type == registry.TypeMCPRemote
}

// Upstream is what a Conn needs to reach its hosted server: the
// connector's manifest (mcp_config), the instance's field values, and the
// HTTP client, which must be an egress client (dial guard, timeouts, no
// redirects).
type Upstream struct {
	Manifest *registry.Manifest
	Fields   map[string]secrets.Secret
	Client   *http.Client
}

// Conn is one app instance's connection to its hosted MCP server. The
// zero value is ready to use; Close it when the instance changes.
type Conn struct {
	mu      sync.Mutex
	closed  bool
	session *sdk.ClientSession
	tools   *mcprelay.ToolList
	toolsAt time.Time
	// redactor scrubs the instance's secret values from remote error
	// messages.
	redactor *registry.Redactor
	// relay takes the server's notifications to the callers of the
	// requests in flight on the session.
	relay mcprelay.Table
}

// Close ends the session; the Conn is no longer used. The session is
// closed in the background: Close does not wait for the server.
func (c *Conn) Close() {
	if s := c.take(); s != nil {
		go s.Close()
	}
}

// Shutdown is Close waiting for the session to end: its streams to the
// server (the listen the SDK's client keeps open to a 2026-07-28 server,
// calls in flight) are closed when it returns. The server's shutdown
// uses it, so that nothing is left open to the hosted servers.
func (c *Conn) Shutdown() {
	if s := c.take(); s != nil {
		s.Close()
	}
}

// take marks c closed and returns its session.
func (c *Conn) take() *sdk.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.session
	c.session, c.tools, c.closed = nil, nil, true
	return s
}

// drop forgets a session that failed, so that the next call reconnects.
func (c *Conn) drop(s *sdk.ClientSession) {
	c.mu.Lock()
	if c.session == s {
		c.session, c.tools = nil, nil
	}
	c.mu.Unlock()
	go s.Close()
}

// dropTools forgets the cached tool list (the server said it changed).
func (c *Conn) dropTools() {
	c.mu.Lock()
	c.tools = nil
	c.mu.Unlock()
}

// Tools returns the hosted server's tools; the list is cached for
// ToolsTTL. A failure is a secret-free *registry.UpstreamError.
func (c *Conn) Tools(ctx context.Context, u Upstream) ([]*sdk.Tool, error) {
	l, err := c.ToolList(ctx, u)
	if err != nil {
		return nil, err
	}
	return l.Tools, nil
}

// ToolList is Tools with what is worked out from them once per listing
// (mcprelay.ToolList).
func (c *Conn) ToolList(ctx context.Context, u Upstream) (*mcprelay.ToolList, error) {
	c.mu.Lock()
	if c.tools != nil && time.Since(c.toolsAt) < ToolsTTL {
		l := c.tools
		c.mu.Unlock()
		return l, nil
	}
	c.mu.Unlock()
	var tools []*sdk.Tool
	err := c.withSession(ctx, u, func(ctx context.Context, s *sdk.ClientSession) error {
		tools = tools[:0]
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			if len(tools) == maxTools {
				break
			}
			tools = append(tools, tool)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := mcprelay.NewToolList(tools)
	c.mu.Lock()
	if !c.closed {
		c.tools, c.toolsAt = l, time.Now()
	}
	c.mu.Unlock()
	return l, nil
}

// Call forwards a tools/call to the hosted server and returns its result
// (isError and an input-required result included) as the server gave it,
// and the HTTP status it answered with. A failure to reach or a refusal
// by the server is a secret-free *registry.UpstreamError. A
// *mcprelay.Call in ctx receives the call's notifications.
func (c *Conn) Call(ctx context.Context, u Upstream, params *sdk.CallToolParams) (*sdk.CallToolResult, int, error) {
	var (
		res    *sdk.CallToolResult
		status int
	)
	err := c.withSession(ctx, u, func(ctx context.Context, s *sdk.ClientSession) error {
		var err error
		res, err = s.CallTool(ctx, params)
		return err
	})
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	} else if ue := (*registry.UpstreamError)(nil); errors.As(err, &ue) {
		status = ue.Status
	}
	if err != nil {
		return nil, status, err
	}
	if status == 0 {
		status = http.StatusOK
	}
	return res, status, nil
}

// withSession runs fn with the instance's session, connecting first when
// there is none. fn's context has the upstream client's timeout as its
// deadline: the session's own HTTP client has none, since the listen
// stream the SDK's client keeps open to a 2026-07-28 server lives as long
// as the session (a total timeout on the client cut it, and with it every
// forwarded listen, each minute). When fn fails in transport (not with a
// JSON-RPC error of the server, not at its deadline, not cancelled by the
// caller), the session is dropped and fn retried once on a new one.
// Errors are classified into *registry.UpstreamError, secret-free.
func (c *Conn) withSession(ctx context.Context, u Upstream, fn func(context.Context, *sdk.ClientSession) error) error {
	for attempt := 0; ; attempt++ {
		s, fresh, err := c.connect(ctx, u)
		if err != nil {
			return err
		}
		rec := &statusRecorder{}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if u.Client != nil && u.Client.Timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, u.Client.Timeout)
		}
		err = fn(context.WithValue(cctx, statusKey{}, rec), s)
		timedOut := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		switch {
		case ctx.Err() != nil:
			return mcprelay.Cancelled(ctx)
		case timedOut:
			return &registry.UpstreamError{Code: "upstream_unavailable", Status: rec.get(),
				Message: "the hosted MCP server did not answer in time"}
		}
		err = withStatus(err, rec.get())
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			c.drop(s)
			if attempt == 0 && !fresh {
				continue
			}
		}
		return c.classify(err)
	}
}

// connect returns the instance's session, connecting when there is none;
// fresh reports a new one.
func (c *Conn) connect(ctx context.Context, u Upstream) (*sdk.ClientSession, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, false, nil
	}
	if c.closed {
		return nil, false, switchboard.E(switchboard.ErrUnavailable, "upstream_unavailable",
			"the app instance changed while it was being called; call again")
	}
	m := u.Manifest
	c.redactor = registry.NewRedactor(m, u.Fields)
	c.relay.SetRedactor(c.redactor)
	c.relay.OnToolsChanged(c.dropTools)
	cfg := m.MCPConfig
	if cfg == nil || cfg.URL == "" {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config", "connector %s declares no mcp_config.url", m.ID)
	}
	endpoint := registry.Expand(cfg.URL, m, u.Fields)
	if eu, err := url.Parse(endpoint); err != nil || (eu.Scheme != "https" && eu.Scheme != "http") || eu.Host == "" || eu.User != nil {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the app instance's MCP server URL is not an http(s) URL; check the connector's URL field")
	}
	headers := make(map[string]secrets.Secret, len(cfg.Headers))
	for k, v := range cfg.Headers {
		val := registry.Expand(v, m, u.Fields)
		if !validHeaderName(k) || strings.ContainsAny(val, "\r\n\x00") {
			return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config",
				"the app instance's MCP header %s cannot be sent; check the connector's fields", truncate(k, 40))
		}
		headers[http.CanonicalHeaderKey(k)] = secrets.New(val)
	}
	base := u.Client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{
		Transport: &headerTransport{base: base, headers: headers, relay: &c.relay},
		// No total timeout: each request has its own deadline
		// (withSession), the listen stream none.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	transport := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: 1}
	client := sdk.NewClient(&sdk.Implementation{Name: "switchboard", Version: "1"}, c.relay.Options(sdk.ClientOptions{}))
	c.relay.Install(client)
	rec := &statusRecorder{}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, statusKey{}, rec), 30*time.Second)
	defer cancel()
	s, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, false, c.classifyLocked(withStatus(err, rec.get()))
	}
	c.session = s
	return s, true, nil
}

// classify classifies a failure of the hosted server into a secret-free
// *registry.UpstreamError.
func (c *Conn) classify(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classifyLocked(err)
}

// classifyLocked is classify with c.mu held.
func (c *Conn) classifyLocked(err error) error {
	if _, ok := switchboard.AsError(err); ok {
		return err
	}
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		return err
	}
	if ue, ok := registry.EgressRefused(err); ok {
		return ue
	}
	status := 0
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	}
	var je *jsonrpc.Error
	switch {
	case status == http.StatusUnauthorized:
		return &registry.UpstreamError{Code: "reconnect_required", Status: status,
			Message: "the hosted MCP server rejected the app's credentials; update the app instance's fields"}
	case status == http.StatusForbidden:
		return &registry.UpstreamError{Code: "forbidden", Status: status, Message: "the hosted MCP server refused access"}
	case status == http.StatusTooManyRequests:
		return &registry.UpstreamError{Code: "rate_limited", Status: status, Message: "the hosted MCP server is rate limiting; retry later"}
	case errors.As(err, &je):
		return mcprelay.Refused(je, status, c.redactor, "the hosted MCP server")
	}
	return &registry.UpstreamError{Code: "upstream_unavailable", Status: status,
		Message: "the hosted MCP server could not be reached or did not answer"}
}

// validHeaderName reports whether k is an HTTP header field name (RFC
// 9110 token).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// headerTransport adds the instance's headers to every request to the
// hosted server and records the answer's status for the caller's
// statusRecorder. The header values are secrets, revealed only here.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]secrets.Secret
	// relay counts the notifications of the server's event streams.
	relay *mcprelay.Table
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v.Reveal())
	}
	resp, err := h.base.RoundTrip(req)
	if resp != nil && h.relay != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = h.relay.CountEvents(resp.Body)
	}
	if resp != nil {
		if rec, ok := req.Context().Value(statusKey{}).(*statusRecorder); ok {
			rec.set(resp.StatusCode)
		}
	}
	return resp, err
}

// statusKey carries a *statusRecorder in a request's context.
type statusKey struct{}

// statusRecorder keeps the last error status (or the first success) the
// hosted server answered one call with.
type statusRecorder struct {
	mu     sync.Mutex
	status int
}

func (s *statusRecorder) set(code int) {
	s.mu.Lock()
	if s.status == 0 || code >= 400 {
		s.status = code
	}
	s.mu.Unlock()
}

func (s *statusRecorder) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// statusError is a failure with the HTTP status the server answered.
type statusError struct {
	err    error
	status int
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func withStatus(err error, status int) error {
	if status < 400 {
		return err
	}
	return &statusError{err: err, status: status}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Do runs fn with the instance's session (connecting first when there
// is none), for the MCP methods other than tools (resources, prompts,
// completions), with Call's retry and error classification.
func (c *Conn) Do(ctx context.Context, u Upstream, fn func(context.Context, *sdk.ClientSession) error) error {
	return c.withSession(ctx, u, fn)
}
