// Package api is Switchboard's admin REST API for the platform operator:
// tenants, app instances, callers and the connector catalog under /v1,
// authenticated by an operator bearer token; health and readiness probes;
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
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
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
	e.Pre(echo.WrapMiddleware(RefuseNUL))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openAPI)

	op := s.operatorAuth
	e.POST("/v1/tenants", s.createTenant, op)
	e.GET("/v1/tenants", s.listTenants, op)
	e.GET("/v1/tenants/:tenant", s.getTenant, op)
	e.GET("/v1/connectors", s.listConnectors, op)
	e.GET("/v1/connectors/:connector", s.getConnector, op)
	e.GET("/v1/connectors/:connector/icons/:size", s.getConnectorIcon, op)
	e.PUT("/v1/tenants/:tenant/instances/:instance", s.putInstance, op)
	e.PATCH("/v1/tenants/:tenant/instances/:instance", s.patchInstance, op)
	e.GET("/v1/tenants/:tenant/instances", s.listInstances, op)
	e.GET("/v1/tenants/:tenant/instances/:instance", s.getInstance, op)
	e.DELETE("/v1/tenants/:tenant/instances/:instance", s.deleteInstance, op)
	e.POST("/v1/tenants/:tenant/callers", s.createCaller, op)
	e.GET("/v1/tenants/:tenant/callers", s.listCallers, op)
	e.DELETE("/v1/tenants/:tenant/callers/:caller", s.revokeCaller, op)
	e.PUT("/v1/providers/:provider", s.putProvider, op)
	e.GET("/v1/providers", s.listProviders, op)
	e.GET("/v1/providers/:provider", s.getProvider, op)
	e.DELETE("/v1/providers/:provider", s.deleteProvider, op)
	e.GET("/v1/tenants/:tenant/audit", s.listAudit, op)
	e.POST("/v1/tenants/:tenant/instances/:instance/test", s.testInstance, op)
	e.POST("/v1/operator-tokens", s.createOperatorToken, op)
	e.GET("/v1/operator-tokens", s.listOperatorTokens, op)
	e.DELETE("/v1/operator-tokens/:token", s.revokeOperatorToken, op)
	return s
}

// Handler returns the admin API's HTTP handler. Wrap it (with the rest of
// the server) in RequestLog.
func (s *Server) Handler() http.Handler { return s.echo }

// Router returns the echo router the admin API's routes are on; the
// server assembly mounts every other surface on it, so that one router
// serves the whole server.
func (s *Server) Router() *echo.Echo { return s.echo }

// logger returns the request's logger, or the configured one.
func (s *Server) logger(c echo.Context) *slog.Logger {
	if l, ok := c.Request().Context().Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return s.cfg.Logger
}

var errUnauthorized = switchboard.E(switchboard.ErrUnauthorized, "unauthorized",
	"a valid operator token is required: Authorization: Bearer <token>")

// operatorAuth admits requests bearing a valid operator token.
func (s *Server) operatorAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scheme, token, ok := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || s.cfg.Operators == nil {
			return errUnauthorized
		}
		ok, err := s.cfg.Operators.Check(c.Request().Context(), strings.TrimSpace(token))
		if err != nil {
			return fmt.Errorf("checking the operator token: %w", err)
		}
		if !ok {
			return errUnauthorized
		}
		return next(c)
	}
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
		s.logger(c).Warn("not ready", "error", err.Error())
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
