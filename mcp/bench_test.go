package mcp_test

import (
	"bytes"
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
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Agent-Id", "bench-agent")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(out), `"isError":true`) {
			b.Fatalf("%d %s", resp.StatusCode, out)
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
