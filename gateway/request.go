package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tracing"
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
		logger = logger.With("request_id", id)
	}
	if tr := w.Header().Get(tracing.ResponseHeader); tr != "" {
		logger = logger.With("trace_id", tracing.TraceID(tr))
	}
	return logger
}

// CallLog is the logger of one agent request and the attributes the
// request has gathered so far (request id, tenant, instance, agent,
// tool...). Unlike slog.Logger.With, which formats its attributes at once
// (a third of the allocations of a tools/call did that), adding
// attributes here formats nothing: they are written with a line, and most
// calls write none. A line has the same attributes, in the same order, as
// through With.
type CallLog struct {
	base  *slog.Logger
	attrs []slog.Attr
}

// NewCallLog returns the log of a request on the agent path: logger with
// the request's id and, when the request is traced, its trace id (as
// RequestLogger; none when w is nil) and attrs.
func NewCallLog(logger *slog.Logger, w http.ResponseWriter, attrs ...slog.Attr) CallLog {
	return NewCallLogIn(nil, logger, w, attrs...)
}

// NewCallLogIn is NewCallLog keeping the attributes in buf when it has
// room for them and four more (a caller's own array, allocated with what
// else it keeps per request).
func NewCallLogIn(buf []slog.Attr, logger *slog.Logger, w http.ResponseWriter, attrs ...slog.Attr) CallLog {
	l := CallLog{base: logger}
	var id, traced string
	if w != nil {
		h := w.Header()
		id = h.Get(switchboard.RequestIDHeader)
		traced = h.Get(tracing.ResponseHeader)
	}
	n := len(attrs)
	if id != "" {
		n++
	}
	if traced != "" {
		n++
	}
	if cap(buf) >= n+4 {
		l.attrs = buf[:0]
	} else {
		l.attrs = make([]slog.Attr, 0, n+4)
	}
	if id != "" {
		l.attrs = append(l.attrs, slog.String("request_id", id))
	}
	if traced != "" {
		l.attrs = append(l.attrs, slog.String("trace_id", tracing.TraceID(traced)))
	}
	l.attrs = append(l.attrs, attrs...)
	return l
}

// With returns l with attrs added; l is unchanged.
func (l CallLog) With(attrs ...slog.Attr) CallLog {
	return CallLog{base: l.base, attrs: append(l.attrs[:len(l.attrs):len(l.attrs)], attrs...)}
}

// Logger is l as a slog.Logger, for code that takes one.
func (l CallLog) Logger() *slog.Logger {
	if l.base == nil {
		return slog.New(slog.DiscardHandler)
	}
	args := make([]any, len(l.attrs))
	for i, a := range l.attrs {
		args[i] = a
	}
	return l.base.With(args...)
}

// Enabled reports whether l writes lines at level.
func (l CallLog) Enabled(level slog.Level) bool {
	return l.base != nil && l.base.Enabled(context.Background(), level)
}

// Debug, Info, Warn and Error write a line with l's attributes and args.
func (l CallLog) Debug(msg string, args ...any) { l.log(slog.LevelDebug, msg, args) }
func (l CallLog) Info(msg string, args ...any)  { l.log(slog.LevelInfo, msg, args) }
func (l CallLog) Warn(msg string, args ...any)  { l.log(slog.LevelWarn, msg, args) }
func (l CallLog) Error(msg string, args ...any) { l.log(slog.LevelError, msg, args) }

func (l CallLog) log(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if l.base == nil || !l.base.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, len(l.attrs)+len(args))
	for _, a := range l.attrs {
		all = append(all, a)
	}
	l.base.Log(ctx, level, msg, append(all, args...)...)
}

// Logger is what LogError writes to: a *slog.Logger or a CallLog.
type Logger interface {
	Info(msg string, args ...any)
	Error(msg string, args ...any)
}

// LogError logs a failed agent call once: server faults at error level
// with their internal cause, refusals and upstream failures at info level
// with their code only.
func LogError(log Logger, msg string, err error) {
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
