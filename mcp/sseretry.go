package mcp

import (
	"io"
	"net/http"
	"strings"
)

// The SSE retry field (2025-11-25, SEP-1699). A server that closes an
// event stream before the request's answer SHOULD first send an event
// with the retry field, the milliseconds the client waits before it
// reconnects; the SDK's server sends it only when a handler closes the
// stream itself (RequestExtra.CloseSSEStream). A proxied server does that
// in its own stream to Switchboard, which the caller does not see, and a
// stdio server has no stream to close: so the event streams Switchboard
// answers forwarded requests with begin with the field, an event of the
// retry field alone, which clients take without dispatching an event.
// No event carries an id (the endpoint is stateless: nothing is resumed),
// so a client that loses the stream calls again rather than resuming.
// From 2026-07-28 on, closing a stream to be polled is gone, and so is
// the field.

// sseRetry is the event that begins a forwarded request's event stream.
const sseRetry = "retry: 1000\n\n"

// retryVersion reports whether a caller of protocol version v is sent
// the retry field.
func retryVersion(v string) bool {
	return v >= "2025-11-25" && v < versionStateless
}

// retryWriter writes sseRetry first in an event stream.
type retryWriter struct {
	http.ResponseWriter
	started bool
}

func (w *retryWriter) WriteHeader(code int) {
	if w.started {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.started = true
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		io.WriteString(w.ResponseWriter, sseRetry)
	}
}

func (w *retryWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes the SDK's flushes of its events on.
func (w *retryWriter) Flush() {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
