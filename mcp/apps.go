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
// host's word). A marked call to an entity tool goes on only when its
// action is a read one of the connector's views bridges; otherwise it is
// refused: app_write_refused when its action writes, app_tool_not_allowed
// when it reads something no bridge declares. The tenant endpoint's call
// holds a marked call to the same rule (EntityCaller.CallFromView).

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

// toolBytes is the size of tool in a tools/list result, its comma
// included: what the views add to the list is counted against the
// tenant's context budget too.
func toolBytes(tool *sdk.Tool) int {
	b, _ := json.Marshal(tool)
	return len(b) + 1
}

// bridgeTool is app's bridge: app-only, read-only, its action one of
// the bridge's.
func bridgeTool(app *registry.App) *sdk.Tool {
	actions, _ := json.Marshal(app.Bridge.Actions)
	schema := json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":` + string(actions) + `}},"required":["action"]}`)
	tool := &sdk.Tool{
		Name:        app.Bridge.Name,
		Title:       app.Name + " (view bridge)",
		Description: "For the " + app.Name + " view only, not for the model: the read-only actions of " + app.Bridge.Tool + " the view may call, with that tool's arguments.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
		Meta:        uiMeta(app.URI, "app"),
	}
	if app.BridgeEntity.OutputSchema != nil {
		// The entity's answers, whose structured content is always an
		// object: declared as such, not as the entity's whole output
		// schema, which the view does not need and which would count
		// against the tenant's context budget a second time.
		tool.OutputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return tool
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

// refuseView refuses a call a host marked as a view's to entity tool e of
// t, unless its action is a read one of the connector's views bridges
// (then it returns nil and the call goes on).
func (h *handler) refuseView(ctx context.Context, p *auth.Principal, t *gateway.Target, log gateway.CallLog, e *registry.Entity, args json.RawMessage) *sdk.CallToolResult {
	action := actionOf(args)
	if bridged(t.Connector, e, action) {
		return nil
	}
	err := appRefusal(e, action, "")
	log.Info("tool call refused", "code", switchboard.CodeOf(err), "tool", e.Name, "agent", p.AgentID)
	h.g.Refused(ctx, p.TenantSlug, t.Instance.Slug, p, t, e.Name, err)
	return errorResult(err)
}

// bridged reports whether action of e is a read that a view of conn
// bridges.
func bridged(conn *registry.Connector, e *registry.Entity, action string) bool {
	for _, app := range conn.Apps {
		if app.BridgeEntity.Name != e.Name {
			continue
		}
		if a, ok := app.BridgeActions[action]; ok && registry.ReadOnlyOp(a.Op) {
			return true
		}
	}
	return false
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
		"a view may not call %s action %q: views read only what their bridge tool declares", e.Name, action)
}

// actionOf is the "action" argument of raw arguments, "" when absent.
func actionOf(raw json.RawMessage) string {
	var args struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(raw, &args)
	return args.Action
}
