package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400)
	for _, tc := range []struct {
		name     string
		err      error
		status   int
		code     string
		retry    int64
		wwwAuth  bool
		internal bool
	}{
		{"caller refused", switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "no"), 401, "unauthorized", 0, true, false},
		{"app needs reconnect", switchboard.E(switchboard.ErrUnauthorized, "reconnect_required", "set API_KEY"), 401, "reconnect_required", 0, false, false},
		{"agent", switchboard.E(switchboard.ErrForbidden, "agent_not_allowed", "no"), 403, "agent_not_allowed", 0, false, false},
		{"instance", switchboard.E(switchboard.ErrNotFound, "not_found", "no"), 404, "not_found", 0, false, false},
		{"arguments", switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s", long), 400, "invalid_arguments", 0, false, false},
		{"mode", switchboard.E(switchboard.ErrUnavailable, "auth_mode_not_available", "no"), 503, "auth_mode_not_available", 0, false, false},
		{"upstream 401", &registry.UpstreamError{Code: "reconnect_required", Status: 401, Message: "m"}, 401, "reconnect_required", 0, false, false},
		{"upstream 404", &registry.UpstreamError{Code: "not_found", Status: 404, Message: "m"}, 404, "not_found", 0, false, false},
		{"upstream 429", &registry.UpstreamError{Code: "rate_limited", Status: 429, RetryAfter: 1500 * time.Millisecond, Message: "m"}, 429, "rate_limited", 1500, false, false},
		{"upstream 503 with Retry-After", &registry.UpstreamError{Code: "rate_limited", Status: 503, RetryAfter: 2 * time.Second, Message: "m"}, 429, "rate_limited", 2000, false, false},
		{"upstream 500", &registry.UpstreamError{Code: "upstream_unavailable", Status: 500, Message: "m"}, 502, "upstream_unavailable", 0, false, false},
		{"unreachable", &registry.UpstreamError{Code: "upstream_unavailable", Message: "m"}, 502, "upstream_unavailable", 0, false, false},
		{"wrapped", fmt.Errorf("calling: %w", switchboard.E(switchboard.ErrForbidden, "missing_agent_id", "m")), 403, "missing_agent_id", 0, false, false},
		{"internal", fmt.Errorf("driver: password=hunter2 refused"), 500, "internal", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := gateway.Detail(tc.err)
			if d.Code != tc.code || d.RetryAfterMs != tc.retry || gateway.Status(tc.err) != tc.status || gateway.Internal(tc.err) != tc.internal {
				t.Errorf("detail %+v status %d internal %v", d, gateway.Status(tc.err), gateway.Internal(tc.err))
			}
			if len(d.Message) > gateway.MaxMessage || strings.Contains(d.Message, "hunter2") {
				t.Errorf("message %q is too long or leaks the cause", d.Message)
			}
			w := httptest.NewRecorder()
			gateway.WriteError(w, tc.err)
			var body gateway.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != d || w.Code != tc.status {
				t.Errorf("written %d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate") == "Bearer"; got != tc.wwwAuth {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
			if tc.retry > 0 && w.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After header")
			}
			if w.Header().Get("Content-Type") != "application/json" || w.Code == http.StatusOK {
				t.Errorf("headers %v", w.Header())
			}
		})
	}
}
