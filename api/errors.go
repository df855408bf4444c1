package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// ErrorBody is the JSON shape of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine code and a human, client-safe message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Status returns the HTTP status for an error of the vocabulary in the
// root package, and 500 for anything else.
func Status(err error) int {
	switch {
	case errors.Is(err, switchboard.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, switchboard.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, switchboard.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, switchboard.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, switchboard.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, switchboard.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// kindMessages are the messages of vocabulary errors that are not an
// *switchboard.Error: their text may be internal, so it is not sent.
var kindMessages = map[int]string{
	http.StatusNotFound:           "not found",
	http.StatusBadRequest:         "invalid request",
	http.StatusConflict:           "conflict",
	http.StatusUnauthorized:       "unauthorized",
	http.StatusForbidden:          "forbidden",
	http.StatusServiceUnavailable: "temporarily unavailable",
}

// echoCodes are the codes of echo's own errors (unknown route, wrong
// method, ...), by status.
var echoCodes = map[int]ErrorDetail{
	http.StatusNotFound:              {"route_not_found", "no such route"},
	http.StatusMethodNotAllowed:      {"method_not_allowed", "method not allowed on this route"},
	http.StatusRequestEntityTooLarge: {"body_too_large", "the request body is larger than 1 MiB"},
	http.StatusUnsupportedMediaType:  {"unsupported_media_type", "the request body must be application/json"},
	http.StatusUnauthorized:          {"unauthorized", "unauthorized"},
	http.StatusBadRequest:            {"bad_request", "bad request"},
}

// handleError is the server's one error handler: it renders every error a
// handler or echo returns as an ErrorBody. Typed errors render their code
// and message; anything else is a 500 whose details are logged once, with
// the request id, and never sent.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, detail := s.render(err, c)
	if status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", "Bearer")
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, ErrorBody{Error: detail})
	}
	if err != nil {
		s.logger(c).Warn("writing error response", "error", err)
	}
}

func (s *Server) render(err error, c echo.Context) (int, ErrorDetail) {
	if he, ok := errors.AsType[*echo.HTTPError](err); ok {
		if d, ok := echoCodes[he.Code]; ok {
			return he.Code, d
		}
		if he.Code >= 500 {
			s.logInternal(c, err)
			return http.StatusInternalServerError, ErrorDetail{"internal", "internal error"}
		}
		return he.Code, ErrorDetail{"error", http.StatusText(he.Code)}
	}
	status := Status(err)
	if status == http.StatusInternalServerError {
		s.logInternal(c, err)
		return status, ErrorDetail{"internal", "internal error"}
	}
	if status >= 500 {
		s.logger(c).Warn("request failed", "status", status, "code", switchboard.CodeOf(err), "error", err.Error())
	}
	if e, ok := switchboard.AsError(err); ok {
		return status, ErrorDetail{Code: e.Code, Message: e.Message}
	}
	return status, ErrorDetail{Code: switchboard.CodeOf(err), Message: kindMessages[status]}
}

func (s *Server) logInternal(c echo.Context, err error) {
	r := c.Request()
	s.logger(c).LogAttrs(r.Context(), slog.LevelError, "internal error",
		slog.String("method", r.Method), slog.String("route", c.Path()), slog.String("error", err.Error()))
}
