// Package appmode serves App mode, the HTTP surface beside the admin API
// and MCP through which an agent calls one operation of an openapi
// connector and gets the raw upstream answer:
// POST /workspaces/{tenant}/apps/{instance}/ops/{operationId}. It shares
// the call path (caller authentication, validateAgent, buildAppAuth,
// dispatch, audit) with the MCP endpoint through package gateway.
package appmode

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/gateway"
)

// Handler serves App mode for a gateway. The server's router sends it
// the requests under /workspaces/{tenant}/apps/ with the path values
// tenant, instance and operationId set.
type Handler struct {
	g      *gateway.Gateway
	logger *slog.Logger
}

// New returns the App-mode handler of g. A nil logger uses the
// gateway's.
func New(g *gateway.Gateway, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = g.Logger()
	}
	return &Handler{g: g, logger: logger}
}

// ServeOther answers every request under /workspaces/{tenant}/apps/ that
// is not a POST of an operation: 405 for another method on an operation,
// 404 otherwise.
func (h *Handler) ServeOther(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && strings.Contains(r.URL.Path, "/ops/") {
		w.Header().Set("Allow", http.MethodPost)
		switchboard.WriteError(w, switchboard.E(switchboard.ErrInvalid, "method_not_allowed", "App mode operations are called with POST"))
		return
	}
	switchboard.WriteError(w, switchboard.E(switchboard.ErrNotFound, "route_not_found", "no such route: use POST /workspaces/{tenant}/apps/{instance}/ops/{operationId}"))
}

// ServeOperation serves POST
// /workspaces/{tenant}/apps/{instance}/ops/{operationId} with the
// operation's arguments as a JSON object (at most 1 MiB), behind the same
// caller authentication and agent allowlist as the MCP endpoint. The
// operation is named by its original operationId or its tool-safe name. A
// success returns the upstream body and status unchanged; an upstream
// failure its status (429 for rate limits, 502 when the upstream failed or
// was unreachable) with a bounded JSON error; a refused request 400, 401,
// 403, 404 or 413 with a JSON error.
// appSurface names App mode in the calls' metrics.
var appSurface = &gateway.Surface{Name: "app", Protocol: "none"}

func (h *Handler) ServeOperation(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tenantSlug, instanceSlug, opID := r.PathValue("tenant"), r.PathValue("instance"), r.PathValue("operationId")
	if strings.Contains(opID, "/") {
		// An operationId is one path segment; echo's last parameter may
		// take more.
		h.ServeOther(w, r)
		return
	}
	log := gateway.NewCallLog(h.logger, w, slog.String("tenant", tenantSlug), slog.String("instance", instanceSlug), slog.String("mode", "app"))
	fail := func(err error) {
		gateway.LogError(log, "app call failed", err)
		switchboard.WriteError(w, err)
	}

	p, t, err := h.g.Authorize(ctx, r, tenantSlug, instanceSlug)
	if err != nil {
		h.g.Refused(ctx, tenantSlug, instanceSlug, p, t, opID, err)
		fail(err)
		return
	}
	log = log.With(slog.String("agent", p.AgentID), slog.String("caller", string(p.Caller.ID)))

	args, err := readArgs(w, r)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			err = switchboard.E(switchboard.ErrInvalid, "request_too_large", "the request body is larger than 1 MiB")
		}
		fail(err)
		return
	}
	// targetUserId is Switchboard's, never the upstream's; it counts only
	// for trusted callers (Principal.Subject).
	if v, present := args[gateway.TargetUserArg]; present {
		delete(args, gateway.TargetUserArg)
		if s, ok := v.(string); ok {
			p = p.WithTarget(s)
		}
	}
	if t.Spec() == nil {
		fail(switchboard.E(switchboard.ErrNotFound, "unknown_operation",
			"App mode serves connectors of type openapi; call this app instance over MCP"))
		return
	}
	op, ok := t.Spec().Operation(opID)
	if !ok {
		err := switchboard.E(switchboard.ErrNotFound, "unknown_operation", "the connector has no operation %q", truncate(opID, 80))
		h.g.Refused(ctx, tenantSlug, instanceSlug, p, t, opID, err)
		fail(err)
		return
	}
	log = log.With(slog.String("operation", op.Name))

	resp, err := h.g.Call(gateway.WithSurface(ctx, appSurface), t, p, op, args)
	if err != nil {
		fail(err)
		return
	}
	log.Debug("app call", "status", resp.Status)
	hdr := w.Header()
	ct := resp.ContentType
	if !strings.Contains(strings.ToLower(ct), "json") {
		ct = "application/octet-stream"
	}
	hdr.Set("Content-Type", ct)
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

var errTooLarge = errors.New("request body too large")

// readArgs reads the JSON object of arguments; an empty body is no
// arguments.
func readArgs(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxBodyBytes))
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
