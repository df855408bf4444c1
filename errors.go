package switchboard

import (
	"errors"
	"fmt"
	"time"
)

// The error vocabulary. Every error that leaves a domain package wraps one of
// these kinds, so that transports can map it to an HTTP status or an MCP error
// code with errors.Is, without knowing where it came from.
var (
	ErrNotFound     = errors.New("not found")
	ErrInvalid      = errors.New("invalid")
	ErrConflict     = errors.New("conflict")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrUnavailable  = errors.New("unavailable")
)

// Error is a typed, client-safe error: Kind is one of the vocabulary errors,
// Code a stable snake_case machine code (such as "agent_not_allowed"), and
// Message a bounded human sentence that never contains a secret. Err, when
// set, is the internal cause: it is logged, never rendered to a client.
// How each code renders (HTTP status, JSON-RPC code, retry semantics) is
// the table in errorcodes.go.
type Error struct {
	Kind    error
	Code    string
	Message string
	Err     error
	// Status, when not 0, overrides the table's HTTP status for the code
	// (an upstream's own 4xx status passed through).
	Status int
	// RetryAfter, when positive, is the delay before a retry (retryAfterMs),
	// overriding the table's default for the code.
	RetryAfter time.Duration
	// ConnectURL, when set, is where the user reconnects
	// (reconnect_required): a connect link, rendered as the body's
	// connectUrl.
	ConnectURL string
}

// E builds an *Error of the given kind and code with a formatted message.
// The message is shown to clients: never format a secret into it.
func E(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements error. It renders only the client-safe parts.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Unwrap lets errors.Is match both the kind and the internal cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// WithCause returns a copy of e that records err as its internal cause.
func (e *Error) WithCause(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// CodeOf returns the machine code of err: the Code of the *Error (or
// Typed error) in its chain, or a code derived from its kind, or
// "internal".
func CodeOf(err error) string {
	if e, ok := typedOf(err); ok && e.Code != "" {
		return e.Code
	}
	return kindCode(err)
}

// kindCode is the code of err's vocabulary kind alone: "not_found", ...,
// or "internal".
func kindCode(err error) string {
	switch {
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrUnauthorized):
		return "unauthorized"
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return "internal"
}
