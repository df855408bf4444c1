//lint:file-ignore SA1019 relays the logging feature SEP-2577 deprecates, which proxied servers still use

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
)

// forwardError is the JSON-RPC error of a refused or failed forwarded
// request. A JSON-RPC error of the proxied server itself keeps its code
// and data (redacted): the caller's client reads them as it would reading
// the server directly (a missing resource's -32002 or -32602 by the
// caller's era, SEP-2164, and its data.uri); the message is Switchboard's
// bounded, redacted rendering, and data.code says upstream_rejected.
func forwardError(method string, err error, stateless bool) *jsonrpc.Error {
	d := rpcErrorDetail(switchboard.ProblemOf(err))
	re, ok := errors.AsType[*mcprelay.RPCError](err)
	if !ok {
		data, _ := json.Marshal(d.Data)
		return &jsonrpc.Error{Code: int64(d.Code), Message: d.Message, Data: data}
	}
	code := re.RPCCode
	if method == "resources/read" && (code == jsonrpc.CodeInvalidParams || code == switchboard.RPCResourceNotFound) {
		code = switchboard.RPCResourceNotFound
		if stateless {
			code = jsonrpc.CodeInvalidParams
		}
	}
	data := map[string]any{}
	if len(re.Data) > 0 && json.Unmarshal(re.Data, &data) != nil {
		data = map[string]any{"upstream": re.Data}
	}
	maps.Copy(data, d.Data)
	b, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: code, Message: d.Message, Data: b}
}

// callerStateless reports whether the caller of req speaks the stateless
// 2026-07-28 era (or later).
func callerStateless(req sdk.Request) bool {
	ss, ok := req.GetSession().(*sdk.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= versionStateless
}

// noCapabilities are the client capabilities sent to the proxied server
// for a caller of an era before 2026-07-28: on this stateless endpoint
// Switchboard cannot send such a caller a request of its own
// (elicitation, sampling, roots), so the proxied server must not ask.
var noCapabilities = map[string]any{}

// relayCall is the caller's side of a forwarded request: its progress
// and log notifications go back on the caller's response stream (the
// caller's session applies its log level), and a 2026-07-28 caller's
// client capabilities go to the proxied server, so that it asks for input
// (an input-required result) only what the caller can give.
func relayCall(ctx context.Context, req sdk.Request, stateless bool) *mcprelay.Call {
	ss, ok := req.GetSession().(*sdk.ServerSession)
	if !ok || ss == nil {
		return nil
	}
	c := &mcprelay.Call{
		Log:          func(p *sdk.LoggingMessageParams) { ss.Log(ctx, p) },
		Capabilities: noCapabilities,
	}
	if params := req.GetParams(); params != nil {
		meta := params.GetMeta()
		c.ProgressToken = meta["progressToken"]
		if caps, ok := meta[sdk.MetaKeyClientCapabilities]; ok && stateless {
			c.Capabilities = caps
		}
	}
	if c.ProgressToken != nil {
		c.Progress = func(p *sdk.ProgressNotificationParams) { ss.NotifyProgress(ctx, p) }
	}
	return c
}

// eraResult gives a forwarded result of tools/call, prompts/get or
// resources/read the resultType of the caller's era, whatever the proxied
// server's era: "input_required" with its inputRequests and requestState,
// or "complete", for a 2026-07-28 caller; none for an earlier caller, who
// cannot be asked for input on this stateless endpoint (the proxied
// server was told it has no capabilities, so such a result is refused).
func eraResult(res sdk.Result, stateless bool) (sdk.Result, error) {
	var needsInput bool
	switch r := res.(type) {
	case *sdk.CallToolResult:
		needsInput = r.NeedsInput() || r.InputRequests != nil
	case *sdk.GetPromptResult:
		needsInput = r.NeedsInput() || r.InputRequests != nil
	case *sdk.ReadResourceResult:
		needsInput = r.NeedsInput() || r.InputRequests != nil
	default:
		return res, nil
	}
	want := ""
	switch {
	case stateless && needsInput:
		want = `"input_required"`
	case stateless:
		want = `"complete"`
	case needsInput:
		return nil, forwardError("", &registry.UpstreamError{Code: "upstream_rejected",
			Message: "the proxied MCP server asked for input (elicitation, sampling or roots) that a caller of this protocol version cannot give through Switchboard"}, false)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return res, nil
	}
	if want == "" {
		delete(m, "resultType")
	} else {
		m["resultType"] = json.RawMessage(want)
	}
	if b, err = json.Marshal(m); err != nil {
		return res, nil
	}
	out := reflect.New(reflect.TypeOf(res).Elem()).Interface().(sdk.Result)
	if json.Unmarshal(b, out) != nil {
		return res, nil
	}
	return out, nil
}

// forwarded returns, for a request of a forwarded method other than
// tools (resources, resource templates, prompts, completions), the
// function that sends it on the proxied server's session; nil for any
// other request. The request is rebuilt from its own fields (with the
// caller's inputResponses and requestState answering an input-required
// result): the caller's _meta belongs to the caller's session with
// Switchboard (its protocol era, its client), not to Switchboard's
// session with the proxied server, which negotiated its own; what of it
// concerns the proxied server (a progress token, a log level, client
// capabilities) goes through a *mcprelay.Call (relayCall).
func forwarded(req sdk.Request) func(context.Context, *sdk.ClientSession) (sdk.Result, error) {
	type send = func(context.Context, *sdk.ClientSession) (sdk.Result, error)
	switch r := req.(type) {
	case *sdk.ListResourcesRequest:
		q := &sdk.ListResourcesParams{}
		if r.Params != nil {
			q.Cursor = r.Params.Cursor
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) { return s.ListResources(ctx, q) })
	case *sdk.ListResourceTemplatesRequest:
		q := &sdk.ListResourceTemplatesParams{}
		if r.Params != nil {
			q.Cursor = r.Params.Cursor
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) {
			return s.ListResourceTemplates(ctx, q)
		})
	case *sdk.ReadResourceRequest:
		q := &sdk.ReadResourceParams{}
		if r.Params != nil {
			q.URI, q.InputResponses, q.RequestState = r.Params.URI, r.Params.InputResponses, r.Params.RequestState
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) { return s.ReadResource(ctx, q) })
	case *sdk.ListPromptsRequest:
		q := &sdk.ListPromptsParams{}
		if r.Params != nil {
			q.Cursor = r.Params.Cursor
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) { return s.ListPrompts(ctx, q) })
	case *sdk.GetPromptRequest:
		q := &sdk.GetPromptParams{}
		if r.Params != nil {
			q.Name, q.Arguments = r.Params.Name, r.Params.Arguments
			q.InputResponses, q.RequestState = r.Params.InputResponses, r.Params.RequestState
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) { return s.GetPrompt(ctx, q) })
	case *sdk.CompleteRequest:
		q := &sdk.CompleteParams{}
		if r.Params != nil {
			q.Argument, q.Context, q.Ref = r.Params.Argument, r.Params.Context, r.Params.Ref
		}
		return send(func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) { return s.Complete(ctx, q) })
	}
	return nil
}

// forwardedBy returns who sends a forwarded request, to which instance,
// and the call's log, as the middleware authenticated them.
func (h *handler) forwardedBy(req sdk.Request) (*auth.Principal, *gateway.Target, gateway.CallLog, error) {
	var (
		p   *auth.Principal
		t   *gateway.Target
		log = gateway.NewCallLog(h.logger, nil)
	)
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		p, _ = extra.TokenInfo.Extra[extraPrincipal].(*auth.Principal)
		t, _ = extra.TokenInfo.Extra[extraTarget].(*gateway.Target)
		if l, ok := extra.TokenInfo.Extra[extraLogger].(*gateway.CallLog); ok && l != nil {
			log = *l
		}
	}
	if p == nil || t == nil {
		// Unreachable behind the middleware: refuse rather than call.
		return nil, nil, log, &jsonrpc.Error{Code: CodeRefused, Message: "unauthorized: the call is not authenticated"}
	}
	return p, t, log.With(slog.String("agent", p.AgentID), slog.String("mode", t.Connector.Manifest.Type)), nil
}

// forwardSubscription answers resources/subscribe and unsubscribe (the
// eras before 2026-07-28) of an instance proxying a server, through the
// gateway like any forwarded request (validateAgent, audit): accepted
// when the proxied server declares resource subscriptions, refused as it
// would refuse otherwise. The proxied server is not subscribed itself:
// on this stateless endpoint no stream outlives the request, so no update
// could reach the caller (the same answer a stateless server gives).
func (h *handler) forwardSubscription(ctx context.Context, req sdk.Request, method, uri string) error {
	p, t, log, err := h.forwardedBy(req)
	if err != nil {
		return err
	}
	_, err = h.g.Forward(ctx, t, p, method, func(_ context.Context, s *sdk.ClientSession) (sdk.Result, error) {
		if r := s.InitializeResult(); r == nil || r.Capabilities == nil || r.Capabilities.Resources == nil || !r.Capabilities.Resources.Subscribe {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the server does not support resource subscriptions"}
		}
		if uri == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing uri"}
		}
		return nil, nil
	})
	if err != nil {
		gateway.LogError(log, "forwarded "+method+" failed", err)
		return forwardError(method, err, callerStateless(req))
	}
	return nil
}

// remoteTools is the receiving middleware of the server of an mcp_remote
// or mcp_local connector: tools/list and tools/call, and resources
// (list, templates, read), prompts (list, get) and completions go,
// through the gateway (allowlist, audit, redaction, error
// classification), to the instance's proxied MCP server; every other
// method is the SDK's.
func (h *handler) remoteTools(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "subscriptions/listen" {
			return h.forwardListen(ctx, next, method, req)
		}
		if method != "tools/list" && method != "tools/call" && forwarded(req) == nil {
			return next(ctx, method, req)
		}
		p, t, log, err := h.forwardedBy(req)
		if err != nil {
			return nil, err
		}
		ctx, release := cancellable(ctx)
		defer release()
		stateless := callerStateless(req)
		ctx = mcprelay.WithCall(ctx, relayCall(ctx, req, stateless))
		if fn := forwarded(req); fn != nil {
			res, err := h.g.Forward(ctx, t, p, method, fn)
			if err != nil {
				gateway.LogError(log, "forwarded "+method+" failed", err)
				return nil, forwardError(method, err, stateless)
			}
			return eraResult(res, stateless)
		}
		if method == "tools/list" {
			tools, err := h.g.RemoteTools(ctx, t, p)
			if err != nil {
				gateway.LogError(log, "remote tools/list failed", err)
				return nil, forwardError(method, err, stateless)
			}
			res := &sdk.ListToolsResult{Tools: tools}
			res.CacheScope, res.TTLMs = "private", listTTL
			return res, nil
		}
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		log = log.With(slog.String("tool", call.Params.Name))
		params := &sdk.CallToolParams{Name: call.Params.Name,
			InputResponses: call.Params.InputResponses, RequestState: call.Params.RequestState}
		if args := call.Params.Arguments; len(args) > 0 && string(args) != "null" {
			params.Arguments = args
		}
		res, err := h.g.CallRemote(ctx, t, p, params)
		if err != nil {
			gateway.LogError(log, "remote tool call failed", err)
			if _, ok := errors.AsType[*mcprelay.RPCError](err); ok {
				// The proxied server refused the request itself (an
				// unknown tool, invalid params): its own error.
				return nil, forwardError(method, err, stateless)
			}
			return errorResult(err), nil
		}
		return eraResult(res, stateless)
	}
}
