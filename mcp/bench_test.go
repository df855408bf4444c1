package mcp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// BenchmarkToolsCall measures one warm tools/call through the whole
// in-process stack (caller auth, allowlist, credentials, dispatch to a
// loopback upstream), against BenchmarkDirect, the same upstream call made
// directly. Compare the two: the difference is the gateway's overhead.
//
//	go test -run '^$' -bench 'ToolsCall|Direct' ./mcp
func BenchmarkToolsCall(b *testing.B) {
	s := newStack(b, dbtest.SQLite(b))
	token := s.tenant(b, "acme", "bench-key", "bench-agent")
	url := s.mcpURL("acme", "shop")
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"widgets","arguments":{"action":"get","id":"w1"}}}`)
	client := &http.Client{}
	call := func() {
		out := benchPost(b, client, url, token, "2025-06-18", body)
		if strings.Contains(string(out), `"isError":true`) {
			b.Fatalf("%s", out)
		}
	}
	call()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
}

// BenchmarkDirect is the baseline for BenchmarkToolsCall.
func BenchmarkDirect(b *testing.B) {
	s := newStack(b, dbtest.SQLite(b))
	s.tenant(b, "acme", "bench-key", "bench-agent")
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest(http.MethodGet, s.up.srv.URL+"/widgets/w1", nil)
		req.Header.Set("X-Api-Key", "bench-key")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
}

// manyOperationsSpec is an OpenAPI description of n entities with 13
// operations each (list, search, count, create, get, update, delete,
// archive, restore, history, children, add a child, export).
func manyOperationsSpec(n int) string {
	paths := make([]string, 0, 8*n)
	for i := range n {
		e := fmt.Sprintf("things%03d", i)
		op := func(method, action string, body bool) string {
			s := fmt.Sprintf(`%q: {"operationId": "%s_%s", "x-entity": %q, "x-action": %q, "summary": "%s a %s",
				"description": "%s the %s of the account; the answer is the object as stored.",`, method, action, e, e, action, action, e, action, e)
			if body {
				s += `"requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},`
			}
			if method == "get" {
				s += `"parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}}],`
			}
			return s + `"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}}`
		}
		id := `"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]`
		paths = append(paths,
			fmt.Sprintf(`"/%s": {%s, %s}`, e, op("get", "list", false), op("post", "create", true)),
			fmt.Sprintf(`"/%s/search": {%s}`, e, op("get", "search", false)),
			fmt.Sprintf(`"/%s/count": {%s}`, e, op("get", "count", false)),
			fmt.Sprintf(`"/%s/export": {%s}`, e, op("post", "export", false)),
			fmt.Sprintf(`"/%s/{id}": {%s, %s, %s, %s}`, e, id, op("get", "get", false), op("put", "update", true), op("delete", "delete", false)),
			fmt.Sprintf(`"/%s/{id}/archive": {%s, %s}`, e, id, op("post", "archive", false)),
			fmt.Sprintf(`"/%s/{id}/restore": {%s, %s}`, e, id, op("post", "restore", false)),
			fmt.Sprintf(`"/%s/{id}/history": {%s, %s}`, e, id, op("get", "history", false)),
			fmt.Sprintf(`"/%s/{id}/children": {%s, %s, %s}`, e, id, op("get", "children", false), op("post", "add_child", true)))
	}
	return `{"openapi": "3.0.3", "info": {"title": "Things", "version": "1"}, "paths": {` + strings.Join(paths, ",") + `},
  "components": {"schemas": {"Thing": {"type": "object", "required": ["name"], "properties": {
    "id": {"type": "string"}, "name": {"type": "string", "maxLength": 200}, "status": {"type": "string", "enum": ["active", "archived"]},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}}, "created": {"type": "integer"}}}}}}`
}

// BenchmarkToolsList measures tools/list as the endpoint serves it (caller
// authentication, allowlist, the recorded SDK answer written with the
// request's id) for the widgets connector and for one of 520 operations
// in 40 tools (the most a connector has), the DESIGN §7 budget's size:
//
//	go test -run '^$' -bench ToolsList ./mcp
func BenchmarkToolsList(b *testing.B) {
	for _, tc := range []struct {
		name, spec string
	}{{"widgets", widgetsSpec}, {"520ops", manyOperationsSpec(40)}} {
		b.Run(tc.name, func(b *testing.B) {
			s := newStackSpec(b, dbtest.SQLite(b), tc.spec)
			token := s.tenant(b, "acme", "bench-key", "bench-agent")
			url := s.mcpURL("acme", "shop")
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			client := &http.Client{}
			var size int
			call := func() {
				out := benchPost(b, client, url, token, "2025-11-25", body)
				if !bytes.Contains(out, []byte(`"tools":[`)) {
					b.Fatalf("%.300s", out)
				}
				size = len(out)
			}
			call()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call()
			}
			b.ReportMetric(float64(size), "resp-bytes")
		})
	}
}

// benchPost sends body to url as the caller of token, agent bench-agent, on
// protocol version, and returns the answer, which must be a 200.
func benchPost(b *testing.B, client *http.Client, url, token, version string, body []byte) []byte {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-Id", "bench-agent")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%d %.300s", resp.StatusCode, out)
	}
	return out
}
