package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/tracing"
)

// validRequestID reports whether id matches ^[A-Za-z0-9._-]{1,64}$, the
// incoming X-Request-Id the server keeps (FuzzValidRequestID holds it to
// that regexp). A loop rather than the regexp: the regexp's matcher state
// comes from a pool that every collection empties, an allocation of a
// few hundred bytes every few requests.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

type ctxKey int

// loggerKey holds the request's *requestLogger in its context, for the
// admin API's handlers (Server.logger).
const loggerKey ctxKey = 0

// requestLogger is a request's logger and id. The logger with the id is
// built when a handler asks for it (most requests log only the request
// line): slog.Logger.With formats its attributes at once, which was a
// tenth of the allocations of a tools/call.
type requestLogger struct {
	base *slog.Logger
	id   string
}

func (l *requestLogger) logger() *slog.Logger { return l.base.With("request_id", l.id) }

var discard = slog.New(slog.DiscardHandler)

// maxLoggedPath bounds the path written to a log line.
const maxLoggedPath = 256

// RequestLog wraps the whole server. It assigns each request an id (the
// incoming X-Request-Id when it matches ^[A-Za-z0-9._-]{1,64}$, otherwise
// a fresh one), sets it on the response before the handler runs (where
// gateway.RequestLogger reads it), puts a logger carrying it in the
// request context for the admin API, and writes one log line per
// request: method, path (never the query string, which may hold secrets),
// status, duration, bytes written and the tenant slug when the path names
// one. Headers and bodies are never logged.
func RequestLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(switchboard.RequestIDHeader)
		if !validRequestID(id) {
			id = switchboard.NewID("req_")
		}
		// One allocation for the request's logger, its recorder and the
		// id header's value (the key is canonical: no Set needed).
		st := &requestState{requestLogger: requestLogger{base: logger, id: id}, recorder: recorder{ResponseWriter: w}}
		st.idValue[0] = id
		w.Header()[switchboard.RequestIDHeader] = st.idValue[:]
		ctx := r.Context()
		rec := &st.recorder
		if strings.HasPrefix(r.URL.Path, agentPrefix) {
			// The agent path takes the id from the response header
			// (gateway.NewCallLog); the admin API's handlers find the
			// logger through the writer there (loggerOfWriter): no
			// context and request copy per call.
			next.ServeHTTP(st, r)
		} else {
			ctx = context.WithValue(ctx, loggerKey, &st.requestLogger)
			next.ServeHTTP(st, r.WithContext(ctx))
		}

		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		path := r.URL.Path
		if len(path) > maxLoggedPath {
			path = path[:maxLoggedPath] + "…"
		}
		if !logger.Enabled(ctx, slog.LevelInfo) {
			return
		}
		// The line's first four attributes, then the others as a group
		// without a key, which handlers inline (slog.Handler's rules):
		// the same line, in five attributes, which a slog.Record holds
		// inline; a sixth would be an allocation per request for the
		// record's overflow. The group's attributes are kept in st.
		more := append(st.more[:0],
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytes", rec.bytes))
		if t := tenantOfPath(r.URL.Path); t != "" {
			more = append(more, slog.String("tenant", t))
		}
		if tr := w.Header().Get(tracing.ResponseHeader); tr != "" {
			more = append(more, slog.String("trace_id", tracing.TraceID(tr)))
		}
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", id),
			slog.String("method", r.Method),
			slog.String("path", path),
			slog.Int("status", status),
			slog.Attr{Value: slog.GroupValue(more...)})
	})
}

// agentPrefix starts the paths of the agent surfaces.
const agentPrefix = "/workspaces/"

// loggerOfWriter returns the logger of the request RequestLog gave w (or
// a writer wrapping it), when it did.
func loggerOfWriter(w http.ResponseWriter) (*slog.Logger, bool) {
	for w != nil {
		if st, ok := w.(*requestState); ok {
			return st.logger(), true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil, false
		}
		w = u.Unwrap()
	}
	return nil, false
}

// tenantOfPath returns the tenant slug of /v1/tenants/{tenant}/... and
// /workspaces/{tenant}/... paths, when it is a valid slug.
func tenantOfPath(p string) string {
	first, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	second, rest, _ := strings.Cut(rest, "/")
	var t string
	switch {
	case first == "v1" && second == "tenants":
		t, _, _ = strings.Cut(rest, "/")
	case first == "workspaces":
		t = second
	}
	if !switchboard.ValidSlug(t) {
		return ""
	}
	return t
}

// requestState is what RequestLog keeps for a request; it is the
// handlers' writer (its recorder's).
type requestState struct {
	requestLogger
	recorder
	idValue [1]string
	more    [4]slog.Attr // the request line's attributes after the fourth
}

// recorder remembers the status and counts the bytes of a response. It
// keeps streaming working: Flush passes through, and Unwrap lets
// http.ResponseController reach the underlying writer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 { // 1xx are interim

		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
