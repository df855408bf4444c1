package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Remote MCP connectors (type mcp_remote): an instance proxies a hosted
// MCP server. Its URL and headers come from the manifest's mcp_config with
// the instance's fields substituted; the server is reached with the
// official SDK's client over Streamable HTTP through the gateway's egress
// client. One client session per instance is kept on its Target and
// closed when the instance changes; the remote tool list is cached with
// it for RemoteToolsTTL.

// RemoteToolsTTL is how long a remote server's tool list is served from
// the cache before it is asked again.
const RemoteToolsTTL = 5 * time.Minute

// maxRemoteTools bounds the tools taken from a remote server.
const maxRemoteTools = 1000

// IsRemote reports whether conn proxies a hosted MCP server.
func IsRemote(conn *registry.Connector) bool {
	return conn != nil && conn.Manifest.Type == registry.TypeMCPRemote
}

// remoteConn is a Target's connection to its hosted MCP server.
type remoteConn struct {
	mu      sync.Mutex
	closed  bool
	session *sdk.ClientSession
	tools   []*sdk.Tool
	toolsAt time.Time
	// secrets are the values to scrub from remote error messages.
	scrubber *redactor
}

// close ends the session; the Target is no longer used.
func (r *remoteConn) close() {
	r.mu.Lock()
	s := r.session
	r.session, r.tools, r.closed = nil, nil, true
	r.mu.Unlock()
	if s != nil {
		go s.Close()
	}
}

// drop forgets a session that failed, so that the next call reconnects.
func (r *remoteConn) drop(s *sdk.ClientSession) {
	r.mu.Lock()
	if r.session == s {
		r.session, r.tools = nil, nil
	}
	r.mu.Unlock()
	go s.Close()
}

// RemoteTools returns the tools of an mcp_remote instance's hosted server
// for p, after validateAgent; the list is cached per instance.
func (g *Gateway) RemoteTools(ctx context.Context, t *Target, p *auth.Principal) ([]*sdk.Tool, error) {
	if err := validateAgent(p, t); err != nil {
		return nil, err
	}
	if !IsRemote(t.Connector) {
		return nil, errNotRemote
	}
	r := &t.remote
	r.mu.Lock()
	if r.tools != nil && time.Since(r.toolsAt) < RemoteToolsTTL {
		tools := r.tools
		r.mu.Unlock()
		return tools, nil
	}
	r.mu.Unlock()
	var tools []*sdk.Tool
	err := g.withSession(ctx, t, func(ctx context.Context, s *sdk.ClientSession) error {
		tools = tools[:0]
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			if len(tools) == maxRemoteTools {
				break
			}
			tools = append(tools, tool)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tools == nil {
		tools = []*sdk.Tool{}
	}
	r.mu.Lock()
	if !r.closed {
		r.tools, r.toolsAt = tools, time.Now()
	}
	r.mu.Unlock()
	return tools, nil
}

// CallRemote forwards a tools/call to an mcp_remote instance's hosted
// server for p, after validateAgent, and audits it. The remote result
// (isError included) is returned as the server gave it; a failure to
// reach or a refusal by the server is a *registry.UpstreamError.
func (g *Gateway) CallRemote(ctx context.Context, t *Target, p *auth.Principal, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	start := time.Now()
	res, status, err := g.callRemote(ctx, t, p, name, args)
	if g.audit != nil && p != nil && t != nil {
		e := audit.Entry{Time: start.UTC(), Tenant: t.Instance.TenantID, Instance: t.Instance.Slug, Agent: p.AgentID,
			Actor: p.UserID, Subject: p.Subject(), Tool: name, Action: "call", Outcome: "ok", Status: status,
			LatencyUs: time.Since(start).Microseconds()}
		if p.Caller != nil {
			e.Caller = string(p.Caller.ID)
		}
		if err != nil {
			e.Outcome = Detail(err).Code
		} else if res.IsError {
			e.Outcome = "tool_error"
		}
		g.audit.Record(e)
	}
	return res, err
}

func (g *Gateway) callRemote(ctx context.Context, t *Target, p *auth.Principal, name string, args json.RawMessage) (*sdk.CallToolResult, int, error) {
	if err := validateAgent(p, t); err != nil {
		return nil, 0, err
	}
	if !IsRemote(t.Connector) {
		return nil, 0, errNotRemote
	}
	params := &sdk.CallToolParams{Name: name}
	if len(args) > 0 && string(args) != "null" {
		params.Arguments = args
	}
	var (
		res    *sdk.CallToolResult
		status int
	)
	err := g.withSession(ctx, t, func(ctx context.Context, s *sdk.ClientSession) error {
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
// there is none. When fn fails in transport (not with a JSON-RPC error of
// the server), the session is dropped and fn retried once on a new one.
// Errors are classified into *registry.UpstreamError, secret-free.
func (g *Gateway) withSession(ctx context.Context, t *Target, fn func(context.Context, *sdk.ClientSession) error) error {
	for attempt := 0; ; attempt++ {
		s, fresh, err := g.remoteSession(ctx, t)
		if err != nil {
			return err
		}
		rec := &statusRecorder{}
		err = fn(context.WithValue(ctx, statusKey{}, rec), s)
		if err == nil {
			return nil
		}
		err = withStatus(err, rec.get())
		var je *jsonrpc.Error
		if !errors.As(err, &je) && ctx.Err() == nil {
			t.remote.drop(s)
			if attempt == 0 && !fresh {
				continue
			}
		}
		return g.remoteError(t, err)
	}
}

// remoteSession returns the instance's session, connecting when there is
// none; fresh reports a new one.
func (g *Gateway) remoteSession(ctx context.Context, t *Target) (*sdk.ClientSession, bool, error) {
	r := &t.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.session != nil {
		return r.session, false, nil
	}
	if r.closed {
		return nil, false, switchboard.E(switchboard.ErrUnavailable, "upstream_unavailable",
			"the app instance changed while it was being called; call again")
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return nil, false, err
	}
	m := &t.Connector.Manifest
	r.scrubber = newRedactor(m, c.fields)
	cfg := m.MCPConfig
	if cfg == nil || cfg.URL == "" {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config", "connector %s declares no mcp_config.url", m.ID)
	}
	endpoint := registry.Expand(cfg.URL, m, c.fields)
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the app instance's MCP server URL is not an http(s) URL; check the connector's URL field")
	}
	headers := make(map[string]secrets.Secret, len(cfg.Headers))
	for k, v := range cfg.Headers {
		val := registry.Expand(v, m, c.fields)
		if !validHeaderName(k) || strings.ContainsAny(val, "\r\n\x00") {
			return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config",
				"the app instance's MCP header %s cannot be sent; check the connector's fields", truncate(k, 40))
		}
		headers[http.CanonicalHeaderKey(k)] = secrets.New(val)
	}
	base := g.remote.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{
		Transport: &headerTransport{base: base, headers: headers},
		Timeout:   g.remote.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	transport := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: 1}
	client := sdk.NewClient(&sdk.Implementation{Name: "switchboard", Version: "1"}, &sdk.ClientOptions{})
	rec := &statusRecorder{}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, statusKey{}, rec), 30*time.Second)
	defer cancel()
	s, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, false, g.remoteError(t, withStatus(err, rec.get()))
	}
	r.session = s
	return s, true, nil
}

// remoteError classifies a failure of the hosted server into a
// secret-free *registry.UpstreamError.
func (g *Gateway) remoteError(t *Target, err error) error {
	if _, ok := switchboard.AsError(err); ok {
		return err
	}
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		return err
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
		msg := je.Message
		t.remote.mu.Lock()
		if r := t.remote.scrubber; r != nil {
			msg = r.string(msg)
		}
		t.remote.mu.Unlock()
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return &registry.UpstreamError{Code: "upstream_rejected", Status: status,
			Message: "the hosted MCP server refused the request: " + strings.ToValidUTF8(msg, "?")}
	}
	return &registry.UpstreamError{Code: "upstream_unavailable", Status: status,
		Message: "the hosted MCP server could not be reached or did not answer"}
}

var errNotRemote = switchboard.E(switchboard.ErrInvalid, "invalid_request", "the app instance does not proxy a hosted MCP server")

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
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v.Reveal())
	}
	resp, err := h.base.RoundTrip(req)
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
