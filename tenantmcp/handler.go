// Package tenantmcp serves the tenant catalog endpoint
// POST /workspaces/{tenant}/mcp: one MCP server per tenant whose four
// tools — search, describe, call and guide — reach every app instance the
// calling agent is allowed, instead of one endpoint (and one tools/list)
// per instance.
//
// search ranks the instances' actions with BM25 over an in-memory index
// built once per compiled connector (index.go); an action's address is
// instance.tool.action. describe gives an action's input schema bounded
// in bytes; call runs the action through the instance endpoint's own call
// path (mcp.EntityCaller: allowlist, buildAppAuth, validation, audit,
// typed errors); guide serves a connector's usage guide and a sealed
// token saying it was read, which calls of actions that need it pass
// back (guide.go).
//
// Callers authenticate as on the instance endpoints; the server is the
// official SDK's, stateless, with JSON responses, so any replica answers
// any request and every protocol version the SDK serves is served.
package tenantmcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Options configures the endpoint.
type Options struct {
	Logger *slog.Logger
	// Version is the server version reported by initialize.
	Version string
	// Keyring seals guide tokens; nil seals them with a key of this
	// process only (tokens then do not survive a restart or reach other
	// replicas).
	Keyring *secrets.Keyring
	// AllowedOrigins and PublicURL: as mcp.Options (browser origins that
	// may call; the server's public base URL).
	AllowedOrigins []string
	PublicURL      string
	// DisableLocalhostProtection: as mcp.Options.
	DisableLocalhostProtection bool
	// Authorization, when set, accepts OAuth access tokens (MCP
	// authorization) whose audience is the endpoint's URL beside caller
	// credentials, as on the instance endpoints.
	Authorization *mcp.Authorization
	// Now is the clock of guide tokens; nil is time.Now.
	Now func() time.Time
}

// PathSuffix ends the endpoint's path: /workspaces/{tenant}/mcp.
const PathSuffix = "/mcp"

// Server is the tenant catalog endpoint.
type Server struct {
	g       *gateway.Gateway
	logger  *slog.Logger
	opts    Options
	calls   *mcp.EntityCaller
	indexes *Indexes
	tokens  *guideTokens
	// checkOrigin is the instance endpoint's DNS-rebinding guard.
	checkOrigin func(*http.Request) string
	srv         *sdk.Server
	http        http.Handler
	// instances are the servers of instance endpoints in meta mode, one
	// per connector (ServeInstance), so that each names itself as its
	// instance endpoint does in tools mode.
	instances *lru.Cache[instanceServerKey, *sdk.Server]
}

// instanceServerKey names the meta-tools server of a connector: what
// initialize reports (its id and name) and its instructions.
type instanceServerKey struct{ id, name, about string }

// maxInstanceServers bounds the meta-tools servers kept; one is a few
// kilobytes, rebuilt on demand.
const maxInstanceServers = 1024

// New returns the endpoint on g.
func New(g *gateway.Gateway, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = g.Logger()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{g: g, logger: opts.Logger, opts: opts, calls: mcp.NewEntityCaller(g, opts.Logger),
		indexes: NewIndexes(), tokens: newGuideTokens(opts.Keyring, opts.Now),
		checkOrigin: mcp.OriginCheck(mcp.Options{AllowedOrigins: opts.AllowedOrigins, PublicURL: opts.PublicURL,
			DisableLocalhostProtection: opts.DisableLocalhostProtection})}
	s.srv = s.newSDKServer(&sdk.Implementation{Name: "switchboard/tenant", Title: "Switchboard workspace catalog", Version: opts.Version}, instructions)
	s.instances, _ = lru.New[instanceServerKey, *sdk.Server](maxInstanceServers)
	streamable := sdk.NewStreamableHTTPHandler(s.serverOf, &sdk.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, MaxRequestBodyBytes: gateway.MaxBodyBytes, DisableLocalhostProtection: true,
	})
	s.http = sdkauth.RequireBearerToken(verifyFromContext, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return s
}

// newSDKServer is an MCP server of the four tools named impl, and of
// the MCP Apps views of its catalog's connectors (views).
func (s *Server) newSDKServer(impl *sdk.Implementation, about string) *sdk.Server {
	srv := sdk.NewServer(impl, &sdk.ServerOptions{Instructions: about,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Resources: &sdk.ResourceCapabilities{}}})
	srv.AddReceivingMiddleware(s.views)
	for _, t := range Tools() {
		srv.AddTool(t, s.handlerOf(t.Name))
	}
	return srv
}

// serverOf is the server of a request: the tenant endpoint's, or on an
// instance endpoint in meta mode (ServeInstance) one named as that
// endpoint names itself in tools mode (switchboard/<connector>, titled
// with the connector's name), so that a client shows the app it
// connected to whichever tools the endpoint serves.
func (s *Server) serverOf(r *http.Request) *sdk.Server {
	st, ok := r.Context().Value(stateKey{}).(*requestState)
	if !ok || st.instance == nil {
		return s.srv
	}
	m := &st.instance.Connector.Manifest
	key := instanceServerKey{id: m.ID, name: m.Name, about: m.Docs.LLMShortDescription}
	if srv, ok := s.instances.Get(key); ok {
		return srv
	}
	about := instructions
	if key.about != "" {
		about = key.about + "\n\n" + instructions
	}
	srv := s.newSDKServer(&sdk.Implementation{Name: "switchboard/" + m.ID, Title: m.Name, Version: s.opts.Version}, about)
	s.instances.Add(key, srv)
	return srv
}

// instructions tell an agent how the four tools fit together.
const instructions = "Find an action with search (your task in plain words), read its input schema with describe, then call it " +
	"with call. When a result says guideRequired, read the connector's guide with guide and pass its guideToken to call."

// Tools are the endpoint's tool declarations, kept short: they are all an
// agent's context holds of the whole workspace.
func Tools() []*sdk.Tool {
	obj := func(required []string, props map[string]any) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
		return b
	}
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	token := str("guideToken from guide, if you read one")
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	return []*sdk.Tool{
		{Name: "search", Annotations: readOnly,
			Description: "Search the workspace's actions for a task. Returns addresses (instance.tool.action) with a summary and safety class.",
			InputSchema: obj([]string{"query"}, map[string]any{
				"query":      str("the task, in plain words"),
				"connector":  str("only this connector (connector:<id>)"),
				"instance":   str("only this instance"),
				"safety":     map[string]any{"type": "string", "enum": []string{SafetyReadOnly, "all"}},
				"limit":      map[string]any{"type": "integer", "minimum": 1, "maximum": maxLimit},
				"cursor":     str("nextCursor of the previous page"),
				"grouped":    map[string]any{"type": "boolean", "description": "group results by instance"},
				"guideToken": token,
			})},
		{Name: "describe", Annotations: readOnly,
			Description: "The input schema (bounded; truncated lists required keys), output keys and guide of an address.",
			InputSchema: obj([]string{"address"}, map[string]any{"address": str("instance.tool.action")})},
		{Name: "call",
			Description: "Call an address with its arguments.",
			InputSchema: obj([]string{"address"}, map[string]any{
				"address":    str("instance.tool.action"),
				"arguments":  map[string]any{"type": "object", "description": "the action's arguments, as describe says"},
				"guideToken": token,
			})},
		{Name: "guide", Annotations: readOnly,
			Description: "A connector's usage guide (summary, sections, required) and a guideToken saying it was read.",
			InputSchema: obj([]string{"connector"}, map[string]any{"connector": str("connector:<id>"), "guideToken": token})},
	}
}

type stateKey struct{}

// verifyFromContext hands the request's state, set by ServeHTTP after
// authentication, to the SDK as TokenInfo.
func verifyFromContext(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	st, ok := ctx.Value(stateKey{}).(*requestState)
	if !ok {
		return nil, sdkauth.ErrInvalidToken
	}
	return &sdkauth.TokenInfo{UserID: string(st.principal.Caller.ID), Extra: map[string]any{"switchboard.tenant": st}}, nil
}

// views answers resources/list and resources/read with the MCP Apps
// views of the connectors of the agent's instances (mcp.Views): one
// entry per view, however many instances share its connector.
func (s *Server) views(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "resources/list" && method != "resources/read" {
			return next(ctx, method, req)
		}
		extra := req.GetExtra()
		if extra == nil || extra.TokenInfo == nil {
			return next(ctx, method, req)
		}
		st, ok := extra.TokenInfo.Extra["switchboard.tenant"].(*requestState)
		if !ok || st == nil || st.principal == nil {
			return next(ctx, method, req)
		}
		st.mu.Lock()
		cat, err := s.catalogOf(ctx, st)
		st.mu.Unlock()
		if err != nil {
			return nil, err
		}
		byURI := map[string]mcp.View{}
		list := &sdk.ListResourcesResult{Resources: []*sdk.Resource{}}
		for _, t := range cat.targets {
			for _, v := range mcp.Views(t.Connector) {
				if _, seen := byURI[v.Resource.URI]; !seen {
					byURI[v.Resource.URI] = v
					list.Resources = append(list.Resources, v.Resource)
				}
			}
		}
		switch p := req.GetParams().(type) {
		case *sdk.ListResourcesParams:
			return list, nil
		case *sdk.ReadResourceParams:
			if v, ok := byURI[p.URI]; ok {
				return v.Read(), nil
			}
		}
		return next(ctx, method, req) // the SDK's "Resource not found"
	}
}

// stateOf is the request state of a tool call.
func stateOf(req *sdk.CallToolRequest) (*requestState, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, false
	}
	st, ok := req.Extra.TokenInfo.Extra["switchboard.tenant"].(*requestState)
	return st, ok && st != nil && st.principal != nil
}

// tenantOf returns the tenant slug of /workspaces/{tenant}/mcp.
func tenantOf(r *http.Request) (string, bool) {
	if t := r.PathValue("tenant"); t != "" {
		return t, !strings.Contains(t, "/")
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/workspaces/")
	if !ok {
		return "", false
	}
	t, ok := strings.CutSuffix(rest, PathSuffix)
	return t, ok && t != "" && !strings.Contains(t, "/")
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(r)
	if !ok {
		writeRPCError(w, switchboard.E(switchboard.ErrNotFound, "route_not_found", "no such endpoint: use /workspaces/{tenant}/mcp"))
		return
	}
	log := gateway.NewCallLog(s.logger, w, slog.String("tenant", tenant), slog.String("mode", "tenant-mcp"))
	if msg := s.checkOrigin(r); msg != "" {
		log.Info("tenant mcp request refused", "code", "forbidden_origin")
		writeRPCError(w, switchboard.E(switchboard.ErrForbidden, "forbidden_origin", "%s", msg))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeRPCError(w, switchboard.E(switchboard.ErrInvalid, "method_not_allowed", "the MCP endpoint accepts POST only"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, gateway.MaxBodyBytes)
	p, err := s.authenticate(r, tenant)
	if err == nil && p.AgentID == "" {
		err = switchboard.E(switchboard.ErrForbidden, "missing_agent_id", "the call names no agent: the credential carries none and no agent id header was sent")
	}
	if err != nil {
		gateway.LogError(log, "tenant mcp request refused", err)
		pr := switchboard.ProblemOf(err)
		if s.opts.Authorization != nil {
			mcp.Challenge(s.mcpOptions(), w, r, pr.Status, pr.Detail.Code)
		} else if pr.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
		writeRPCError(w, err)
		return
	}
	log = log.With(slog.String("agent", p.AgentID))
	st := &requestState{principal: p, log: log, surface: surfaceOf(r.Header.Get("Mcp-Protocol-Version"))}
	s.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// authenticate is the request's principal: an OAuth access token for
// this endpoint when Authorization is set and the bearer token is one,
// else a caller credential.
func (s *Server) authenticate(r *http.Request, tenant string) (*auth.Principal, error) {
	p, ok, err := mcp.TenantAccessToken(r.Context(), s.mcpOptions(), r, func() (*tenants.Tenant, error) { return s.g.Tenant(r.Context(), tenant) })
	if ok {
		return p, err
	}
	return s.g.Authenticate(r.Context(), r, tenant)
}

// mcpOptions are the instance endpoint's options this endpoint shares.
func (s *Server) mcpOptions() mcp.Options {
	return mcp.Options{Authorization: s.opts.Authorization, PublicURL: s.opts.PublicURL, AllowedOrigins: s.opts.AllowedOrigins,
		DisableLocalhostProtection: s.opts.DisableLocalhostProtection}
}

// ServeInstance serves the meta-tools scoped to one instance, on its
// instance endpoint (mcp.MetaTools): the same four tools, whose catalog
// is t alone. The instance endpoint authenticated the request and
// allowed its agent on t; a call still goes through the instance
// endpoint's call path, which checks the allowlist again and audits it.
func (s *Server) ServeInstance(w http.ResponseWriter, r *http.Request, p *auth.Principal, t *gateway.Target, log gateway.CallLog) {
	st := &requestState{principal: p, log: log.With(slog.String("tools", "meta")), surface: surfaceOf(r.Header.Get("Mcp-Protocol-Version")),
		cat: &catalog{targets: []*gateway.Target{t}, connected: s.connectedAs(p)}, instance: t}
	s.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// surfaces label the calls' metrics by protocol version; other versions
// count as "other" (a header must not create label values).
var surfaces = map[string]*gateway.Surface{
	"":           {Name: "tenant-mcp", Protocol: "unspecified"},
	"2025-03-26": {Name: "tenant-mcp", Protocol: "2025-03-26"},
	"2025-06-18": {Name: "tenant-mcp", Protocol: "2025-06-18"},
	"2025-11-25": {Name: "tenant-mcp", Protocol: "2025-11-25"},
	"2026-07-28": {Name: "tenant-mcp", Protocol: "2026-07-28"},
}

var otherSurface = &gateway.Surface{Name: "tenant-mcp", Protocol: "other"}

func surfaceOf(v string) *gateway.Surface {
	if s, ok := surfaces[v]; ok {
		return s
	}
	return otherSurface
}

// writeRPCError refuses a request before the SDK sees it: the table's
// HTTP status and a JSON-RPC error whose data holds the code.
func writeRPCError(w http.ResponseWriter, err error) {
	p := switchboard.ProblemOf(err)
	p.SetHeaders(w.Header())
	w.WriteHeader(p.Status)
	data := map[string]any{"code": p.Detail.Code, "retryable": p.Retryable}
	if p.Detail.RetryAfterMs > 0 {
		data["retryAfterMs"] = p.Detail.RetryAfterMs
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": p.RPC, "message": p.Detail.Code + ": " + p.Detail.Message, "data": data}})
	w.Write(append(b, '\n'))
}

// handlerOf is the tool handler of one of the four tools.
func (s *Server) handlerOf(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		st, ok := stateOf(req)
		if !ok {
			return errorResult(switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the call is not authenticated")), nil
		}
		ctx = gateway.WithSurface(ctx, st.surface)
		st.mu.Lock()
		defer st.mu.Unlock()
		res, err := s.run(ctx, st, name, req)
		if err != nil {
			gateway.LogError(st.log.With(slog.String("tool", name)), "tenant mcp tool refused", err)
			return errorResult(err), nil
		}
		return res, nil
	}
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, invalid("the arguments do not match the tool's input schema: %s", clip(err.Error(), 200))
	}
	return v, nil
}

// run dispatches a tool call.
func (s *Server) run(ctx context.Context, st *requestState, name string, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	cat, err := s.catalogOf(ctx, st)
	if err != nil {
		return nil, err
	}
	raw := req.Params.Arguments
	switch name {
	case "search":
		args, err := decode[SearchArgs](raw)
		if err != nil {
			return nil, err
		}
		read, err := s.tokens.read(st.principal, args.GuideToken)
		if err != nil {
			return nil, err
		}
		return jsonResult(s.search(ctx, cat, args, read))
	case "describe":
		args, err := decode[DescribeArgs](raw)
		if err != nil {
			return nil, err
		}
		return jsonResult(s.describe(cat, args))
	case "guide":
		args, err := decode[GuideArgs](raw)
		if err != nil {
			return nil, err
		}
		return jsonResult(s.guide(cat, st.principal, args))
	case "call":
		args, err := decode[CallArgs](raw)
		if err != nil {
			return nil, err
		}
		return s.call(ctx, st, cat, args, req)
	}
	return nil, switchboard.E(switchboard.ErrNotFound, "unknown_tool", "no such tool")
}

// call runs an address through the instance endpoint's call path.
func (s *Server) call(ctx context.Context, st *requestState, cat *catalog, args CallArgs, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	addr, err := parseAddress(args.Address)
	if err != nil {
		return nil, err
	}
	t, e, a, err := resolve(cat, addr)
	if err != nil {
		if t != nil {
			s.g.Refused(ctx, st.principal.TenantSlug, t.Instance.Slug, st.principal, t, addr.tool, err)
		}
		return nil, err
	}
	if err := a.Op.Load(); err != nil {
		return nil, err
	}
	read, err := s.tokens.read(st.principal, args.GuideToken)
	if err != nil {
		return nil, err
	}
	if reason := guideReason(t.Connector, a.Op, read); reason != "" {
		gerr := guideRequired(t.Connector, reason)
		s.g.Refused(ctx, st.principal.TenantSlug, t.Instance.Slug, st.principal, t, e.Name, gerr)
		return nil, gerr
	}
	body, err := callArgs(a.Name, args.Arguments)
	if err != nil {
		return nil, err
	}
	metaTarget, _ := req.Params.Meta[gateway.TargetUserArg].(string)
	log := st.log.With(slog.String("instance", t.Instance.Slug))
	var res *sdk.CallToolResult
	if _, fromView := req.Params.Meta[registry.AppMetaKey]; fromView {
		// A call a host forwards from an MCP Apps view: only the reads
		// the connector's views bridge.
		res = s.calls.CallFromView(ctx, e, st.principal, t, log, body, metaTarget)
	} else {
		res = s.calls.Call(ctx, e, st.principal, t, log, body, metaTarget)
	}
	if res.IsError {
		addRetryable(res)
	}
	return res, nil
}

// CatalogError is a failure of a tool of the endpoint: the table's code,
// a bounded message, whether the same call may succeed later, and for
// guide_required the reason and the guide to read.
type CatalogError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	ConnectURL   string `json:"connectUrl,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Guide        string `json:"guide,omitempty"`
}

func catalogError(err error) CatalogError {
	p := switchboard.ProblemOf(err)
	ce := CatalogError{Code: p.Detail.Code, Message: p.Detail.Message, Retryable: p.Retryable,
		RetryAfterMs: p.Detail.RetryAfterMs, ConnectURL: p.Detail.ConnectURL}
	var ge *guideError
	if errors.As(err, &ge) {
		ce.Reason, ce.Guide = ge.reason, ge.connector
	}
	return ce
}

// errorResult is a tool error: {"error": CatalogError}.
func errorResult(err error) *sdk.CallToolResult {
	body := map[string]any{"error": catalogError(err)}
	text, _ := json.Marshal(body)
	var structured map[string]any
	_ = json.Unmarshal(text, &structured)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: structured}
}

// addRetryable adds "retryable" (from the error table) to an instance
// endpoint's error result, so that every failure of the endpoint says it.
func addRetryable(res *sdk.CallToolResult) {
	sc, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return
	}
	detail, ok := sc["error"].(map[string]any)
	if !ok {
		return
	}
	code, _ := detail["code"].(string)
	detail["retryable"] = switchboard.ProblemOf(&switchboard.Error{Kind: switchboard.KindOf(code), Code: code}).Retryable
	if text, err := json.Marshal(sc); err == nil {
		res.Content = []sdk.Content{&sdk.TextContent{Text: string(text)}}
	}
}

// jsonResult renders v as the tool's text and structured content.
func jsonResult[T any](v T, err error) (*sdk.CallToolResult, error) {
	if err != nil {
		return nil, err
	}
	text, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: json.RawMessage(text)}, nil
}

func sortStrings(s []string) { sort.Strings(s) }
