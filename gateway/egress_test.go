package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestEgressRefusalIsTypedAndLogged points instances at a loopback address
// the stack does not allow-list (127.0.0.2; only 127.0.0.1 is): the guard
// refuses it in the dialer's Control, before any connection. Verification,
// tools/call of an openapi instance and of an mcp_remote one all answer
// egress_refused naming the rule, never the address; the server logs a
// warning with the instance and the address; bad URLs are refused when
// saved.
func TestEgressRefusalIsTypedAndLogged(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		var hits atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer up.Close()
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
		refused := "http://127.0.0.2:" + port
		cat := registrytest.Load(t, map[string]string{"crm/connector.json": crmManifest, "crm/openapi.json": crmSpec,
			"everything/connector.json": everythingManifest})
		s := newStack(t, db, cat, &clock{})
		s.tenant(t, "acme")
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindAgentPlatform})

		// Verify before save: the probe is refused, the install fails
		// saying why, without the address.
		_, err := s.put("crm", "crm", "apiKey", map[string]string{"API_URL": refused, "API_KEY": "good-key"})
		if code(err) != "verification_failed" || !strings.Contains(err.Error(), "outbound policy") ||
			!strings.Contains(err.Error(), "loopback") || strings.Contains(err.Error(), "127.0.0.2") {
			t.Fatalf("install with a refused upstream = %v", err)
		}
		// Bad URLs are refused when saved, naming the field, not echoing it.
		for _, bad := range []string{"file:///etc/passwd", "not a url", "https://alice:s3cr3t@api.example.com", "gopher://x"} {
			_, err := s.put("crm", "crm", "apiKey", map[string]string{"API_URL": bad, "API_KEY": "good-key"})
			if code(err) != "invalid_base_url" || !strings.Contains(err.Error(), "API_URL") || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("install with API_URL %q = %v, want invalid_base_url", bad, err)
			}
		}
		_, err = s.put("everything", "ev", "apiKey", map[string]string{"MCP_URL": "file:///tmp", "API_KEY": "k"})
		if code(err) != "invalid_base_url" || !strings.Contains(err.Error(), "MCP_URL") {
			t.Errorf("remote install with a file URL = %v", err)
		}

		// Saved without verification, the call is refused the same way.
		s.svc.SetVerifier(nil)
		if _, err := s.put("crm", "crm", "apiKey", map[string]string{"API_URL": refused, "API_KEY": "good-key"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.put("everything", "ev", "apiKey", map[string]string{"MCP_URL": refused, "API_KEY": "k"}); err != nil {
			t.Fatal(err)
		}
		for _, instance := range []string{"crm", "ev"} {
			r := s.callTool(t, "acme", instance, token, "agent-1", "", nil, nil)
			if r.code != "egress_refused" || !strings.Contains(r.message, "loopback") || strings.Contains(r.raw, "127.0.0.2") {
				t.Errorf("%s: tools/call = %+v, want egress_refused naming the rule only", instance, r)
			}
			var logged bool
			for line := range strings.Lines(s.logs.String()) {
				if strings.Contains(line, "upstream refused by the egress policy") && strings.Contains(line, `"instance":"`+instance+`"`) {
					logged = true
					if !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, `"rule":"loopback"`) || !strings.Contains(line, "127.0.0.2") {
						t.Errorf("%s: log line %s", instance, line)
					}
				}
			}
			if !logged {
				t.Errorf("%s: no warning names the instance:\n%s", instance, s.logs.String())
			}
		}
		if hits.Load() != 0 {
			t.Fatalf("the refused upstream was reached %d times", hits.Load())
		}
		_ = ctx
	})
}
