package mcp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
)

// TestFastPathMatchesSDK sends the same requests to the endpoint with its
// fast path and to one that sends everything through the SDK, for every
// protocol version, and requires byte-identical answers (status, the
// headers the SDK sets, body).
func TestFastPathMatchesSDK(t *testing.T) {
	t.Parallel()
	s := newStack(t, dbtest.SQLite(t))
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	fast := mcp.NewHandler(s.gw, mcp.Options{})
	slow := mcp.NewHandler(s.gw, mcp.Options{DisableFastPath: true})
	fastSrv, slowSrv := httptest.NewServer(fast), httptest.NewServer(slow)
	t.Cleanup(fastSrv.Close)
	t.Cleanup(slowSrv.Close)

	type call struct{ method, name, params string }
	calls := []call{
		{"tools/list", "", `{}`},
		{"tools/list", "", ``},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"w1"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"a<b>&c\"é"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"list","limit":2}}`},
		{"tools/call", "status", `{"name":"status","arguments":{"action":"get"}}`},
		{"tools/call", "status", `{"name":"status"}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"delete","id":"w1"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"describe","target":"get"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"missing"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"slow-down"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"explode"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"list","limit":"many"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":null}`},
		{"tools/call", "gadgets", `{"name":"gadgets","arguments":{}}`},
	}
	versions := []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}
	ids := []string{`1`, `"req-7"`, `-42`}
	send := func(url, version string, c call, id string) (int, http.Header, []byte) {
		params := c.params
		if version == "2026-07-28" {
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
			switch params {
			case ``, `{}`:
				params = `{` + meta + `}`
			default:
				params = `{` + meta + `,` + params[1:]
			}
		}
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + c.method + `"`
		if params != "" {
			body += `,"params":` + params
		}
		body += `}`
		req, _ := http.NewRequest(http.MethodPost, url+"/workspaces/acme/webhooks/shop.mcp", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Agent-Id", "agent-1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header.Set("MCP-Protocol-Version", version)
		}
		if version == "2026-07-28" {
			req.Header.Set("Mcp-Method", c.method)
			if c.name != "" {
				req.Header.Set("Mcp-Name", c.name)
			}
			if strings.Contains(c.params, `"target":"get"`) {
				req.Header.Set("Mcp-Param-Target", "get") // x-mcp-header (SEP-2243)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	for _, v := range versions {
		for _, c := range calls {
			for _, id := range ids {
				name := fmt.Sprintf("%s %s %s id=%s", v, c.method, c.params, id)
				fs, fh, fb := send(fastSrv.URL, v, c, id)
				ss, sh, sb := send(slowSrv.URL, v, c, id)
				if fs != ss || !bytes.Equal(fb, sb) {
					t.Errorf("%s:\nfast %d %s\nsdk  %d %s", name, fs, fb, ss, sb)
				}
				for _, hd := range []string{"Content-Type", "Cache-Control", "Mcp-Session-Id"} {
					if fh.Get(hd) != sh.Get(hd) {
						t.Errorf("%s: %s fast %q, sdk %q", name, hd, fh.Get(hd), sh.Get(hd))
					}
				}
				if fs != 200 && c.name != "gadgets" {
					t.Errorf("%s: status %d %s", name, fs, fb)
				}
			}
		}
	}
	// The fast path did answer: everything but the unknown tool, and the
	// 2026-07-28 describe call, whose Mcp-Param-Target header (x-mcp-header)
	// sends it down the SDK path.
	want := int64(len(versions)*len(ids)*(len(calls)-1) - len(ids))
	if got := mcp.FastServed(fast); got != want {
		t.Errorf("fast path answered %d requests, want %d", got, want)
	}
	if got := mcp.FastServed(slow); got != 0 {
		t.Errorf("the SDK-only handler's fast path answered %d", got)
	}
}
