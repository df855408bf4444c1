package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// echoCodes are the table codes of echo's own errors (unknown route, wrong
// method, ...), by status.
var echoCodes = map[int]string{
	http.StatusNotFound:              "route_not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusBadRequest:            "bad_request",
}

// handleError is the server's one error handler: it renders every error a
// handler or echo returns through the error table (switchboard.WriteError).
// Typed errors render their code and message; anything else is a 500 whose
// details are logged once, with the request id, and never sent.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if he, ok := errors.AsType[*echo.HTTPError](err); ok {
		err = fromEcho(he)
	}
	p := switchboard.ProblemOf(err)
	switch {
	case p.Internal:
		s.logInternal(c, err)
	case p.Status >= 500:
		s.logger(c).Warn("request failed", "status", p.Status, "code", p.Detail.Code, "err", err.Error())
	}
	if c.Request().Method == http.MethodHead {
		// The error's headers, no body.
		c.Response().Writer = headOnly{c.Response().Writer}
	}
	switchboard.WriteError(c.Response(), err)
}

// fromEcho maps an error of echo itself to a typed error of the table; a
// 5xx of echo is internal.
func fromEcho(he *echo.HTTPError) error {
	if code, ok := echoCodes[he.Code]; ok {
		spec, _ := switchboard.Spec(code)
		return &switchboard.Error{Kind: spec.Kind, Code: code, Message: spec.Message}
	}
	if he.Code >= 500 {
		return he
	}
	return &switchboard.Error{Kind: switchboard.ErrInvalid, Code: "bad_request", Message: http.StatusText(he.Code), Status: he.Code}
}

// headOnly drops the body of an answer to HEAD.
type headOnly struct{ http.ResponseWriter }

func (h headOnly) Write(b []byte) (int, error) { return len(b), nil }

func (s *Server) logInternal(c echo.Context, err error) {
	r := c.Request()
	s.logger(c).LogAttrs(r.Context(), slog.LevelError, "internal error",
		slog.String("method", r.Method), slog.String("route", c.Path()), slog.String("err", err.Error()))
}
