package server

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/appmode"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/connectflow"
	"github.com/switchboardhq/switchboard/mcp"
)

// agentSurfaces are the HTTP surfaces of the agent path, mounted beside
// the admin API on its echo router.
type agentSurfaces struct {
	app      *appmode.Handler
	flows    *connectflow.Pages
	mcp      http.Handler
	resource http.Handler
	// tenant is the tenant catalog endpoint /workspaces/{tenant}/mcp.
	tenant http.Handler
}

// mountAgentPath mounts the agent surfaces on e, the admin API's router
// (/v1, /healthz, /readyz, /openapi.json), so that one router serves the
// whole server. Echo prefers a route with the request's method and falls
// back to a "*" route otherwise, which keeps the surfaces' own answers
// for unknown paths and methods: JSON errors under apps/ and oauth/, a
// JSON-RPC 404 elsewhere under /workspaces/ (and 405 on the MCP endpoint
// for methods other than POST, from the endpoint itself).
func mountAgentPath(e *echo.Echo, s agentSurfaces) {
	// App mode.
	e.POST("/workspaces/:tenant/apps/:instance/ops/:operationId", serve(s.app.ServeOperation))
	e.Any("/workspaces/:tenant/apps/*", serve(s.app.ServeOther))

	// OAuth connect pages, and the platform's central callback.
	const flow = "/workspaces/:tenant/webhooks/:instance/oauth/"
	e.GET(flow+"connect", serve(s.flows.ServeConnect))
	e.POST(flow+"connect", serve(s.flows.ServeConnect))
	e.GET(flow+"callback", serve(s.flows.ServeCallback))
	e.GET(flow+"status", serve(s.flows.ServeStatus))
	e.POST(flow+"disconnect", serve(s.flows.ServeDisconnect))
	e.DELETE(flow+"disconnect", serve(s.flows.ServeDisconnect))
	e.GET(flow+auth.ConnectLinkPath, serve(s.flows.ServeLink))
	e.Any(flow+"*", serve(s.flows.ServeNotFound))
	// Any first: a later route of the same path and method replaces it.
	e.Any(auth.CentralCallbackPath, serve(s.flows.ServeNotFound))
	e.GET(auth.CentralCallbackPath, serve(s.flows.ServeCallback))

	// MCP: the endpoint /workspaces/{tenant}/webhooks/{instance}.mcp (the
	// handler checks the suffix and the method), its protected-resource
	// document, and JSON-RPC 404s for the rest of /workspaces/.
	e.Any("/workspaces/:tenant/webhooks/:instance", servePlain(s.mcp.ServeHTTP))
	e.Any("/workspaces/:tenant/mcp", serve(s.tenant.ServeHTTP))
	e.Any("/workspaces/*", serve(s.mcp.ServeHTTP))
	e.Any(mcp.WellKnownPrefix+"/*", serve(s.resource.ServeHTTP))
}

// servePlain adapts an http.HandlerFunc that reads its own path (the MCP
// endpoint parses /workspaces/{tenant}/webhooks/{instance}.mcp) to echo,
// without path values: setting them builds a map per request.
func servePlain(h http.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h(c.Response(), c.Request())
		return nil
	}
}

// serve adapts an http.HandlerFunc to echo: echo's path parameters become
// the request's path values (unescaped, as net/http's router gives them),
// so that handlers read them with r.PathValue.
func serve(h http.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		values := c.ParamValues()
		for i, name := range c.ParamNames() {
			if name == "*" || i >= len(values) {
				continue
			}
			v := values[i]
			if u, err := url.PathUnescape(v); err == nil {
				v = u
			}
			r.SetPathValue(name, v)
		}
		h(c.Response(), r)
		return nil
	}
}
