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
