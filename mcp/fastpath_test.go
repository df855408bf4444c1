package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
)

// differential is one stack served twice: by an endpoint with its fast
// path and by one that sends everything through the SDK.
type differential struct {
	s                *stack
	tok              string
	fast, slow       http.Handler
	fastSrv, slowSrv *httptest.Server
}

func newDifferential(t *testing.T) *differential {
	d := &differential{s: newStack(t, dbtest.SQLite(t))}
	d.tok = d.s.tenant(t, "acme", canaryA, "agent-1")
	d.fast = mcp.NewHandler(d.s.gw, mcp.Options{})
	d.slow = mcp.NewHandler(d.s.gw, mcp.Options{DisableFastPath: true})
	d.fastSrv, d.slowSrv = httptest.NewServer(d.fast), httptest.NewServer(d.slow)
	t.Cleanup(d.fastSrv.Close)
	t.Cleanup(d.slowSrv.Close)
	return d
}

// TestFastPathMatchesSDK sends the same requests to the endpoint with its
// fast path and to one that sends everything through the SDK, for every
// protocol version, and requires byte-identical answers (status, the
// headers the SDK sets, body).
func TestFastPathMatchesSDK(t *testing.T) {
	t.Parallel()
	d := newDifferential(t)
	tok, fast, slow, fastSrv, slowSrv := d.tok, d.fast, d.slow, d.fastSrv, d.slowSrv

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
		// Arguments that are all strings go down the fast path as a
		// list (no map), the SDK's path as a map: the same calls.
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"id":"w1","action":"get"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"w\u0031"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"w1","extra":"x"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"id":"w1"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"nope","id":"w1"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":""}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"a/b?c#d%2F"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":"w1","targetUserId":"u1"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"get","id":5}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"list","limit":"2"}}`},
		{"tools/call", "widgets", `{"name":"widgets","arguments":{"action":"create","body":"x"}}`},
		{"tools/call", "gadgets", `{"name":"gadgets","arguments":{}}`},
	}
	versions := []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}
	ids := []string{`1`, `"req-7"`, `-42`}
	send := func(url, version string, c call, id string) (int, http.Header, []byte) {
		return sendRaw(t, url, tok, version, c.method, c.name, c.params, message(version, id, c.method, c.params))
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

// metaParams adds the per-request _meta of the 2026-07-28 era to params.
func metaParams(version, params string) string {
	if version != "2026-07-28" {
		return params
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	switch params {
	case ``, `{}`:
		return `{` + meta + `}`
	default:
		return `{` + meta + `,` + params[1:]
	}
}

// message is a JSON-RPC message of version; id "" makes a notification.
func message(version, id, method, params string) string {
	body := `{"jsonrpc":"2.0"`
	if id != "" {
		body += `,"id":` + id
	}
	body += `,"method":"` + method + `"`
	if params = metaParams(version, params); params != "" {
		body += `,"params":` + params
	}
	return body + `}`
}

// sendRaw posts body to the instance shop of tenant acme on url, with the
// headers a client of version sends for method, tool name and params.
func sendRaw(t *testing.T, url, tok, version, method, name, params, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/workspaces/acme/webhooks/shop.mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Agent-Id", "agent-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if version == "2026-07-28" && method != "" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		if strings.Contains(params, `"target":"get"`) {
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

// TestFastPathRefusesWhatSDKRefuses sends batches, unusual ids, deep
// nesting and unknown methods to the endpoint with its fast path and to
// one without it, for every protocol version: the answers are identical,
// the fast path answers no batch, and each answer is the one JSON-RPC and
// MCP ask for.
func TestFastPathRefusesWhatSDKRefuses(t *testing.T) {
	t.Parallel()
	d := newDifferential(t)
	s, tok, fast, fastSrv, slowSrv := d.s, d.tok, d.fast, d.fastSrv, d.slowSrv

	const get = `{"name":"widgets","arguments":{"action":"get","id":"w1"}}`
	nested := func(depth int) string { // the whole message nests depth deep
		return `{"name":"widgets","arguments":{"action":"get","id":"w1","x":` +
			strings.Repeat("[", depth-3) + strings.Repeat("]", depth-3) + `}}`
	}
	batchOf := func(v string, n int) string {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = message(v, fmt.Sprint(i+1), "tools/list", "")
		}
		return "[" + strings.Join(msgs, ",") + "]"
	}
	legacyBatch := func(v string) bool { return v == "" || v == "2025-03-26" }
	type edge struct {
		name, method, tool, params string
		body                       func(v string) string
		// status and body (a substring) wanted, by version.
		want func(v string) (int, string)
		// calls is how many upstream calls the request may make.
		calls int
	}
	fixed := func(status int, sub string) func(string) (int, string) {
		return func(string) (int, string) { return status, sub }
	}
	batchOnly := func(sub string) func(string) (int, string) {
		return func(v string) (int, string) {
			if legacyBatch(v) {
				return 200, sub
			}
			return 400, "batching is not supported"
		}
	}
	id := func(id, method, params string) func(string) string {
		return func(v string) string { return message(v, id, method, params) }
	}
	edges := []edge{
		{name: "batch of one tools/call", method: "tools/call", tool: "widgets", params: get,
			body:  func(v string) string { return "[" + message(v, "1", "tools/call", get) + "]" },
			want:  batchOnly(`[{"jsonrpc":"2.0","id":1,"result":`),
			calls: 1},
		{name: "batch of one tools/list", body: func(v string) string { return batchOf(v, 1) },
			want: batchOnly(`[{"jsonrpc":"2.0","id":1,"result":{`)},
		{name: "batch of 32", body: func(v string) string { return batchOf(v, mcp.MaxBatch) },
			want: batchOnly(`{"jsonrpc":"2.0","id":32,"result":{`)},
		{name: "batch of 33", body: func(v string) string { return batchOf(v, mcp.MaxBatch+1) },
			want: fixed(400, `"code":-32600,"message":"invalid_request: a JSON-RPC batch may hold at most 32 messages`)},
		{name: "batch of 200 tools/call", body: func(v string) string {
			msgs := make([]string, 200)
			for i := range msgs {
				msgs[i] = message(v, fmt.Sprint(i+1), "tools/call", get)
			}
			return "[" + strings.Join(msgs, ",") + "]"
		}, want: fixed(400, `"code":-32600,"message":"invalid_request: a JSON-RPC batch may hold at most 32 messages; this one holds 200"`)},
		{name: "batch with an unknown method and notification",
			body: func(v string) string {
				return "[" + message(v, "1", "tools/list", "") + "," + message(v, `"u"`, "no/such", "") + "," + message(v, "", "notifications/nope", "") + "]"
			},
			want: batchOnly(`{"jsonrpc":"2.0","id":"u","error":{"code":-32601,"message":"method_not_found: the server has no method \"no/such\""`)},
		{name: "batch of unknown notifications", body: func(v string) string { return "[" + message(v, "", "notifications/nope", "") + "]" },
			want: func(v string) (int, string) {
				if legacyBatch(v) {
					return 202, ""
				}
				return 400, "batching is not supported"
			}},
		{name: "id 1.5", method: "tools/list", body: id("1.5", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id 1e3", method: "tools/list", body: id("1e3", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id -0", method: "tools/list", body: id("-0", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id 2^64", method: "tools/list", body: id("12345678901234567890", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id true", method: "tools/list", body: id("true", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id null", method: "tools/list", body: id("null", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id 2^63-1", method: "tools/list", body: id("9223372036854775807", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id 2^53", method: "tools/list", body: id("9007199254740992", "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id 2^53-1", method: "tools/call", tool: "widgets", params: get, body: id("9007199254740991", "tools/call", get),
			want: fixed(200, `{"jsonrpc":"2.0","id":9007199254740991,"result":`), calls: 1},
		{name: "id -(2^53-1)", method: "tools/call", tool: "widgets", params: get, body: id("-9007199254740991", "tools/call", get),
			want: fixed(200, `{"jsonrpc":"2.0","id":-9007199254740991,"result":`), calls: 1},
		{name: "id lone surrogate", method: "tools/list", body: id(`"a\ud800"`, "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id lone low surrogate", method: "tools/list", body: id(`"\udc00\ud83d\ude00"`, "tools/list", ""), want: fixed(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`)},
		{name: "id surrogate pair", method: "tools/list", body: id(`"\\u\ud83d\ude00\n"`, "tools/list", ""), want: fixed(200, `"result":`)},
		{name: "id string with escapes", method: "tools/call", tool: "widgets", params: get, body: id(`"a\u0041<"`, "tools/call", get),
			want: fixed(200, `"result":`), calls: 1},
		{name: "id 0", method: "tools/call", tool: "widgets", params: get, body: id("0", "tools/call", get),
			want: fixed(200, `{"jsonrpc":"2.0","id":0,"result":`), calls: 1},
		{name: "nesting at the limit", method: "tools/call", tool: "widgets", params: nested(mcp.MaxNesting), body: id("1", "tools/call", nested(mcp.MaxNesting)),
			want: fixed(200, `{"jsonrpc":"2.0","id":1,"result":`)},
		{name: "nesting past the limit", method: "tools/call", tool: "widgets", params: nested(mcp.MaxNesting + 1), body: id("1", "tools/call", nested(mcp.MaxNesting+1)),
			want: fixed(400, `"code":-32600,"message":"invalid_request: the request nests objects and arrays more than 64 deep"`)},
		{name: "nesting 1,001", method: "tools/call", tool: "widgets", params: nested(1001), body: id("1", "tools/call", nested(1001)),
			want: fixed(400, `"code":-32600`)},
		{name: "nesting 10,000", method: "tools/call", tool: "widgets", params: nested(10_000), body: id("1", "tools/call", nested(10_000)),
			want: fixed(400, `"code":-32600`)},
		{name: "nested batch", body: func(v string) string { return "[[" + message(v, "1", "tools/list", "") + "]]" },
			want: fixed(400, `"code":-32600`)},
		{name: "unknown method", method: "no/such", body: id("7", "no/such", ""),
			want: func(v string) (int, string) {
				if v == "2026-07-28" {
					return 404, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601`
				}
				return 200, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method_not_found: the server has no method \"no/such\""`
			}},
		{name: "unknown method, huge name", method: "x", body: id("7", strings.Repeat("x", 100_000), ""),
			want: func(v string) (int, string) {
				if v == "2026-07-28" {
					return 404, `"code":-32601`
				}
				return 200, `"code":-32601`
			}},
		{name: "missing resource", method: "resources/read", tool: "widgets://nope", body: id("3", "resources/read", `{"uri":"widgets://nope"}`), params: `{"uri":"widgets://nope"}`,
			want: func(v string) (int, string) {
				if v == "2026-07-28" {
					return 400, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"widgets://nope"}}}`
				}
				return 200, `{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"widgets://nope"}}}`
			}},
		{name: "unknown notification", method: "notifications/nope", body: id("", "notifications/nope", ""), want: fixed(202, "")},
	}
	for _, v := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		for _, e := range edges {
			name := fmt.Sprintf("%s v=%q", e.name, v)
			body := e.body(v)
			servedBefore, hitsBefore := mcp.FastServed(fast), s.up.hits.Load()
			fs, fh, fb := sendRaw(t, fastSrv.URL, tok, v, e.method, e.tool, e.params, body)
			ss, sh, sb := sendRaw(t, slowSrv.URL, tok, v, e.method, e.tool, e.params, body)
			if fs != ss || !sameAnswers(fb, sb) || fh.Get("Content-Type") != sh.Get("Content-Type") {
				t.Errorf("%s:\nfast %d %.500s\nsdk  %d %.500s", name, fs, fb, ss, sb)
			}
			status, sub := e.want(v)
			if fs != status || !strings.Contains(string(fb), sub) {
				t.Errorf("%s: got %d %.300s\nwant %d and %s", name, fs, fb, status, sub)
			}
			if len(fb) > 2000 && e.name == "unknown method, huge name" {
				t.Errorf("%s: %d bytes answered", name, len(fb))
			}
			if strings.HasPrefix(body, "[") && mcp.FastServed(fast) != servedBefore {
				t.Errorf("%s: the fast path answered a batch", name)
			}
			if hits := s.up.hits.Load() - hitsBefore; hits > int64(2*e.calls) || (fs >= 400 && hits != 0) {
				t.Errorf("%s: %d upstream calls (status %d)", name, hits, fs)
			}
		}
	}
}

// sameAnswers reports whether a and b are the same answer: equal bytes,
// or batch answers with the same elements in any order (the SDK writes
// them as they complete).
func sameAnswers(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ea, eb []json.RawMessage
	if json.Unmarshal(a, &ea) != nil || json.Unmarshal(b, &eb) != nil || len(ea) != len(eb) {
		return false
	}
	sorted := func(e []json.RawMessage) []string {
		out := make([]string, len(e))
		for i, m := range e {
			out[i] = string(m)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(sorted(ea), sorted(eb))
}

// TestFastPathLeavesResumptionToSDK: a POST that carries Last-Event-ID,
// however the client spells the name, is not the fast path's (a stream's
// resumption is the SDK's), and the answer is the SDK handler's.
func TestFastPathLeavesResumptionToSDK(t *testing.T) {
	t.Parallel()
	d := newDifferential(t)
	const params = `{"name":"widgets","arguments":{"action":"get","id":"w1"}}`
	body := message("2025-06-18", "1", "tools/call", params)
	for _, name := range []string{"Last-Event-ID", "last-event-id", "Last-Event-Id"} {
		answer := func(url string) (int, []byte) {
			req, _ := http.NewRequest(http.MethodPost, url+"/workspaces/acme/webhooks/shop.mcp", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+d.tok)
			req.Header.Set("X-Agent-Id", "agent-1")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			req.Header[name] = []string{"7"} // as the client spells it
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		before := mcp.FastServed(d.fast)
		fs, fb := answer(d.fastSrv.URL)
		ss, sb := answer(d.slowSrv.URL)
		if got := mcp.FastServed(d.fast); got != before {
			t.Errorf("%s: the fast path answered a request with Last-Event-ID", name)
		}
		if fs != ss || !bytes.Equal(fb, sb) {
			t.Errorf("%s:\nfast %d %s\nsdk  %d %s", name, fs, fb, ss, sb)
		}
	}
	// Without it, the same request is the fast path's.
	before := mcp.FastServed(d.fast)
	if s, _, b := sendRaw(t, d.fastSrv.URL, d.tok, "2025-06-18", "tools/call", "widgets", params, body); s != 200 {
		t.Fatalf("status %d %s", s, b)
	}
	if mcp.FastServed(d.fast) != before+1 {
		t.Errorf("the fast path did not answer the request without Last-Event-ID")
	}
}
