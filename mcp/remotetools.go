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

// remoteTools is the receiving middleware of the server of an mcp_remote
// connector: tools/list and tools/call go, through the gateway (allowlist,
// audit, error classification), to the instance's hosted MCP server; every
// other method is the SDK's.
func (h *handler) remoteTools(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/list" && method != "tools/call" {
			return next(ctx, method, req)
		}
		var (
			p   *auth.Principal
			t   *gateway.Target
			log = h.logger
		)
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			p, _ = extra.TokenInfo.Extra[extraPrincipal].(*auth.Principal)
			t, _ = extra.TokenInfo.Extra[extraTarget].(*gateway.Target)
			if l, ok := extra.TokenInfo.Extra[extraLogger].(*slog.Logger); ok && l != nil {
				log = l
			}
		}
		if p == nil || t == nil {
			// Unreachable behind the middleware: refuse rather than call.
			return nil, &jsonrpc.Error{Code: CodeRefused, Message: "unauthorized: the call is not authenticated"}
		}
		log = log.With("agent", p.AgentID, "mode", "mcp_remote")
		if method == "tools/list" {
			tools, err := h.g.RemoteTools(ctx, t, p)
			if err != nil {
				gateway.LogError(log, "remote tools/list failed", err)
				d := rpcErrorDetail(switchboard.ProblemOf(err))
				data, _ := json.Marshal(d.Data)
				return nil, &jsonrpc.Error{Code: int64(d.Code), Message: d.Message, Data: data}
			}
			return &sdk.ListToolsResult{Tools: tools}, nil
		}
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		log = log.With("tool", call.Params.Name)
		res, err := h.g.CallRemote(ctx, t, p, call.Params.Name, call.Params.Arguments)
		if err != nil {
			gateway.LogError(log, "remote tool call failed", err)
			return errorResult(err), nil
		}
		return res, nil
	}
}
