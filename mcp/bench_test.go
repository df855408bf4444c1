package mcp_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/server"
)

// BenchmarkToolsCall measures one warm tools/call through the whole
// in-process stack (caller auth, allowlist, credentials, dispatch to a
// loopback upstream, audit), against BenchmarkDirect, the same upstream
// call made directly. Compare the two: the difference is the gateway's
// overhead. It also reports that difference itself, measured in the same
// run: sb-allocs/op and sb-B/op are the call's allocations minus those of
// a direct call (the client's and the upstream's, which every call has),
// that is what Switchboard allocates per call. Above maxAllocsPerCall
// the benchmark fails: CI runs it as the allocation gate.
//
//	go test -run '^$' -bench 'ToolsCall$|Direct' -benchmem ./mcp
func BenchmarkToolsCall(b *testing.B) {
	s := newStackWith(b, dbtest.SQLite(b), widgetsSpec, benchConfig(b))
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
	direct := func() { benchDirect(b, client, s) }
	for range 100 {
		call()
		direct()
	}
	// The direct baseline, measured in this run.
	const baselineCalls = 2000
	dAllocs, dBytes := allocsOf(baselineCalls, direct)
	b.ReportAllocs()
	b.ResetTimer()
	allocs, bytes := allocsOf(b.N, call)
	b.StopTimer()
	perCall, perCallBytes := allocs/float64(b.N)-dAllocs/baselineCalls, bytes/float64(b.N)-dBytes/baselineCalls
	b.ReportMetric(perCall, "sb-allocs/op")
	b.ReportMetric(perCallBytes, "sb-B/op")
	// A profile at a finer rate than the default (-memprofilerate 1)
	// counts more (3 to 8 per call in two runs): the gate is for the
	// default rate.
	if b.N >= 1000 && perCall > maxAllocsPerCall && runtime.MemProfileRate >= 512*1024 {
		b.Errorf("Switchboard allocates %.0f times per tools/call (%.0f bytes), more than the gate of %d (goal: 100 and 8 KB)",
			perCall, perCallBytes, maxAllocsPerCall)
	}
}

// maxAllocsPerCall is CI's gate on what Switchboard allocates per
// tools/call: 115 since the count reached 111.0–111.6 (the shared
// credential header; 120, as issue 13 asks, from a count of 115.5; 364
// at the start), with a margin for background goroutines (the audit
// writer, the connection pools): lower it with every cut, never raise it.
const maxAllocsPerCall = 115

// allocsOf runs f n times and returns the allocations and bytes allocated
// meanwhile, by every goroutine.
func allocsOf(n int, f func()) (allocs, bytes float64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs - before.Mallocs), float64(after.TotalAlloc - before.TotalAlloc)
}

// benchConfig gives a benchmark's server what it has in production by
// default: JSON lines at info level (here discarded), and an audit spool
// directory, so that every row goes through the audit journal.
func benchConfig(b testing.TB) func(*server.Config) {
	dir := b.TempDir()
	return func(cfg *server.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
		cfg.Audit.SpoolDir = dir
	}
}

// BenchmarkDirect is the baseline for BenchmarkToolsCall.
func BenchmarkDirect(b *testing.B) {
	s := newStackWith(b, dbtest.SQLite(b), widgetsSpec, benchConfig(b))
	s.tenant(b, "acme", "bench-key", "bench-agent")
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchDirect(b, client, s)
	}
}

// benchDirect calls the upstream of the benchmarks' instance directly.
func benchDirect(b *testing.B, client *http.Client, s *stack) {
	req, _ := http.NewRequest(http.MethodGet, s.up.srv.URL+"/widgets/w1", nil)
	req.Header.Set("X-Api-Key", "bench-key")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
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
			s := newStackWith(b, dbtest.SQLite(b), tc.spec, benchConfig(b))
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
