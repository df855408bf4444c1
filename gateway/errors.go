package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// MaxMessage bounds the message of an error shown to an agent.
const MaxMessage = 500

// ErrorDetail is the client-safe form of an error on the agent path: a
// stable code, a bounded message that never holds a secret or an upstream
// body, and for rate limits the delay before a retry.
type ErrorDetail struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
}

// ErrorBody is the JSON body of an error: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// Detail maps err to its client-safe detail. Errors outside the
// vocabulary are "internal" with a generic message; their text is never
// shown.
func Detail(err error) ErrorDetail {
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		return ErrorDetail{Code: ue.Code, Message: bound(ue.Message), RetryAfterMs: ue.RetryAfter.Milliseconds()}
	}
	if e, ok := switchboard.AsError(err); ok {
		return ErrorDetail{Code: e.Code, Message: bound(e.Message)}
	}
	code := switchboard.CodeOf(err)
	if code == "internal" {
		return ErrorDetail{Code: "internal", Message: "an internal error occurred; it has been logged"}
	}
	return ErrorDetail{Code: code, Message: code}
}

// Internal reports whether err is outside the vocabulary (a server fault,
// to be logged).
func Internal(err error) bool {
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		return false
	}
	return switchboard.CodeOf(err) == "internal"
}

// Status maps err to the HTTP status of App mode and of refused MCP
// requests. Upstream failures keep the upstream's 4xx status; rate limits
// are 429; other upstream failures 502.
func Status(err error) int {
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		switch {
		case ue.Code == "rate_limited":
			return http.StatusTooManyRequests
		case ue.Code == "upstream_unavailable":
			return http.StatusBadGateway
		case ue.Status >= 400 && ue.Status < 500:
			return ue.Status
		}
		return http.StatusBadGateway
	}
	switch {
	case errors.Is(err, switchboard.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, switchboard.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, switchboard.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, switchboard.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, switchboard.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, switchboard.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// bound cuts s to MaxMessage bytes on a rune boundary.
func bound(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	cut := MaxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// WriteError writes err as a JSON error body with its status. A refused
// caller credential also gets WWW-Authenticate: Bearer, a rate limit
// Retry-After.
func WriteError(w http.ResponseWriter, err error) {
	d := Detail(err)
	status := Status(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusUnauthorized && d.Code == "unauthorized" {
		h.Set("WWW-Authenticate", "Bearer")
	}
	if d.RetryAfterMs > 0 {
		h.Set("Retry-After", strconv.FormatInt((d.RetryAfterMs+999)/1000, 10))
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(ErrorBody{Error: d})
	w.Write(append(b, '\n'))
}
