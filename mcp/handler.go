// Package mcp serves app instances as MCP servers over Streamable HTTP:
// POST /workspaces/{tenant}/webhooks/{instance}.mcp, JSON-RPC 2.0, built on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk) in stateless
// mode with JSON responses, so that any replica can answer any request.
//
// Before the SDK sees a request, the handler caps the body at 1 MiB,
// authenticates the caller and runs validateAgent (gateway.Authorize), and
// checks that the body is JSON-RPC. Refusals are HTTP errors with a
// JSON-RPC error body. The principal and the resolved instance reach tool
// handlers through the SDK's auth.TokenInfo. Each connector's tools — one
// per registry entity, with an "action" enum — are built once into an
// *mcp.Server shared by every instance of that connector version.
//
// See docs/mcp-sdk-decision.md.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/knowledge"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/registry/mcpremote"
	"github.com/switchboardhq/switchboard/tenants"
)

// Options configures the MCP endpoint.
type Options struct {
	// Logger receives one line per refused request or failed tool call.
	Logger *slog.Logger
	// Version is the server version reported by initialize.
	Version string
	// DisableLocalhostProtection turns off the DNS-rebinding guard that
	// refuses requests reaching a loopback listener with a non-loopback
	// Host header. Set it when a reverse proxy on the same host forwards
	// to a loopback address.
	DisableLocalhostProtection bool
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call the endpoint. A request with an Origin header that is not
	// one of them, nor PublicURL's origin, is refused with 403; requests
	// without Origin (non-browser clients) are not affected.
	AllowedOrigins []string
	// PublicURL is the server's public base URL; instance URLs (the OAuth
	// resource and audience) are PublicURL + the instance path. Empty
	// uses the request's scheme and Host.
	PublicURL string
	// Authorization, when set, accepts OAuth access tokens (MCP
	// authorization) beside caller credentials.
	Authorization *Authorization
	// DisableFastPath sends every request through the SDK (for the
	// differential test).
	DisableFastPath bool
	// ContextBudget is the operator's default context budget: the
	// largest tools/list, in bytes, an instance in tenants.ToolsAuto
	// serves before serving the meta-tools instead (a tenant's own
	// budget, tenants.Tenant.MCPContextBudget, comes first). 0 is
	// DefaultContextBudget.
	ContextBudget int
	// Meta serves the meta-tools scoped to one instance (the tenant
	// catalog endpoint's); nil serves every instance its tools.
	Meta MetaTools
}

// DefaultContextBudget is the context budget when the operator sets none:
// 24 KiB of tools/list, about 6,000 tokens of an agent's context. The
// compiler shortens every OpenAPI connector's tools/list to fit 32 KiB
// (openapi.ToolsBudget): whole vendor APIs end near that bound (29-32 KiB
// for the six shared descriptions) and serve the meta-tools, while curated
// connectors (the built-in GitHub and Slack, 22-23 KiB) keep their tools.
const DefaultContextBudget = 24 << 10

// MetaTools serves the meta-tools (search, describe, call, guide) scoped
// to one instance, for an instance endpoint whose tools/list is too large
// (tenantmcp.Server). The request is authenticated and its agent allowed
// on t; its body is unread.
type MetaTools interface {
	ServeInstance(w http.ResponseWriter, r *http.Request, p *auth.Principal, t *gateway.Target, log gateway.CallLog)
}

// Path shapes of the endpoint.
const (
	prefix    = "/workspaces/"
	webhooks  = "/webhooks/"
	mcpSuffix = ".mcp"
)

// JSON-RPC error codes used before the SDK sees a request.
const (
	codeParseError     = switchboard.RPCParseError
	codeInvalidRequest = switchboard.RPCInvalidRequest
	// CodeRefused is the JSON-RPC error code of a request refused by
	// authentication, the agent allowlist or an unknown instance; the
	// error's data.code says which.
	CodeRefused = switchboard.RPCRefused
)

// Keys of the TokenInfo.Extra map tool handlers read.
const (
	extraPrincipal = "switchboard.principal"
	extraTarget    = "switchboard.target"
	extraLogger    = "switchboard.logger"
	extraSurface   = "switchboard.surface"
	// extraAuthorized is the whole *authorized (Resource flows read it).
	extraAuthorized = "switchboard.authorized"
)

type handler struct {
	g      *gateway.Gateway
	logger *slog.Logger
	opts   Options
	// inflight are the forwarded requests in progress, which their
	// callers may cancel (cancel.go).
	inflight inflight
	sdk      http.Handler
	// sdkStream is the SDK's handler answering in event streams, for the
	// instances of mcp_remote and mcp_local connectors.
	sdkStream http.Handler
	origins   map[string]bool

	mu      sync.Mutex
	servers map[serverKey]*connServer

	fast fastPath
	// fastServed counts requests the fast path answered (for tests).
	fastServed atomic.Int64
}

// connServer is the MCP server of one connector version and its tool
// handlers, by tool name.
type connServer struct {
	key  string
	impl *sdk.Implementation
	srv  *sdk.Server
	// statelessMeta is the _meta of a result in the stateless era, as
	// the SDK writes it: the server's name.
	statelessMeta []byte
	// entities are the tools' entities, by tool name.
	entities map[string]*registry.Entity
	// listBytes is the size of the tools/list result,
	// {"tools":[...]}: what the context budget is compared with.
	listBytes int
}

// NewHandler returns the MCP endpoint: paths of the form
// /workspaces/{tenant}/webhooks/{instance}.mcp, read from the path values
// tenant and instance ("{instance}.mcp") the server's router sets, or
// from the path when mounted on its own at "/workspaces/". Other paths
// are answered 404 with a JSON-RPC error.
func NewHandler(g *gateway.Gateway, opts Options) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = g.Logger()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &handler{g: g, logger: logger, opts: opts, servers: map[serverKey]*connServer{}, origins: allowedOrigins(opts)}
	streamable := sdk.NewStreamableHTTPHandler(h.getServer, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: gateway.MaxBodyBytes,
		// Our middleware applies the same guard, before authentication.
		DisableLocalhostProtection: true,
	})
	bearer := sdkauth.RequireBearerToken(verifyFromContext, &sdkauth.RequireBearerTokenOptions{
		AllowMissingExpiration: true,
	})
	h.sdk = bearer(streamable)
	// The instances proxying an MCP server answer a request whose client
	// accepts it as an event stream: the proxied server's progress and
	// log notifications about the request reach the caller on it before
	// the response (still stateless: the stream ends with the response).
	h.sdkStream = bearer(sdk.NewStreamableHTTPHandler(h.getServer, &sdk.StreamableHTTPOptions{
		Stateless:                  true,
		MaxRequestBodyBytes:        gateway.MaxBodyBytes,
		DisableLocalhostProtection: true,
	}))
	return h
}

// authorized is what the middleware found; the verifier hands it to the
// SDK as TokenInfo.
type authorized struct {
	principal *auth.Principal
	target    *gateway.Target
	log       gateway.CallLog
	// surface names the MCP protocol version in the calls' metrics.
	surface *gateway.Surface
	// person and source are set for a Resource flow (resources.go): the
	// principal is a signed-in person's access token (principal nil: no
	// credential at all), reading the knowledge source.
	person bool
	source *knowledge.Source
	// srv is the connector's server once servesMeta has looked it up
	// (ServeHTTP, before the request is shared): serverFor then takes
	// no lock a second time.
	srv *connServer
	// callCtx is the fast path's call context (its one message's): the
	// request's context with the surface (gateway.WithSurfaceIn).
	callCtx gateway.SurfaceContext
	// resp is the fast path's upstream response
	// (gateway.CallStringsInto).
	resp registry.Response
}

// extra is the TokenInfo.Extra map tool handlers read.
func (a *authorized) extra() map[string]any {
	return map[string]any{extraPrincipal: a.principal, extraTarget: a.target, extraLogger: &a.log, extraSurface: a.surface, extraAuthorized: a}
}

type authorizedKey struct{}

// requestState is what ServeHTTP keeps for a request, in one allocation.
type requestState struct {
	a         authorized
	principal auth.Principal // a caller credential's (authorize)
	// logAttrs holds the call log's attributes: NewCallLogIn takes the
	// buffer when it has room for its attributes (the request and trace
	// ids and the three below, at most five) and four more. Nine and no
	// more: with the rest, 760 bytes, in the 768-byte size class (ten
	// took the 896-byte one).
	logAttrs [9]slog.Attr
	msg      [1]envelope
}

// verifyFromContext is the SDK's token verifier. The token itself was
// checked by our middleware, which put the result in the context; the
// verifier only carries it into TokenInfo.Extra.
func verifyFromContext(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	a, ok := ctx.Value(authorizedKey{}).(*authorized)
	if !ok {
		return nil, sdkauth.ErrInvalidToken
	}
	if a.principal == nil || a.principal.Caller == nil {
		// An anonymous Resource request (resources.go).
		return &sdkauth.TokenInfo{Extra: a.extra()}, nil
	}
	return &sdkauth.TokenInfo{UserID: string(a.principal.Caller.ID), Extra: a.extra()}, nil
}

// endpointSlugs returns the tenant and instance slugs of the request: the
// path values tenant and instance ("{instance}.mcp") when the server's
// router matched /workspaces/{tenant}/webhooks/{instance}, else parsed
// from the path, so that the handler also serves mounted on its own.
func endpointSlugs(r *http.Request) (tenant, instance string, ok bool) {
	tenant = r.PathValue("tenant")
	if tenant == "" {
		return parsePath(r.URL.Path)
	}
	instance, ok = strings.CutSuffix(r.PathValue("instance"), mcpSuffix)
	if !ok || instance == "" || strings.Contains(instance, "/") || strings.Contains(tenant, "/") {
		return "", "", false
	}
	return tenant, instance, true
}

// parsePath returns the tenant and instance slugs of
// /workspaces/{tenant}/webhooks/{instance}.mcp.
func parsePath(p string) (tenant, instance string, ok bool) {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return "", "", false
	}
	tenant, rest, ok = strings.Cut(rest, "/")
	if !ok || tenant == "" {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest, webhooks[1:]) // rest follows a "/"
	if !ok {
		return "", "", false
	}
	instance, ok = strings.CutSuffix(rest, mcpSuffix)
	if !ok || instance == "" || strings.Contains(instance, "/") {
		return "", "", false
	}
	return tenant, instance, true
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcDetail       `json:"error"`
}

type rpcDetail struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

var nullID = json.RawMessage("null")

// requestID returns the id of body when it is a single JSON-RPC request
// with a string or number id, else null: clients (the official SDK among
// them) match an error response to its request by id.
func requestID(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return nullID
	}
	members, ok := scanObject(nil, body)
	if !ok {
		return nullID
	}
	var id []byte
	for _, m := range members {
		if m.key == "id" {
			if id != nil {
				return nullID // repeated: no id is the id
			}
			id = m.raw
		}
	}
	if len(id) == 0 || len(id) > 200 || !validID(id) {
		return nullID
	}
	return json.RawMessage(id)
}

// writeRPCError refuses a request with a JSON-RPC error whose HTTP status,
// JSON-RPC code and data (code, retryAfterMs) come from the error table.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, err error) {
	p := switchboard.ProblemOf(err)
	p.SetHeaders(w.Header())
	w.WriteHeader(p.Status)
	w.Write(append(rpcErrorJSON(id, p), '\n'))
}

// rpcErrorJSON is the JSON-RPC error response of a problem.
func rpcErrorJSON(id json.RawMessage, p switchboard.Problem) []byte {
	b, _ := json.Marshal(rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorDetail(p)})
	return b
}

// rpcErrorDetail is the JSON-RPC error object of a problem: its table code,
// "code: message", and data.code (and data.retryAfterMs when known).
func rpcErrorDetail(p switchboard.Problem) rpcDetail {
	data := map[string]any{"code": p.Detail.Code}
	if p.Detail.RetryAfterMs > 0 {
		data["retryAfterMs"] = p.Detail.RetryAfterMs
	}
	return rpcDetail{Code: p.RPC, Message: p.Detail.Code + ": " + p.Detail.Message, Data: data}
}

// isLoopbackHost reports whether a Host header names a loopback address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackAddr reports whether a is a loopback address; a TCP address
// is read without being formatted.
func loopbackAddr(a net.Addr) bool {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	return isLoopbackHost(a.String())
}

// checkOrigin applies the DNS-rebinding guards: a request that reached a
// loopback listener must name a loopback Host, and a present Origin must
// be allowed. It reports the refusal's message, or "".
func (h *handler) checkOrigin(r *http.Request) string {
	if !h.opts.DisableLocalhostProtection {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if loopbackAddr(la) && !isLoopbackHost(r.Host) {
				return "the Host header does not name this server"
			}
		}
	}
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return ""
	}
	if len(origins) > 1 || !h.origins[strings.ToLower(strings.TrimRight(origins[0], "/"))] {
		return "the Origin is not allowed to call this endpoint"
	}
	return ""
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenantSlug, instanceSlug, ok := endpointSlugs(r)
	if !ok {
		writeRPCError(w, nullID, switchboard.E(switchboard.ErrNotFound, "route_not_found", "no such endpoint: use /workspaces/{tenant}/webhooks/{instance}.mcp"))
		return
	}
	// One allocation for what the request keeps: its authorization, its
	// call log's attributes and its message.
	st := &requestState{}
	log := gateway.NewCallLogIn(st.logAttrs[:0], h.logger, w, slog.String("tenant", tenantSlug), slog.String("instance", instanceSlug), slog.String("mode", "mcp"))
	if msg := h.checkOrigin(r); msg != "" {
		log.Info("mcp request refused", "code", "forbidden_origin")
		writeRPCError(w, nullID, switchboard.E(switchboard.ErrForbidden, "forbidden_origin", "%s", msg))
		return
	}
	if r.Method != http.MethodPost {
		// Stateless: no standalone SSE stream (GET) and no session to
		// delete (DELETE).
		w.Header().Set("Allow", http.MethodPost)
		writeRPCError(w, nullID, switchboard.E(switchboard.ErrInvalid, "method_not_allowed", "the MCP endpoint accepts POST only"))
		return
	}

	body, err := readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			log.Info("mcp request refused", "code", "request_too_large")
			writeRPCError(w, nullID, switchboard.E(switchboard.ErrInvalid, "request_too_large", "the request body is larger than 1 MiB"))
			return
		}
		writeRPCError(w, nullID, switchboard.E(switchboard.ErrInvalid, "invalid_request", "the request body could not be read"))
		return
	}

	// The body is split once, here: the resource flow and the agent path
	// read the same messages.
	msgs, isBatch, code, msg := checkJSONRPCInto(st.msg[:0], body)
	if code == 0 && !isBatch && len(msgs) == 1 && h.resourceFlow(w, r, log, tenantSlug, instanceSlug, body, &msgs[0]) {
		return
	}
	ctx := r.Context()
	p, t, err := h.authorize(ctx, r, tenantSlug, instanceSlug, &st.principal)
	if err != nil {
		gateway.LogError(log, "mcp request refused", err)
		if name, ok := calledTool(body); ok {
			h.g.Refused(ctx, tenantSlug, instanceSlug, p, t, name, err)
		}
		h.challenge(w, r, switchboard.ProblemOf(err).Status, switchboard.CodeOf(err))
		writeRPCError(w, requestID(body), err)
		return
	}

	if code != 0 {
		log.Info("mcp request refused", "code", rpcCodeName(code), "agent", p.AgentID)
		writeRPCError(w, requestID(body), switchboard.E(switchboard.ErrInvalid, rpcCodeName(code), "%s", msg))
		return
	}
	version := r.Header.Get(headerVersion)
	a := &st.a
	*a = authorized{principal: p, target: t, log: log, surface: surfaceOf(version)}
	if h.servesMeta(a) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.opts.Meta.ServeInstance(w, r, p, t, log)
		return
	}
	if isBatch {
		h.serveBatch(w, withAuthorized(r, a), msgs, body, version)
		return
	}
	env := &msgs[0]
	msg = checkParamHeader(r, env, t.Spec())
	if msg == "" {
		msg = h.checkForwardedParamHeaders(ctx, r, env, p, t)
	}
	if msg != "" {
		log.Info("mcp request refused", "code", "header_mismatch", "agent", p.AgentID)
		writeRPCError(w, requestID(body), switchboard.E(switchboard.ErrInvalid, "header_mismatch", "%s", msg))
		return
	}
	if api := t.Spec(); api != nil && env.method == "tools/call" {
		// The SDK answers an unknown tool (-32602); it is audited here.
		if name, _ := toolNameIn(env, api); name != "" {
			if _, ok := api.Entity(name); !ok && !bridgeOf(t.Connector, name) {
				h.g.Refused(ctx, tenantSlug, instanceSlug, p, t, name,
					switchboard.E(switchboard.ErrNotFound, "unknown_tool", "no such tool"))
			}
		}
	}
	if unknownMethod(env) && knownVersion(version) {
		log.Info("mcp request refused", "code", "method_not_found", "agent", p.AgentID)
		writeMethodNotFound(w, env, version)
		return
	}
	if forwards(t.Connector) {
		if id, ok := cancelledID(env); ok {
			h.inflight.cancel(keyOf(p, t, id))
		} else if env.hasMethod && env.id != nil {
			var done func()
			r, done = h.inflight.track(r, keyOf(p, t, env.id))
			defer done()
		}
	}
	if !h.opts.DisableFastPath && env.hasMethod && env.id != nil {
		if h.serveFast(w, r, a, env, body) {
			h.fastServed.Add(1)
			return
		}
	}
	h.serveSDK(w, withAuthorized(r, a), body)
}

// withAuthorized is r with a in its context, where the SDK's token
// verifier (verifyFromContext) and getServer find it. The fast path does
// without.
func withAuthorized(r *http.Request, a *authorized) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), authorizedKey{}, a))
}

// readBody reads the request body, at most gateway.MaxBodyBytes (an
// *http.MaxBytesError beyond). A body of announced length is read into a
// buffer of that size (the server holds the body to its Content-Length),
// without the growing copies of io.ReadAll.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= gateway.MaxBodyBytes {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxBodyBytes))
}

// serveSDK hands the request, with body, to the SDK.
func (h *handler) serveSDK(w http.ResponseWriter, r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if a, ok := r.Context().Value(authorizedKey{}).(*authorized); ok && forwards(a.target.Connector) {
		if retryVersion(r.Header.Get(headerVersion)) {
			w = &retryWriter{ResponseWriter: w}
		}
		h.sdkStream.ServeHTTP(w, r)
		return
	}
	h.sdk.ServeHTTP(w, r)
}

// authorize authenticates the request: an OAuth access token of the
// configured authorization server, or a caller credential (whose
// principal is written into *into).
func (h *handler) authorize(ctx context.Context, r *http.Request, tenantSlug, instanceSlug string, into *auth.Principal) (*auth.Principal, *gateway.Target, error) {
	az := h.opts.Authorization
	token, hasBearer := bearerToken(r)
	if !hasBearer || az == nil || !az.isOAuthToken(token) {
		return h.g.AuthorizeInto(ctx, r, tenantSlug, instanceSlug, into)
	}
	resource := publicBase(h.opts.PublicURL, r) + r.URL.Path
	sub, client, err := az.verify(ctx, token, resource)
	if err != nil {
		return nil, nil, err
	}
	t, err := h.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, nil, err
	}
	p := accessTokenPrincipal(tenantInstance{tenantID: t.Instance.TenantID, tenantSlug: tenantSlug}, sub, client)
	if client == "" {
		return nil, nil, switchboard.E(switchboard.ErrForbidden, "missing_agent_id", "the access token names no OAuth client (client_id)")
	}
	if !t.Instance.AllowsAgent(client) {
		return p, t, switchboard.E(switchboard.ErrForbidden, "agent_not_allowed",
			"the agent is not on this app instance's list of allowed agents")
	}
	return p, t, nil
}

// calledTool returns the tool a body holding one tools/call request
// names, for auditing a refusal.
func calledTool(body []byte) (string, bool) {
	msgs, isBatch, code, _ := checkJSONRPC(body)
	if code != 0 || isBatch || len(msgs) != 1 || msgs[0].method != "tools/call" {
		return "", false
	}
	return toolName(&msgs[0])
}

// toolName returns the name a tools/call request's params give, decoded
// once per message.
func toolName(env *envelope) (string, bool) { return toolNameIn(env, nil) }

// toolNameIs reports whether the tool name is name, without keeping a
// copy of it (toolNameIn, later, may give it without one).
func toolNameIs(env *envelope, name string) bool {
	if env.nameRead {
		return env.name == name
	}
	var paramsBuf [8]member
	params, _ := scanObject(paramsBuf[:0], env.params)
	for _, p := range params {
		if p.key == "name" {
			if raw := p.raw; len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
				return string(raw[1:len(raw)-1]) == name
			}
			break
		}
	}
	got, _ := toolName(env)
	return got == name
}

// toolNameIn is toolName, the name of one of api's tools (when api is
// not nil) given as the entity's own string rather than a copy.
func toolNameIn(env *envelope, api *registry.Spec) (string, bool) {
	if !env.nameRead {
		env.nameRead = true
		var paramsBuf [8]member
		params, _ := scanObject(paramsBuf[:0], env.params)
		for _, p := range params {
			if p.key == "name" {
				if raw := p.raw; api != nil && len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
					if e, ok := api.Entity(string(raw[1 : len(raw)-1])); ok {
						env.name = e.Name
						break
					}
				}
				decodeString(p.raw, &env.name)
				break
			}
		}
	}
	return env.name, true
}

// bearerToken returns the request's bearer token.
func bearerToken(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// challenge sets WWW-Authenticate on a refusal: RFC 6750 with the RFC
// 9728 resource_metadata URL, so that MCP clients can find the
// authorization server.
func (h *handler) challenge(w http.ResponseWriter, r *http.Request, status int, code string) {
	if status != http.StatusUnauthorized && code != "insufficient_scope" {
		return
	}
	md := publicBase(h.opts.PublicURL, r) + WellKnownPrefix + r.URL.Path
	v := `Bearer resource_metadata="` + md + `"`
	switch {
	case code == "insufficient_scope" && h.opts.Authorization != nil:
		v += `, error="insufficient_scope", scope="` + strings.Join(h.opts.Authorization.Scopes, " ") + `"`
	case code == "invalid_token":
		v += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", v)
}

func rpcCodeName(code int) string {
	if code == codeParseError {
		return "parse_error"
	}
	return "invalid_request"
}

// checkJSONRPC checks that body is a JSON-RPC 2.0 message (or a batch of
// them) and splits it strictly (see strict.go).
func checkJSONRPC(body []byte) ([]envelope, bool, int, string) { return checkJSONRPCInto(nil, body) }

// checkJSONRPCInto is checkJSONRPC, a single message kept in dst when it
// has room.
func checkJSONRPCInto(dst []envelope, body []byte) ([]envelope, bool, int, string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, false, codeInvalidRequest, "the request body is empty; send a JSON-RPC 2.0 message"
	}
	if !json.Valid(trimmed) {
		return nil, false, codeParseError, "the request body is not valid JSON"
	}
	msgs, isBatch, err := parseMessagesInto(dst, trimmed)
	if err != nil {
		return nil, isBatch, codeInvalidRequest, err.Error()
	}
	return msgs, isBatch, 0, ""
}

// knownVersion reports whether the SDK serves protocol version v (""
// meaning the default, 2025-03-26); requests of other versions go to the
// SDK, which refuses them.
// surfaces are the metrics' surface of each protocol version the server
// knows; any other version counts as "other" (a caller's header must not
// create label values).
var surfaces = func() map[string]*gateway.Surface {
	m := map[string]*gateway.Surface{"": {Name: "mcp", Protocol: "unspecified"}}
	for v := range legacyVersions {
		m[v] = &gateway.Surface{Name: "mcp", Protocol: v}
	}
	m[versionStateless] = &gateway.Surface{Name: "mcp", Protocol: versionStateless}
	return m
}()

var otherVersion = &gateway.Surface{Name: "mcp", Protocol: "other"}

func surfaceOf(version string) *gateway.Surface {
	if s, ok := surfaces[version]; ok {
		return s
	}
	return otherVersion
}

func knownVersion(v string) bool {
	return v == "" || v == versionStateless || legacyVersions[v]
}

// getServer returns the shared *mcp.Server of the request's connector.
func (h *handler) getServer(r *http.Request) *sdk.Server {
	a, ok := r.Context().Value(authorizedKey{}).(*authorized)
	if !ok {
		return nil
	}
	return h.serverFor(a).srv
}

// serverFor returns the connector's server, built on first use.
func (h *handler) serverFor(a *authorized) *connServer {
	if a.srv != nil {
		return a.srv
	}
	conn := a.target.Connector
	key := serverKey{conn.Manifest.ID, conn.Manifest.Version}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.servers[key]; ok {
		return s
	}
	s := h.newServer(key.id+"@"+key.version, conn)
	h.servers[key] = s
	return s
}

// serverKey names a connector's server: its id and version (a struct,
// not the two joined, so that a lookup builds no string).
type serverKey struct{ id, version string }

// listTTL is the ttlMs of list results: tools change with the connector
// version only, but the answer depends on the caller (the instance and its
// allowlist), so it is private.
const listTTL = 60_000

// newServer builds the MCP server of a connector: one tool per entity,
// in the registry's order (deterministic), and the resources capability
// with no resources yet.
func (h *handler) newServer(key string, conn *registry.Connector) *connServer {
	m := &conn.Manifest
	impl := &sdk.Implementation{Name: "switchboard/" + m.ID, Title: m.Name, Version: h.opts.Version}
	opts := &sdk.ServerOptions{
		Instructions: m.Docs.LLMShortDescription,
		// Resources and prompts: declared, none served yet (empty lists).
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Resources: &sdk.ResourceCapabilities{}, Prompts: &sdk.PromptCapabilities{}},
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) {
			c.CacheScope = "private"
			c.TTLMs = listTTL
		},
	}
	if forwards(conn) {
		// Subscriptions are the proxied server's (forwardSubscription),
		// and so are its lists' changes (forwardListen).
		opts.Capabilities.Resources.Subscribe = true
		opts.Capabilities.Tools.ListChanged = true
		opts.Capabilities.Prompts.ListChanged = true
		opts.Capabilities.Resources.ListChanged = true
		opts.SubscribeHandler = func(ctx context.Context, r *sdk.SubscribeRequest) error {
			if r.Extra == nil {
				// A resource of a subscriptions/listen (forwardListen).
				r.Extra, _ = ctx.Value(listenExtraKey{}).(*sdk.RequestExtra)
			}
			return h.forwardSubscription(ctx, r, "resources/subscribe", r.Params.URI)
		}
		opts.UnsubscribeHandler = func(ctx context.Context, r *sdk.UnsubscribeRequest) error {
			if r.Extra == nil {
				// The end of a subscriptions/listen: forwardListen's
				// listener unsubscribes the proxied server.
				return nil
			}
			return h.forwardSubscription(ctx, r, "resources/unsubscribe", r.Params.URI)
		}
	}
	s := sdk.NewServer(impl, opts)
	src, err := knowledge.Of(conn)
	if err != nil {
		h.logger.Warn("knowledge section left out: it is not valid", "connector", m.ID, "err", err)
	}
	if src != nil {
		// Inside resourceNotFound, which gives its not-found the
		// client's code.
		s.AddReceivingMiddleware(h.knowledgeMiddleware(src))
	}
	s.AddReceivingMiddleware(resourceNotFound)
	cs := &connServer{key: key, impl: impl, srv: s, entities: map[string]*registry.Entity{}}
	cs.statelessMeta, _ = json.Marshal(sdk.Meta{sdk.MetaKeyServerInfo: impl})
	if forwards(conn) {
		// A hosted or local MCP server's tools are its instance's:
		// forwarded.
		s.AddReceivingMiddleware(h.remoteTools)
		s.AddSendingMiddleware(relayNotifications)
		return cs
	}
	var declared []*registry.Entity
	for _, e := range conn.Spec.Entities {
		if e.InputSchema == nil || e.InputSchema.Type != "object" {
			h.logger.Warn("entity left out of the MCP tools: its input schema is not an object", "connector", m.ID, "entity", e.Name)
			continue
		}
		th := h.toolHandler(e)
		tool := e.MCPTool()
		for _, app := range conn.Apps {
			if app.Tool == e.Name {
				tool = appTool(tool, e, app)
				break
			}
		}
		s.AddTool(tool, th)
		cs.entities[e.Name] = e
		declared = append(declared, e)
	}
	cs.listBytes = registry.MCPToolsListSize(declared)
	for _, app := range conn.Apps {
		bt := bridgeTool(app)
		s.AddTool(bt, h.bridgeHandler(app))
		cs.listBytes += toolBytes(bt) + toolBytes(&sdk.Tool{Meta: uiMeta(app.URI, "model")}) - toolBytes(&sdk.Tool{})
		s.AddResource(appResource(app), appRead(app))
	}
	if src != nil {
		s.AddTool(knowledgeTool(src), func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			// Reached only through the agent path: agents do not read.
			return errorResult(switchboard.E(switchboard.ErrForbidden, "reader_not_allowed",
				"the access check is for knowledge sync services, not agents")), nil
		})
	}
	return cs
}

// servesMeta reports whether a's instance endpoint serves the meta-tools
// instead of its connector's tools: its tools mode says meta, or says auto
// (or nothing) and the connector's tools/list is larger than the tenant's
// context budget. Instances proxying an MCP server keep their server's
// tools.
func (h *handler) servesMeta(a *authorized) bool {
	t := a.target
	if h.opts.Meta == nil || t.Spec() == nil {
		return false
	}
	switch t.Instance.ToolsMode {
	case tenants.ToolsMeta:
		return true
	case tenants.ToolsList:
		return false
	}
	a.srv = h.serverFor(a)
	return a.srv.listBytes > h.contextBudget(t.Tenant)
}

// contextBudget is the tenant's context budget: its own, else the
// operator's.
func (h *handler) contextBudget(t *tenants.Tenant) int {
	if t != nil && t.MCPContextBudget != nil {
		return *t.MCPContextBudget
	}
	if h.opts.ContextBudget > 0 {
		return h.opts.ContextBudget
	}
	return DefaultContextBudget
}

// forwards reports whether conn's instances proxy an MCP server (an
// mcp_remote or mcp_local connector): its whole MCP surface is forwarded.
func forwards(conn *registry.Connector) bool {
	return mcpremote.Is(conn) || mcplocal.Is(conn)
}

// resourceNotFound gives a missing resource the code of the client's
// protocol revision: -32002 (switchboard.RPCResourceNotFound) before
// 2026-07-28, including clients that send no version, as the 2025
// revisions say ("Resource not found: -32002"); -32602 Invalid params from
// 2026-07-28 on (SEP-2164), which the SDK now returns in every era. It
// keeps the SDK's message and data ({"uri": ...}).
func resourceNotFound(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "resources/read" || err == nil {
			return res, err
		}
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Message != "Resource not found" ||
			(je.Code != jsonrpc.CodeInvalidParams && je.Code != switchboard.RPCResourceNotFound) {
			return res, err
		}
		code := int64(switchboard.RPCResourceNotFound)
		if extra := req.GetExtra(); extra != nil && extra.Header.Get(headerVersion) >= versionStateless {
			code = jsonrpc.CodeInvalidParams
		}
		return nil, &jsonrpc.Error{Code: code, Message: je.Message, Data: je.Data}
	}
}
