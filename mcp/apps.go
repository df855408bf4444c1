package mcp

import (
	"context"
	"encoding/json"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// MCP Apps views (registry.App) on the instance endpoint, after the
// extension io.modelcontextprotocol/ui (SEP-1865, 2026-01-26):
//
//   - the entity tool a view is declared on carries
//     _meta.ui.resourceUri; when the entity also writes, its visibility
//     is ["model"], so that a conforming host refuses a view's call to it;
//   - the view is a ui:// resource in resources/list, and resources/read
//     answers its HTML (with the policy in a <meta http-equiv> element)
//     and _meta.ui.csp, _meta.ui.prefersBorder;
//   - the view's bridge is an app-only tool (visibility ["app"],
//     readOnlyHint) that calls the declared read-only actions of one
//     entity and nothing else.
//
// A call is from a view when it names a bridge tool, or when the host
// that forwards it marks it with params._meta["io.modelcontextprotocol/ui"]
// (registry.AppMetaKey; the server cannot see the iframe, so this is the
// host's word). A marked call to any other tool is refused:
// app_write_refused when its action writes, app_tool_not_allowed when it
// only reads (a view reads through its bridge).

// uiMeta is a tool's _meta.ui.
func uiMeta(uri string, visibility ...string) sdk.Meta {
	ui := map[string]any{"resourceUri": uri}
	if len(visibility) > 0 {
		ui["visibility"] = visibility
	}
	return sdk.Meta{"ui": ui}
}

// appTool is entity e's tool declaring view app: _meta.ui.resourceUri,
// and visibility ["model"] when some action of e writes.
func appTool(tool *sdk.Tool, e *registry.Entity, app *registry.App) *sdk.Tool {
	if e.Annotations.ReadOnly {
		tool.Meta = uiMeta(app.URI)
	} else {
		tool.Meta = uiMeta(app.URI, "model")
	}
	return tool
}

// bridgeTool is app's bridge: app-only, read-only, its action one of
// the bridge's.
func bridgeTool(app *registry.App) *sdk.Tool {
	actions, _ := json.Marshal(app.Bridge.Actions)
	schema := json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":` + string(actions) + `}},"required":["action"]}`)
	return &sdk.Tool{
		Name:        app.Bridge.Name,
		Title:       app.Name + " (view bridge)",
		Description: "For the " + app.Name + " view only, not for the model: the read-only actions of " + app.Bridge.Tool + " the view may call, with that tool's arguments.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
		Meta:        uiMeta(app.URI, "app"),
	}
}

// appResource is app's entry in resources/list.
func appResource(app *registry.App) *sdk.Resource {
	return &sdk.Resource{URI: app.URI, Name: app.Name, Description: app.Description, MIMEType: registry.AppMIMEType, Meta: appUIMeta(app)}
}

// appUIMeta is a view's _meta: ui.csp as the manifest declares it (the
// host builds its policy from it) and ui.prefersBorder.
func appUIMeta(app *registry.App) sdk.Meta {
	ui := map[string]any{"csp": app.CSP}
	if app.PrefersBorder != nil {
		ui["prefersBorder"] = *app.PrefersBorder
	}
	return sdk.Meta{"ui": ui}
}

// appRead answers resources/read of app: its HTML, policy included.
func appRead(app *registry.App) sdk.ResourceHandler {
	return func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{
			URI: app.URI, MIMEType: registry.AppMIMEType, Text: app.HTML, Meta: appUIMeta(app),
		}}}, nil
	}
}

// callLog is the request's call log, or a new one.
func (h *handler) callLog(req *sdk.CallToolRequest, p *auth.Principal, t *gateway.Target) gateway.CallLog {
	if l, ok := req.Extra.TokenInfo.Extra[extraLogger].(*gateway.CallLog); ok && l != nil {
		return *l
	}
	return gateway.NewCallLog(h.logger, nil, slog.String("tenant", p.TenantSlug), slog.String("instance", t.Instance.Slug), slog.String("mode", "mcp"))
}

// bridgeHandler calls app's bridge: one of its read-only actions, through
// the entity's own call path (allowlist, credentials, audit).
func (h *handler) bridgeHandler(app *registry.App) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p, t, ok := fromRequest(req)
		if !ok {
			return errorResult(switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the call is not authenticated")), nil
		}
		log := h.callLog(req, p, t)
		action := actionOf(req.Params.Arguments)
		if a, ok := app.BridgeActions[action]; !ok || !registry.ReadOnlyOp(a.Op) {
			err := appRefusal(app.BridgeEntity, action, app.Bridge.Name)
			log.Info("tool call refused", "code", switchboard.CodeOf(err), "tool", app.Bridge.Name, "agent", p.AgentID)
			h.g.Refused(ctx, p.TenantSlug, t.Instance.Slug, p, t, app.Bridge.Name, err)
			return errorResult(err), nil
		}
		target, _ := req.Params.Meta[gateway.TargetUserArg].(string)
		if s, ok := req.Extra.TokenInfo.Extra[extraSurface].(*gateway.Surface); ok {
			ctx = gateway.WithSurface(ctx, s)
		}
		return h.callTool(ctx, app.BridgeEntity, p, t, log, req.Params.Arguments, target), nil
	}
}

// bridgeOf reports whether name is the bridge tool of one of conn's views.
func bridgeOf(conn *registry.Connector, name string) bool {
	for _, app := range conn.Apps {
		if app.Bridge.Name == name {
			return true
		}
	}
	return false
}

// fromApp reports whether a host marked the call as a view's.
func fromApp(meta sdk.Meta) bool {
	_, ok := meta[registry.AppMetaKey]
	return ok
}

// refuseAppCall refuses a view's call to entity tool e (a marked call):
// views read through their bridge.
func (h *handler) refuseAppCall(ctx context.Context, req *sdk.CallToolRequest, e *registry.Entity) *sdk.CallToolResult {
	p, t, _ := fromRequest(req)
	err := appRefusal(e, actionOf(req.Params.Arguments), "")
	h.callLog(req, p, t).Info("tool call refused", "code", switchboard.CodeOf(err), "tool", e.Name, "agent", p.AgentID)
	h.g.Refused(ctx, p.TenantSlug, t.Instance.Slug, p, t, e.Name, err)
	return errorResult(err)
}

// appRefusal is why a view may not call action of e: app_write_refused
// when the action writes, else app_tool_not_allowed. bridge names the
// bridge tool called, "" for a call to e itself.
func appRefusal(e *registry.Entity, action, bridge string) error {
	if len(action) > 40 {
		action = action[:40] + "…"
	}
	if a, ok := e.Action(action); ok && a.Op != nil && !registry.ReadOnlyOp(a.Op) {
		return switchboard.E(switchboard.ErrForbidden, "app_write_refused",
			"a view may not call %s action %q: it writes (%s); views only read, through their bridge tool", e.Name, action, a.Op.Method)
	}
	if bridge != "" {
		return switchboard.E(switchboard.ErrForbidden, "app_tool_not_allowed",
			"%s does not bridge %s action %q: its actions are the view's declared reads", bridge, e.Name, action)
	}
	return switchboard.E(switchboard.ErrForbidden, "app_tool_not_allowed",
		"a view may not call %s (its visibility does not include app): views read through their bridge tool", e.Name)
}

// actionOf is the "action" argument of raw arguments, "" when absent.
func actionOf(raw json.RawMessage) string {
	var args struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(raw, &args)
	return args.Action
}
