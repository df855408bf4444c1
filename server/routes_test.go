package server_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

var update = flag.Bool("update", false, "rewrite testdata/routes.golden")

// TestRoutes pins what the server answers, by method and path, on every
// surface and around them (unknown paths, wrong methods, trailing
// slashes): status, Allow, content type and error code. The golden file
// was recorded before the whole server moved onto one echo router, so a
// change of router that changes an answer fails here.
func TestRoutes(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t)})
	requests := []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"HEAD", "/healthz"}, {"POST", "/healthz"}, {"GET", "/openapi.json"},
		{"GET", "/v1/tenants"}, {"PATCH", "/v1/tenants"}, {"GET", "/v1/nothing"}, {"GET", "/"}, {"GET", "/nothing"},
		{"POST", "/workspaces/acme/webhooks/shop.mcp"}, {"GET", "/workspaces/acme/webhooks/shop.mcp"},
		{"DELETE", "/workspaces/acme/webhooks/shop.mcp"}, {"PUT", "/workspaces/acme/webhooks/shop.mcp"},
		{"POST", "/workspaces/acme/webhooks/shop.mcp/"}, {"POST", "/workspaces/acme/webhooks/shop"},
		{"POST", "/workspaces/acme/webhooks/.mcp"}, {"POST", "/workspaces/acme/webhooks/a/b.mcp"}, {"POST", "/workspaces/acme/webhooks/"}, {"POST", "/workspaces/acme/mcp"},
		{"POST", "/workspaces/acme"}, {"POST", "/workspaces/"}, {"GET", "/workspaces/"},
		{"POST", "/workspaces/%61cme/webhooks/shop.mcp"}, {"POST", "/workspaces/acme/webhooks/sh%2Fop.mcp"},
		{"POST", "/workspaces/acme/apps/shop/ops/getWidget"}, {"GET", "/workspaces/acme/apps/shop/ops/getWidget"},
		{"DELETE", "/workspaces/acme/apps/shop/ops/getWidget"}, {"POST", "/workspaces/acme/apps/shop"},
		{"POST", "/workspaces/acme/apps/shop/ops/"}, {"POST", "/workspaces/acme/apps/shop/ops/a/b"}, {"GET", "/workspaces/acme/apps/"},
		{"GET", "/workspaces/acme/webhooks/shop/oauth/connect"}, {"POST", "/workspaces/acme/webhooks/shop/oauth/connect"},
		{"DELETE", "/workspaces/acme/webhooks/shop/oauth/connect"}, {"GET", "/workspaces/acme/webhooks/shop/oauth/callback"},
		{"POST", "/workspaces/acme/webhooks/shop/oauth/callback"}, {"GET", "/workspaces/acme/webhooks/shop/oauth/status"},
		{"POST", "/workspaces/acme/webhooks/shop/oauth/disconnect"}, {"DELETE", "/workspaces/acme/webhooks/shop/oauth/disconnect"},
		{"GET", "/workspaces/acme/webhooks/shop/oauth/disconnect"}, {"GET", "/workspaces/acme/webhooks/shop/oauth/other"},
		{"GET", "/workspaces/acme/webhooks/shop/oauth/"},
		{"GET", "/oauth/callback"}, {"POST", "/oauth/callback"}, {"GET", "/oauth/callback/"}, {"GET", "/oauth/other"},
		{"GET", "/.well-known/oauth-protected-resource/workspaces/acme/webhooks/shop.mcp"},
		{"HEAD", "/.well-known/oauth-protected-resource/workspaces/acme/webhooks/shop.mcp"},
		{"POST", "/.well-known/oauth-protected-resource/workspaces/acme/webhooks/shop.mcp"},
		{"GET", "/.well-known/oauth-protected-resource/workspaces/acme/other"}, {"GET", "/.well-known/other"},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var b strings.Builder
	for _, rq := range requests {
		req, err := http.NewRequest(rq.method, srv.URL+rq.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&b, "%-6s %-75s %d allow=%q type=%q code=%q\n", rq.method, rq.path, resp.StatusCode,
			resp.Header.Get("Allow"), strings.Split(resp.Header.Get("Content-Type"), ";")[0], errorCode(body))
	}
	golden := filepath.Join("testdata", "routes.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("answers differ from %s (-want +got):\n%s", golden, diffLines(string(want), got))
	}
}

// errorCode is the error code of an error body: {"error": {"code"}} or a
// JSON-RPC error's data.code.
func errorCode(body []byte) string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil {
		return ""
	}
	var e struct {
		Code any `json:"code"`
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	}
	json.Unmarshal(v.Error, &e)
	if e.Data.Code != "" {
		return e.Data.Code
	}
	return fmt.Sprint(e.Code)
}

// diffLines lists the lines of want and got that differ.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "-%s\n+%s\n", wl, gl)
		}
	}
	return b.String()
}
