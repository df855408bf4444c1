// Package api is Switchboard's admin REST API for the platform operator:
// tenants, app instances, callers, tenant API keys and the connector
// catalog under /v1, for the operator (operator token) and for the people
// and automation of a tenant (tenant API keys) by role: every /v1 route
// declares the role it needs in one table (routes.go); health and
// readiness probes;
// and the API's own OpenAPI document at /openapi.json.
//
// It also provides the server-wide request middleware (RequestLog), which
// sets every response's request id (switchboard.RequestIDHeader) before
// the handlers run; the other transports log it with
// gateway.RequestLogger. Errors of
// the vocabulary in the root package are rendered in one place
// (handleError) as {"error": {"code": ..., "message": ...}}.
package api

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// openAPIDocument is the admin API's OpenAPI 3.0 description, served at
// GET /openapi.json. A test keeps it in step with the routes.
//
//go:embed openapi.json
var openAPIDocument []byte

// Config is what the admin API is built from.
type Config struct {
	// Tenants applies the rules of tenants, instances and callers.
	Tenants *tenants.Service
	// Operators verifies operator bearer tokens for /v1.
	Operators *auth.Operators
	// Catalog is the connector catalog; nil serves an empty one.
	Catalog *registry.Catalog
	// Logger is used when a request carries no logger from RequestLog.
	// Nil discards.
	Logger *slog.Logger
	// Ready reports whether the server can serve (store reachable,
	// migrations applied); nil means always ready.
	Ready func(context.Context) error
	// Providers is the platform OAuth provider registry; nil answers 503.
	Providers *auth.Providers
	// Audit lists audit rows; nil answers 503.
	Audit *audit.Store
	// Tester runs instance connection tests; nil answers 503.
	Tester Tester
	// APIKeys verifies and stores tenant API keys; nil accepts none.
	APIKeys *tenants.APIKeys
	// Grants runs members' own grant actions; nil answers 503.
	Grants Grants
	// Members keeps members and invitations; nil answers 503.
	Members *members.Store
	// PublicURL is the base of the sign-in links the API returns.
	PublicURL string
	// Session returns the signed-in member's session of a request that
	// the sign-in middleware admitted with a session cookie; nil admits
	// bearer credentials only.
	Session func(context.Context) (members.Session, bool)
	// AuditLog records the changes made through the API to API keys,
	// grants and members' access (actor, subject, action); nil records
	// nothing.
	AuditLog audit.Recorder
	// SessionCookies is the sign-in middleware that admits /v1 requests
	// made with a session cookie (signin.Handler.Authenticate: the cookie,
	// its CSRF token, rotation); nil admits bearer credentials only.
	SessionCookies echo.MiddlewareFunc
	// ConnectLinks mints connect links; nil answers 503.
	ConnectLinks ConnectLinks
	// Limits keeps the tenants' own call limits; nil answers 503.
	Limits *admission.Controller
}

// Server is the admin API.
type Server struct {
	cfg  Config
	echo *echo.Echo
}

// readyTimeout bounds a readiness check.
const readyTimeout = 3 * time.Second

// New builds the admin API.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	s := &Server{cfg: cfg, echo: echo.New()}
	e := s.echo
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openAPI)

	for _, r := range routes {
		mw := []echo.MiddlewareFunc{s.authorize(r.need)}
		if cfg.SessionCookies != nil {
			mw = append([]echo.MiddlewareFunc{cfg.SessionCookies}, mw...)
		}
		e.Add(r.method, r.path, r.handler(s), mw...)
	}
	return s
}

// Handler returns the server's HTTP handler: the router (with whatever
// is mounted on it, see Router) behind RefuseNUL. Wrap it in RequestLog.
func (s *Server) Handler() http.Handler { return RefuseNUL(s.echo) }

// Router returns the echo router the admin API's routes are on; the
// server assembly mounts every other surface on it, so that one router
// serves the whole server.
func (s *Server) Router() *echo.Echo { return s.echo }

// actorOf is the audit actor of the request's principal ("" when there
// is none).
func actorOf(c echo.Context) string {
	if p := principalOf(c); p != nil {
		return p.Actor
	}
	return ""
}

// recordAs writes an audit row of a change made by actor in tenant.
func (s *Server) recordAs(actor string, tenant switchboard.TenantID, instance, subject, action string) {
	s.recordOutcome(actor, tenant, instance, subject, action, "ok")
}

// recordOutcome writes an admin audit row of actor with outcome ("ok" or
// an error code).
func (s *Server) recordOutcome(actor string, tenant switchboard.TenantID, instance, subject, action, outcome string) {
	if s.cfg.AuditLog == nil {
		return
	}
	s.cfg.AuditLog.Record(audit.Entry{Tenant: tenant, Instance: instance, Actor: actor, Subject: subject,
		Tool: "admin", Action: action, Outcome: outcome})
}

// logger returns the request's logger, or the configured one.
func (s *Server) logger(c echo.Context) *slog.Logger {
	if l, ok := loggerOfWriter(c.Response().Writer); ok {
		return l
	}
	return s.loggerOf(c.Request().Context())
}

// loggerOf returns the logger RequestLog put in ctx, or the configured one.
func (s *Server) loggerOf(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*requestLogger); ok {
		return l.logger()
	}
	return s.cfg.Logger
}

type status struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, status{Status: "ok"})
}

// readyz answers 503 with a reason when the store is not ready. The
// reason is a typed error's message or a fixed sentence; the cause is
// logged, not sent.
func (s *Server) readyz(c echo.Context) error {
	if s.cfg.Ready == nil {
		return c.JSON(http.StatusOK, status{Status: "ok"})
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Ready(ctx); err != nil {
		s.logger(c).Warn("not ready", "err", err.Error())
		reason := "the store is unreachable or its migrations are not applied"
		if e, ok := switchboard.AsError(err); ok {
			reason = e.Message
		}
		return c.JSON(http.StatusServiceUnavailable, status{Status: "unavailable", Reason: reason})
	}
	return c.JSON(http.StatusOK, status{Status: "ok"})
}

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDocument)
}
