package registry

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	switchboard "github.com/switchboardhq/switchboard"
)

func TestNewUpstreamError(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	tests := []struct {
		name   string
		status int
		retry  string
		body   string
		code   string
		kind   error
		after  time.Duration
		want   string
		absent string
	}{
		{"error.message", 422, "", `{"error":{"message":"Invalid\tcurrency","type":"` + canary + `"}}`, "upstream_rejected", switchboard.ErrInvalid, 0, "status 422: Invalid currency", canary},
		{"slack style", 400, "", `{"ok":false,"error":"invalid_auth","token":"` + canary + `"}`, "upstream_rejected", switchboard.ErrInvalid, 0, ": invalid_auth", canary},
		{"errors list", 409, "", `{"errors":[{"message":"taken","value":"` + canary + `"}]}`, "upstream_rejected", switchboard.ErrInvalid, 0, ": taken", canary},
		{"html body", 400, "", `<html>` + canary + `</html>`, "upstream_rejected", switchboard.ErrInvalid, 0, "status 400", canary},
		{"long message", 400, "", `{"message":"` + long + `"}`, "upstream_rejected", switchboard.ErrInvalid, 0, strings.Repeat("é", 200) + "…", strings.Repeat("é", 201)},
		{"401 ignores body", 401, "", `{"message":"` + canary + `"}`, "reconnect_required", switchboard.ErrUnauthorized, 0, "reconnect", canary},
		{"429 garbage retry", 429, "soon", ``, "rate_limited", switchboard.ErrUnavailable, time.Second, "retry after 1s", ""},
		{"429 negative retry", 429, "-5", ``, "rate_limited", switchboard.ErrUnavailable, time.Second, "", ""},
		{"429 huge retry", 429, "99999999", ``, "rate_limited", switchboard.ErrUnavailable, 24 * time.Hour, "", ""},
		{"502", 502, "", `{"message":"` + canary + `"}`, "upstream_unavailable", switchboard.ErrUnavailable, 0, "status 502", canary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.retry != "" {
				h.Set("Retry-After", tt.retry)
			}
			e := NewUpstreamError(tt.status, h, []byte(tt.body))
			if e.Code != tt.code || e.Status != tt.status || !errors.Is(e, tt.kind) || e.RetryAfter != tt.after {
				t.Errorf("got %+v", e)
			}
			if !strings.Contains(e.Error(), tt.want) || tt.absent != "" && strings.Contains(e.Error(), tt.absent) {
				t.Errorf("error %q", e.Error())
			}
			if !strings.HasPrefix(e.Error(), tt.code+": ") {
				t.Errorf("error %q lacks its code", e.Error())
			}
		})
	}
}
