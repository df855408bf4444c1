package mcp

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
)

// forwardError is the JSON-RPC error of a refused or failed forwarded
// request.
func forwardError(err error) *jsonrpc.Error {
	d := rpcErrorDetail(switchboard.ProblemOf(err))
	data, _ := json.Marshal(d.Data)
	return &jsonrpc.Error{Code: int64(d.Code), Message: d.Message, Data: data}
}

// forwarded returns, for a request of a forwarded method other than
// tools (resources, resource templates, prompts, completions), the
// function that sends it on the proxied server's session; nil for any
// other request. The request is rebuilt from its own fields: the
// caller's _meta belongs to the caller's session with Switchboard (its
// protocol era, its client), not to Switchboard's session with the
// proxied server, which negotiated its own.
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
			q.URI = r.Params.URI
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

// remoteTools is the receiving middleware of the server of an mcp_remote
// or mcp_local connector: tools/list and tools/call, and resources
// (list, templates, read), prompts (list, get) and completions go,
// through the gateway (allowlist, audit, redaction, error
// classification), to the instance's proxied MCP server; every other
// method is the SDK's.
func (h *handler) remoteTools(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/list" && method != "tools/call" && forwarded(req) == nil {
			return next(ctx, method, req)
		}
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
			return nil, &jsonrpc.Error{Code: CodeRefused, Message: "unauthorized: the call is not authenticated"}
		}
		log = log.With(slog.String("agent", p.AgentID), slog.String("mode", t.Connector.Manifest.Type))
		if fn := forwarded(req); fn != nil {
			res, err := h.g.Forward(ctx, t, p, method, fn)
			if err != nil {
				gateway.LogError(log, "forwarded "+method+" failed", err)
				return nil, forwardError(err)
			}
			return res, nil
		}
		if method == "tools/list" {
			tools, err := h.g.RemoteTools(ctx, t, p)
			if err != nil {
				gateway.LogError(log, "remote tools/list failed", err)
				return nil, forwardError(err)
			}
			return &sdk.ListToolsResult{Tools: tools}, nil
		}
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		log = log.With(slog.String("tool", call.Params.Name))
		res, err := h.g.CallRemote(ctx, t, p, call.Params.Name, call.Params.Arguments)
		if err != nil {
			gateway.LogError(log, "remote tool call failed", err)
			return errorResult(err), nil
		}
		return res, nil
	}
}
