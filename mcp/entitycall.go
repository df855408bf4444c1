package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// EntityCaller runs a tools/call of an entity exactly as the instance
// endpoint does (argument decoding, targetUserId, the describe action,
// Gateway.Call with its allowlist check, buildAppAuth, validation and
// audit, and the same result and typed-error rendering), for endpoints
// that reach an instance's tools by another name (the tenant catalog).
type EntityCaller struct{ h *handler }

// NewEntityCaller returns the instance endpoint's call path on g.
func NewEntityCaller(g *gateway.Gateway, logger *slog.Logger) *EntityCaller {
	if logger == nil {
		logger = g.Logger()
	}
	return &EntityCaller{h: &handler{g: g, logger: logger}}
}

// Call calls entity e of t for p with args (a JSON object holding
// "action" and the action's arguments) and the targetUserId of the
// request's params._meta ("" when none), logging to log.
func (c *EntityCaller) Call(ctx context.Context, e *registry.Entity, p *auth.Principal, t *gateway.Target, log gateway.CallLog, args json.RawMessage, metaTarget string) *sdk.CallToolResult {
	return c.h.callTool(ctx, e, p, t, log, args, metaTarget)
}

// CallFromView is Call for a call a host marked as an MCP Apps view's
// (params._meta["io.modelcontextprotocol/ui"], registry.AppMetaKey): it
// goes on only when its action is a read one of the connector's views
// bridges, and is otherwise refused (app_write_refused,
// app_tool_not_allowed) and audited.
func (c *EntityCaller) CallFromView(ctx context.Context, e *registry.Entity, p *auth.Principal, t *gateway.Target, log gateway.CallLog, args json.RawMessage, metaTarget string) *sdk.CallToolResult {
	if res := c.h.refuseView(ctx, p, t, log, e, args); res != nil {
		return res
	}
	return c.h.callTool(ctx, e, p, t, log, args, metaTarget)
}

// Views are the MCP Apps views of conn as resources/list lists them and
// resources/read answers them, for endpoints that serve them by another
// route (the tenant catalog).
func Views(conn *registry.Connector) []View {
	out := make([]View, 0, len(conn.Apps))
	for _, app := range conn.Apps {
		out = append(out, View{Resource: appResource(app), read: app})
	}
	return out
}

// View is one MCP Apps view of a connector.
type View struct {
	Resource *sdk.Resource
	read     *registry.App
}

// Read is the view's resources/read answer.
func (v View) Read() *sdk.ReadResourceResult {
	res, _ := appRead(v.read)(context.Background(), nil)
	return res
}

// OriginCheck returns the instance endpoint's DNS-rebinding guard under
// opts (DisableLocalhostProtection, AllowedOrigins, PublicURL): the
// refusal's message for a request, or "".
func OriginCheck(opts Options) func(*http.Request) string {
	return (&handler{opts: opts, origins: allowedOrigins(opts)}).checkOrigin
}

// allowedOrigins are the browser origins of opts, lower-cased: its
// AllowedOrigins and PublicURL's origin.
func allowedOrigins(opts Options) map[string]bool {
	origins := map[string]bool{}
	for _, o := range opts.AllowedOrigins {
		origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	if opts.PublicURL != "" {
		if u, err := url.Parse(opts.PublicURL); err == nil && u.Host != "" {
			origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		}
	}
	return origins
}
