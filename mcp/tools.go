package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// actionArg is the argument that selects an entity's action.
const actionArg = "action"

// toolHandler handles tools/call of entity e: it picks the operation by
// the "action" argument and calls it through the gateway with the other
// arguments.
func (h *handler) toolHandler(e *registry.Entity) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p, t, ok := fromRequest(req)
		if !ok {
			// Unreachable behind the middleware: refuse rather than call.
			return errorResult(switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the call is not authenticated")), nil
		}
		log := h.logger.With("tenant", p.TenantSlug, "instance", t.Instance.Slug, "mode", "mcp")
		if l, ok := req.Extra.TokenInfo.Extra[extraLogger].(*slog.Logger); ok && l != nil {
			log = l
		}
		log = log.With("agent", p.AgentID, "caller", string(p.Caller.ID), "tool", e.Name)

		args, err := decodeArgs(req.Params.Arguments)
		if err != nil {
			log.Info("tool call refused", "code", "invalid_arguments")
			return errorResult(err), nil
		}
		// targetUserId (params._meta or an argument) is never sent
		// upstream; it counts only for trusted callers (Principal.Subject).
		target, _ := req.Params.Meta[gateway.TargetUserArg].(string)
		if v, ok := args[gateway.TargetUserArg]; ok {
			delete(args, gateway.TargetUserArg)
			if s, ok := v.(string); ok && target == "" {
				target = s
			}
		}
		p = p.WithTarget(target)
		action, _ := args[actionArg].(string)
		if action == registry.DescribeAction {
			// Answered locally: the upstream is not called.
			target, _ := args[registry.DescribeTarget].(string)
			doc, err := e.Describe(target)
			if err != nil {
				log.Info("tool call refused", "code", "invalid_arguments")
				return errorResult(err), nil
			}
			return successResult(&registry.Response{Status: 200, Body: doc}, e.OutputSchema != nil), nil
		}
		ac, found := e.Action(action)
		if !found || ac.Op == nil {
			log.Info("tool call refused", "code", "invalid_arguments")
			return errorResult(badAction(e, action, args)), nil
		}
		delete(args, actionArg)
		log = log.With("action", ac.Name, "operation", ac.Op.Name)

		resp, err := h.g.Call(ctx, t, p, ac.Op, args)
		if err != nil {
			gateway.LogError(log, "tool call failed", err)
			return errorResult(err), nil
		}
		log.Debug("tool call", "status", resp.Status)
		return successResult(resp, e.OutputSchema != nil), nil
	}
}

// fromRequest returns what the middleware authorized, from TokenInfo.
func fromRequest(req *sdk.CallToolRequest) (*auth.Principal, *gateway.Target, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, nil, false
	}
	p, ok1 := req.Extra.TokenInfo.Extra[extraPrincipal].(*auth.Principal)
	t, ok2 := req.Extra.TokenInfo.Extra[extraTarget].(*gateway.Target)
	return p, t, ok1 && ok2 && p != nil && t != nil
}

func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return args, nil
	}
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "the arguments must be a JSON object")
	}
	return args, nil
}

// badAction names the valid actions of e.
func badAction(e *registry.Entity, action string, args map[string]any) error {
	names := make([]string, 0, len(e.Actions)+1)
	for _, a := range e.Actions {
		names = append(names, a.Name)
	}
	names = append(names, registry.DescribeAction)
	valid := strings.Join(names, ", ")
	if _, present := args[actionArg]; !present {
		return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
			"%s needs an %q argument, one of: %s", e.Name, actionArg, valid)
	}
	if action == "" {
		return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
			"%s: %q must be a non-empty string, one of: %s", e.Name, actionArg, valid)
	}
	if len(action) > 40 {
		action = action[:40] + "…"
	}
	return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
		"%s has no action %q; valid actions: %s", e.Name, action, valid)
}

// successResult renders an upstream answer: the body as text, and as
// structured content when it is JSON (an object as is, anything else as
// {"result": ...}). A tool with an output schema always returns structured
// content (clients require it): a body that is not JSON is
// {"result": text}, as the schema's fallback branch says.
func successResult(resp *registry.Response, hasSchema bool) *sdk.CallToolResult {
	body := bytes.TrimSpace(resp.Body)
	if len(body) == 0 {
		return &sdk.CallToolResult{
			Content:           []sdk.Content{&sdk.TextContent{Text: `{"result":null}`}},
			StructuredContent: map[string]any{"result": nil},
		}
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}}
	var v any
	if json.Unmarshal(body, &v) == nil {
		if obj, ok := v.(map[string]any); ok {
			res.StructuredContent = obj
		} else {
			res.StructuredContent = map[string]any{"result": v}
		}
	} else if hasSchema {
		res.StructuredContent = map[string]any{"result": string(body)}
	}
	return res
}

// errorResult renders a failure as a tool result with isError, its text
// and structured content both {"error": {"code", "message",
// "retryAfterMs"?}}.
func errorResult(err error) *sdk.CallToolResult {
	b := switchboard.ErrorBody{Error: switchboard.DetailOf(err)}
	text, _ := json.Marshal(b)
	var structured map[string]any
	_ = json.Unmarshal(text, &structured)
	return &sdk.CallToolResult{
		IsError:           true,
		Content:           []sdk.Content{&sdk.TextContent{Text: string(text)}},
		StructuredContent: structured,
	}
}
