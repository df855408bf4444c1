package gateway

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// What the agent-path transports (MCP, App mode, the OAuth connect pages)
// share about requests: the body cap, the targetUserId argument, request
// logging and the logging of errors (their rendering is the error table of
// the root package: switchboard.WriteError).

// TargetUserArg is the argument (and MCP _meta key) with which a trusted
// caller names the user to act for. It is removed before dispatch and never
// sent upstream.
const TargetUserArg = "targetUserId"

// MaxBodyBytes caps the request body of App mode and of the MCP endpoint.
const MaxBodyBytes = 1 << 20

// RequestLogger returns logger with the request's id, read from the
// response header the request logging middleware has already set, so that
// agent-path lines join the server's request line.
func RequestLogger(logger *slog.Logger, w http.ResponseWriter) *slog.Logger {
	if id := w.Header().Get(switchboard.RequestIDHeader); id != "" {
		return logger.With("request_id", id)
	}
	return logger
}

// LogError logs a failed agent call once: server faults at error level
// with their internal cause, refusals and upstream failures at info level
// with their code only.
func LogError(log *slog.Logger, msg string, err error) {
	p := switchboard.ProblemOf(err)
	d := p.Detail
	if p.Internal {
		log.Error(msg, "code", d.Code, "err", err.Error())
		return
	}
	attrs := []any{"code", d.Code}
	var ue *registry.UpstreamError
	if errors.As(err, &ue) && ue.Status != 0 {
		attrs = append(attrs, "upstream_status", ue.Status)
	}
	log.Info(msg, attrs...)
}
