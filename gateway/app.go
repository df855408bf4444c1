package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// TargetUserArg is the argument (and MCP _meta key) with which a trusted
// caller names the user to act for. It is removed before dispatch and never
// sent upstream.
const TargetUserArg = "targetUserId"

// MaxBodyBytes caps the request body of App mode and of the MCP endpoint.
const MaxBodyBytes = 1 << 20

// AppPattern is the route of App mode.
const AppPattern = "POST /workspaces/{tenant}/apps/{instance}/ops/{operationId}"

// AppHandler serves App mode: POST
// /workspaces/{tenant}/apps/{instance}/ops/{operationId} with the
// operation's arguments as a JSON object (at most 1 MiB), behind the same
// caller authentication and agent allowlist as the MCP endpoint. The
// operation is named by its original operationId or its tool-safe name. A
// success returns the upstream body and status unchanged; an upstream
// failure its status (429 for rate limits, 502 when the upstream failed or
// was unreachable) with a bounded JSON error; a refused request 400, 401,
// 403, 404 or 413 with a JSON error.
func (g *Gateway) AppHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(AppPattern, g.serveApp)
	mux.HandleFunc("/workspaces/{tenant}/apps/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && strings.Contains(r.URL.Path, "/ops/") {
			w.Header().Set("Allow", http.MethodPost)
			writeStatus(w, http.StatusMethodNotAllowed, "method_not_allowed", "App mode operations are called with POST")
			return
		}
		writeStatus(w, http.StatusNotFound, "not_found", "no such route: use POST /workspaces/{tenant}/apps/{instance}/ops/{operationId}")
	})
	return mux
}

func writeStatus(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
	w.Write(append(b, '\n'))
}

func (g *Gateway) serveApp(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tenantSlug, instanceSlug, opID := r.PathValue("tenant"), r.PathValue("instance"), r.PathValue("operationId")
	log := RequestLogger(g.logger, w).With("tenant", tenantSlug, "instance", instanceSlug, "mode", "app")
	fail := func(err error) {
		LogError(log, "app call failed", err)
		WriteError(w, err)
	}

	p, t, err := g.Authorize(ctx, r, tenantSlug, instanceSlug)
	if err != nil {
		fail(err)
		return
	}
	log = log.With("agent", p.AgentID, "caller", string(p.Caller.ID))

	args, err := readArgs(w, r)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge, "request_too_large", "the request body is larger than 1 MiB")
			return
		}
		fail(err)
		return
	}
	// targetUserId is Switchboard's, never the upstream's; it counts only
	// for trusted callers (Principal.Subject).
	if v, present := args[TargetUserArg]; present {
		delete(args, TargetUserArg)
		if s, ok := v.(string); ok {
			p = p.WithTarget(s)
		}
	}
	if t.API() == nil {
		fail(switchboard.E(switchboard.ErrNotFound, "unknown_operation",
			"App mode serves connectors of type openapi; call this app instance over MCP"))
		return
	}
	op, ok := t.API().Operation(opID)
	if !ok {
		fail(switchboard.E(switchboard.ErrNotFound, "unknown_operation", "the connector has no operation %q", truncate(opID, 80)))
		return
	}
	log = log.With("operation", op.Name)

	resp, err := g.Call(ctx, t, p, op, args)
	if err != nil {
		fail(err)
		return
	}
	log.Debug("app call", "status", resp.Status)
	h := w.Header()
	ct := resp.ContentType
	if !strings.Contains(strings.ToLower(ct), "json") {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

var errTooLarge = errors.New("request body too large")

// readArgs reads the JSON object of arguments; an empty body is no
// arguments.
func readArgs(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_request", "the request body could not be read")
	}
	args := map[string]any{}
	if len(bytes.TrimSpace(body)) == 0 {
		return args, nil
	}
	if err := json.Unmarshal(body, &args); err != nil || args == nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_json", "the request body must be a JSON object of the operation's arguments")
	}
	return args, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// RequestIDHeader is the response header the server's request logging
// sets to the request id.
const RequestIDHeader = "X-Request-Id"

// RequestLogger returns logger with the request's id, read from the
// response header the request logging middleware has already set, so that
// agent-path lines join the server's request line.
func RequestLogger(logger *slog.Logger, w http.ResponseWriter) *slog.Logger {
	if id := w.Header().Get(RequestIDHeader); id != "" {
		return logger.With("request_id", id)
	}
	return logger
}

// LogError logs a failed agent call once: server faults at error level
// with their internal cause, refusals and upstream failures at info level
// with their code only.
func LogError(log *slog.Logger, msg string, err error) {
	d := Detail(err)
	if Internal(err) {
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
