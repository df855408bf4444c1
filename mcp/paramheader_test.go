package mcp_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// The describe action's target argument is mirrored into Mcp-Param-Target
// on the 2026-07-28 transport (x-mcp-header, SEP-2243): the header must be
// present and equal to the body value, plain or Base64-wrapped; a request
// without it, with a different value or with broken Base64 is refused
// before the tool runs. Other calls need no header.
func TestTargetParamHeader(t *testing.T) {
	t.Parallel()
	s := newStack(t, dbtest.SQLite(t))
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	srv := s.srv
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(args, header string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"widgets","arguments":` + args + `}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/acme/webhooks/shop.mcp", bytes.NewReader([]byte(body)))
		for k, v := range map[string]string{"Authorization": "Bearer " + tok, "X-Agent-Id": "agent-1", "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "widgets"} {
			req.Header.Set(k, v)
		}
		if header != "" {
			req.Header.Set("Mcp-Param-Target", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	describe := `{"action":"describe","target":"get"}`
	cases := []struct {
		name, args, header string
		status             int
		want               string
	}{
		{"header matches", describe, "get", 200, `"result"`},
		{"Base64-wrapped header matches", describe, "=?base64?Z2V0?=", 200, `"result"`},
		{"header missing", describe, "", 400, "-32020"},
		{"header differs", describe, "list", 400, "-32020"},
		{"broken Base64", describe, "=?base64?Z2V0!!?=", 400, "-32020"},
		{"header without the argument", `{"action":"get","id":"w1"}`, "get", 400, "-32020"},
		{"no annotated argument, no header", `{"action":"get","id":"w1"}`, "", 200, `"result"`},
	}
	hits := s.up.hits.Load()
	for _, c := range cases {
		st, body := post(c.args, c.header)
		if st != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %.300s, want %d with %s", c.name, st, body, c.status, c.want)
		}
	}
	// describe is answered locally; only the one plain get reached upstream.
	if n := s.up.hits.Load() - hits; n != 1 {
		t.Errorf("upstream hits = %d, want 1", n)
	}
}
