package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// The fast path answers the two hot methods, tools/list and tools/call,
// for well-formed single requests, without the SDK's per-request session
// (a temporary ServerSession, its connection, goroutines and a second and
// third decoding of the body). Everything it is not sure of goes to the SDK:
// batches, notifications, other methods, unknown tools, cursors, extra
// headers or parameters, ids whose encoding the SDK might change, and any
// request the SDK would refuse. Its answers are the SDK's own: tools/list
// is the body the SDK produced for the same connector and protocol version
// (recorded once, then served with the request's id), and tools/call
// marshals the same *CallToolResult the SDK would, the same way. The
// differential test (fastpath_test.go) holds the two paths to that.
//
// See docs/mcp-sdk-decision.md for the measurements behind it.

// Protocol versions.
const (
	version20250326  = "2025-03-26"
	version20250618  = "2025-06-18"
	versionStateless = "2026-07-28"
	headerVersion    = "Mcp-Protocol-Version"
	headerMethod     = "Mcp-Method"
	headerName       = "Mcp-Name"
	headerParam      = "Mcp-Param-"
)

// legacyVersions are the initialize-era versions the SDK serves.
var legacyVersions = func() map[string]bool {
	m := map[string]bool{}
	for _, v := range sdk.SupportedProtocolVersions() {
		if v < versionStateless {
			m[v] = true
		}
	}
	return m
}()

// listKey names a recorded tools/list answer.
type listKey struct{ server, version string }

// listDoc is a recorded tools/list answer: the SDK's body is
// `{"jsonrpc":"2.0","id":1,` + rest.
type listDoc struct {
	rest []byte
	ok   bool
}

type fastPath struct {
	mu    sync.RWMutex
	lists map[listKey]*listDoc
}

const recordedPrefix = `{"jsonrpc":"2.0","id":1,`

// serveFast answers r when it can; it reports whether it did.
func (h *handler) serveFast(w http.ResponseWriter, r *http.Request, a *authorized, env *envelope, body []byte) bool {
	if env.method != "tools/call" && env.method != "tools/list" {
		return false
	}
	if a.target.Spec() == nil {
		return false // mcp_remote: forwarded by the SDK path (remotetools.go)
	}
	// Last-Event-Id in its canonical form, as net/http stores it:
	// Header.Values("Last-Event-ID") canonicalises its key into a new
	// string on every call.
	if !simpleID(env.id) || len(r.Header["Last-Event-Id"]) > 0 {
		return false
	}
	if baseMediaType(r.Header.Get("Content-Type")) != "application/json" || !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	version := r.Header.Get(headerVersion)
	stateless := version == versionStateless
	if !stateless && version != "" && !legacyVersions[version] {
		return false
	}
	for k := range r.Header {
		if strings.HasPrefix(k, headerParam) {
			return false
		}
	}
	if !stateless && (r.Header.Get(headerMethod) != "" || r.Header.Get(headerName) != "") {
		return false
	}
	if stateless && r.Header.Get(headerMethod) != env.method {
		return false
	}

	// The params: only the members the fast path understands.
	var name string
	var meta, args []byte
	hasName := false
	if env.params != nil {
		if env.params[0] != '{' {
			return false
		}
		var paramsBuf [8]member
		params, _ := scanObject(paramsBuf[:0], env.params)
		for _, p := range params {
			switch {
			case p.key == "_meta":
				if len(p.raw) == 0 || p.raw[0] != '{' {
					return false
				}
				meta = p.raw
			case p.key == "name" && env.method == "tools/call":
				if p.raw[0] != '"' {
					return false
				}
				name, _ = toolName(env) // decoded once per request
				hasName = true
			case p.key == "arguments" && env.method == "tools/call":
				if p.raw[0] != '{' && string(p.raw) != "null" {
					return false
				}
				args = p.raw

			default:
				return false // cursor, task, ...: the SDK's
			}
		}
	}
	if !metaOK(meta, stateless, version) {
		return false
	}
	srv := h.serverFor(a)
	switch env.method {
	case "tools/list":
		return h.fastList(w, r, a, srv, env, version, body)
	default:
		if !hasName {
			return false
		}
		if stateless && r.Header.Get(headerName) != name {
			return false
		}
		return h.fastCall(w, r, a, srv, env, name, args, meta, stateless)
	}
}

// metaOK reports whether params._meta is what the SDK accepts without a
// word: in the stateless era the protocol version (equal to the header)
// and the client capabilities; before it, no per-request version at all.
func metaOK(meta []byte, stateless bool, version string) bool {
	var pv, caps []byte
	if meta != nil {
		var membersBuf [8]member
		members, _ := scanObject(membersBuf[:0], meta)
		for _, m := range members {
			switch m.key {
			case "io.modelcontextprotocol/protocolVersion":
				pv = m.raw
			case "io.modelcontextprotocol/clientCapabilities":
				caps = m.raw
			}
		}
	}
	if !stateless {
		return pv == nil
	}
	var v string
	return decodeString(pv, &v) && v == version && len(caps) > 0 && caps[0] == '{'
}

// simpleID reports whether raw is an id the SDK writes back byte for byte:
// a small integer in canonical form, or a string of plain ASCII.
func simpleID(raw []byte) bool {
	if len(raw) == 0 || len(raw) > 64 {
		return false
	}
	if raw[0] == '"' {
		if len(raw) < 2 || raw[len(raw)-1] != '"' {
			return false
		}
		for _, c := range raw[1 : len(raw)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// acceptsBoth mirrors the SDK's Accept rule: application/json and
// text/event-stream must both be acceptable.
func acceptsBoth(values []string) bool {
	jsonOK, streamOK := false, false
	for _, value := range values {
		for rest, more := value, true; more; {
			var raw string
			raw, rest, more = strings.Cut(rest, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// baseMediaType is the media type of a Content-Type value, "" when it
// does not parse (as the SDK reads it).
func baseMediaType(value string) string {
	if value == "application/json" {
		return value // what every client sends, without the parser's map
	}
	mt, _, err := mime.ParseMediaType(value)
	if err != nil {
		return ""
	}
	return mt
}

// writeResponse writes a JSON-RPC result as the SDK does in JSON mode.
// The body is rest's parts after the envelope, written one after the
// other (the server buffers them) rather than copied into one slice.
func writeResponse(w http.ResponseWriter, id []byte, rest ...[]byte) {
	hd := w.Header()
	hd["Cache-Control"] = noCache
	hd["Content-Type"] = jsonType
	w.WriteHeader(http.StatusOK)
	w.Write(responseStart)
	w.Write(id)
	w.Write(comma)
	for _, p := range rest {
		w.Write(p)
	}
}

// The constant parts of a fast-path response. The header values are
// shared, never modified: set as the server's own (canonical) keys, they
// cost no allocation per response.
var (
	noCache       = []string{"no-cache, no-transform"}
	jsonType      = []string{"application/json"}
	responseStart = []byte(`{"jsonrpc":"2.0","id":`)
	comma         = []byte(",")
	resultStart   = []byte(`"result":`)
	closeBrace    = []byte("}")
)

// fastList serves tools/list from the answer the SDK gave once for this
// connector and protocol version.
func (h *handler) fastList(w http.ResponseWriter, r *http.Request, a *authorized, srv *connServer, env *envelope, version string, body []byte) bool {
	key := listKey{srv.key, version}
	h.fast.mu.RLock()
	doc := h.fast.lists[key]
	h.fast.mu.RUnlock()
	if doc == nil {
		doc = h.recordList(r, a, version)
		h.fast.mu.Lock()
		if h.fast.lists == nil {
			h.fast.lists = map[listKey]*listDoc{}
		}
		h.fast.lists[key] = doc
		h.fast.mu.Unlock()
	}
	if !doc.ok {
		return false
	}
	writeResponse(w, env.id, doc.rest)
	return true
}

// recordList asks the SDK for tools/list once, as a client on version
// would, and keeps its answer.
func (h *handler) recordList(r *http.Request, a *authorized, version string) *listDoc {
	params := `{}`
	if version == versionStateless {
		params = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + versionStateless + `","io.modelcontextprotocol/clientCapabilities":{}}}`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + params + `}`
	req, err := http.NewRequestWithContext(context.WithValue(context.WithoutCancel(r.Context()), authorizedKey{}, a),
		http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
	if err != nil {
		return &listDoc{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer recorded")
	if version != "" {
		req.Header.Set(headerVersion, version)
	}
	if version == versionStateless {
		req.Header.Set(headerMethod, "tools/list")
	}
	rec := newResponseBuffer()
	h.sdk.ServeHTTP(rec, req)
	out := rec.body.Bytes()
	if rec.code() != http.StatusOK || !bytes.HasPrefix(out, []byte(recordedPrefix)) ||
		rec.Header().Get("Content-Type") != "application/json" || bytes.Contains(out, []byte(`"nextCursor"`)) {
		return &listDoc{}
	}
	return &listDoc{rest: bytes.Clone(out[len(recordedPrefix):]), ok: true}
}

// fastCall makes the call the SDK's tool handler would make, with the
// request's arguments and params._meta (args and meta, raw; nil when
// absent), and writes its result as the SDK does.
func (h *handler) fastCall(w http.ResponseWriter, r *http.Request, a *authorized, srv *connServer, env *envelope, name string, args, meta []byte, stateless bool) bool {
	e, ok := srv.entities[name]
	if !ok {
		return false // unknown tool: the SDK's -32602
	}
	// params._meta.targetUserId, when it is a string (as the handler
	// reads it from the SDK's map).
	var target string
	if meta != nil {
		var membersBuf [8]member
		members, _ := scanObject(membersBuf[:0], meta)
		for _, m := range members {
			switch m.key {
			case gateway.TargetUserArg:
				decodeString(m.raw, &target)
			case registry.AppMetaKey:
				return false // a view's call: the SDK path refuses it (apps.go)
			}
		}
	}
	resp, res := h.callEntity(gateway.WithSurfaceIn(&a.callCtx, r.Context(), a.surface), e, a.principal, a.target, a.log, args, target, true, &a.resp)
	if res == nil {
		// A success: rendered from the upstream's bytes when it can be.
		buf := resultBuffers.Get().(*[]byte)
		defer putResultBuffer(buf)
		out := *buf
		if stateless {
			out = append(append(out, `{"_meta":`...), srv.statelessMeta...)
			out = append(out, ',')
		}
		rendered, ok := appendSuccess(out, resp)
		if ok {
			if stateless {
				// The SDK's {"_meta":..,"content":..}, its own opening
				// brace dropped.
				rendered = append(rendered[:len(out)], rendered[len(out)+1:]...)
				rendered = append(rendered[:len(rendered)-1], `,"resultType":"complete"}`...)
			}
			*buf = rendered
			writeResponse(w, env.id, resultStart, rendered, closeBrace)
			return true
		}
		res = successResult(resp, e.OutputSchema != nil)
	}
	if res.Content == nil {
		res.Content = []sdk.Content{}
	}
	if stateless {
		// As the SDK does for the stateless era (SEP-2575): the server
		// names itself in every result's _meta.
		if res.Meta == nil {
			res.Meta = sdk.Meta{}
		}
		if _, ok := res.Meta[sdk.MetaKeyServerInfo]; !ok {
			res.Meta[sdk.MetaKeyServerInfo] = srv.impl
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		return false
	}
	if stateless {
		// The SDK marks a complete result for clients of the stateless
		// era; its marshaller writes the member last.
		out = append(out[:len(out)-1], `,"resultType":"complete"}`...)
	}
	writeResponse(w, env.id, resultStart, out, closeBrace)
	return true
}
