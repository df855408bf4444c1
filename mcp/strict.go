package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The JSON-RPC decoding path is strict: every request is checked here
// before anything — our fast path or the SDK, whose decoder matches member
// names case-insensitively — reads it. An object of the envelope, of its
// params, of params._meta or of params.arguments that repeats a member, or
// whose member name differs from a name the protocol reads only by case,
// Unicode folding or control characters (a trailing NUL), is refused with
// -32600: such a request could select a different method or tool in one
// parser than in another.

// member is one name/value pair of a JSON object, in document order.
type member struct {
	key string
	raw []byte
}

// envelope is a single JSON-RPC message, split strictly.
type envelope struct {
	method  string
	id      []byte // raw; nil when absent
	params  []byte // raw; nil when absent
	jsonrpc string
	raw     []byte // the whole message
	name    string // params.name of a tools/call, once toolName read it

	// The flags after the other fields, in one word: an envelope is part
	// of the MCP handler's per-request allocation (requestState), which
	// they keep in its size class.
	hasMethod bool
	result    bool
	error     bool
	nameRead  bool // name is set
}

// Member names the protocol reads, by object.
var (
	envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsKeys   = []string{"name", "arguments", "cursor", "_meta", "uri", "protocolVersion", "capabilities", "clientInfo", "level", "ref", "argument", "task", "requestState", "inputResponses"}
	metaKeys     = []string{"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel", "progressToken", "targetUserId", "io.modelcontextprotocol/ui"}
)

// Limits of a request body, applied before the fast path or the SDK reads
// it, so that both accept and refuse the same bodies.
const (
	// MaxBatch is the most messages a JSON-RPC batch may hold. Batches are
	// only accepted from clients of protocol version 2025-03-26 or that send
	// no version (2025-06-18 removed them); each message may call an
	// upstream, so an unbounded batch multiplies one request's cost.
	MaxBatch = 32
	// MaxNesting is the deepest nesting of objects and arrays a request
	// body may have, counting the message itself as 1. The SDK's decoder
	// refuses more than 1,000 and encoding/json more than 10,000; one limit
	// checked here, lower than both, decides for every path.
	MaxNesting = 64
)

// strictError says why a message is refused.
type strictError string

func (e strictError) Error() string { return string(e) }

// parseMessages splits body (valid JSON, trimmed) into its messages: one
// object, or the objects of a non-empty batch array. The body must be
// valid UTF-8.
func parseMessages(body []byte) ([]envelope, bool, error) { return parseMessagesInto(nil, body) }

// parseMessagesInto is parseMessages appending a single message to dst.
func parseMessagesInto(dst []envelope, body []byte) ([]envelope, bool, error) {
	if !utf8.Valid(body) {
		// JSON text is UTF-8 (RFC 8259); decoders differ on what else means.
		return nil, false, strictError("the request body is not valid UTF-8")
	}
	if tooDeep(body, MaxNesting) {
		return nil, body[0] == '[', strictError(fmt.Sprintf("the request nests objects and arrays more than %d deep", MaxNesting))
	}
	if body[0] == '[' {
		elems, ok := scanArray(body)
		if !ok || len(elems) == 0 {
			return nil, true, strictError("a JSON-RPC batch must be a non-empty array of messages")
		}
		if len(elems) > MaxBatch {
			return nil, true, strictError(fmt.Sprintf("a JSON-RPC batch may hold at most %d messages; this one holds %d", MaxBatch, len(elems)))
		}
		out := make([]envelope, 0, len(elems))
		for _, e := range elems {
			env, err := parseEnvelope(e)
			if err != nil {
				return nil, true, err
			}
			out = append(out, env)
		}
		return out, true, nil
	}
	env, err := parseEnvelope(body)
	if err != nil {
		return nil, false, err
	}
	return append(dst, env), false, nil
}

func parseEnvelope(raw []byte) (envelope, error) {
	env := envelope{raw: raw}
	var membersBuf [8]member
	members, ok := scanObject(membersBuf[:0], raw)
	if !ok {
		return env, strictError("a JSON-RPC message must be an object")
	}
	if err := checkMembers(members, envelopeKeys); err != nil {
		return env, err
	}
	for _, m := range members {
		switch m.key {
		case "jsonrpc":
			if !decodeString(m.raw, &env.jsonrpc) {
				return env, strictError(`a JSON-RPC message must have "jsonrpc": "2.0"`)
			}
		case "id":
			env.id = m.raw
		case "method":
			if !decodeString(m.raw, &env.method) {
				return env, strictError(`a JSON-RPC request must have a string "method"`)
			}
			env.hasMethod = true
		case "params":
			env.params = m.raw
		case "result":
			env.result = true
		case "error":
			env.error = true
		}
	}
	if env.id != nil && !validID(env.id) && !(env.error && string(env.id) == "null") {
		return env, strictError("a JSON-RPC id must be a string or an integer from -(2^53-1) to 2^53-1")
	}
	if env.jsonrpc != "2.0" {
		return env, strictError(`a JSON-RPC message must have "jsonrpc": "2.0"`)
	}
	if !env.hasMethod && !env.result && !env.error {
		return env, strictError(`a JSON-RPC request must have a string "method"`)
	}
	if env.hasMethod && env.method == "" {
		return env, strictError(`a JSON-RPC request must have a non-empty "method"`)
	}
	if env.params != nil && env.params[0] == '{' {
		var paramsBuf [8]member
		params, _ := scanObject(paramsBuf[:0], env.params)
		if err := checkMembers(params, paramsKeys); err != nil {
			return env, err
		}
		for _, p := range params {
			if len(p.raw) == 0 || p.raw[0] != '{' {
				continue
			}
			switch p.key {
			case "_meta":
				var innerBuf [8]member
				inner, _ := scanObject(innerBuf[:0], p.raw)
				if err := checkMembers(inner, metaKeys); err != nil {
					return env, err
				}
			case "arguments":
				var innerBuf [8]member
				inner, _ := scanObject(innerBuf[:0], p.raw)
				if err := checkMembers(inner, nil); err != nil {
					return env, err
				}
			}
		}
	}
	return env, nil
}

// smallObject is the member count up to which checkMembers compares
// names pairwise (no allocation); larger objects use a set, so that the
// check stays linear in the number of members.
const smallObject = 16

// checkMembers refuses repeated member names, and names that are not one
// of known but equal one when case, Unicode folding and control or format
// characters are ignored.
func checkMembers(members []member, known []string) error {
	var seen map[string]struct{}
	if len(members) > smallObject {
		seen = make(map[string]struct{}, len(members))
	}
	for i, m := range members {
		if seen != nil {
			if _, dup := seen[m.key]; dup {
				return strictError("a JSON-RPC message must not repeat the member " + quoteKey(m.key))
			}
			seen[m.key] = struct{}{}
		} else {
			for _, o := range members[:i] {
				if o.key == m.key {
					return strictError("a JSON-RPC message must not repeat the member " + quoteKey(m.key))
				}
			}
		}
		if len(known) == 0 || isKnown(m.key, known) {
			continue
		}
		folded := strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
				return -1
			}
			return r
		}, m.key)
		for _, k := range known {
			if strings.EqualFold(folded, k) {
				return strictError("a JSON-RPC message must spell the member " + quoteKey(k) + " exactly")
			}
		}
	}
	return nil
}

func isKnown(key string, known []string) bool {
	for _, k := range known {
		if k == key {
			return true
		}
	}
	return false
}

func quoteKey(k string) string {
	if len(k) > 40 {
		k = k[:40]
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// maxID is the largest integer id: 2^53-1, the largest integer every
// decoder holds exactly (the SDK reads numeric ids through a float64:
// 1.5 came back as 1, and 12345678901234567890 or 2^63-1 as a negative
// number; JavaScript clients have the same bound).
const maxID = 1<<53 - 1

// validID reports whether raw is an id every path writes back unchanged: a
// string (without an escaped lone UTF-16 surrogate, which decoders turn
// into U+FFFD), or an integer without fraction or exponent from -maxID to
// maxID.
func validID(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		return !hasLoneSurrogate(raw)
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return false // null, true, false, an object or an array
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil && n >= -maxID && n <= maxID && string(raw) != "-0" // the SDK writes -0 back as 0
}

// hasLoneSurrogate reports whether the JSON string raw escapes a UTF-16
// surrogate that is not half of a pair (\ud800 alone, or \udc00 first).
func hasLoneSurrogate(raw []byte) bool {
	unit := func(i int) (rune, bool) { // the \uXXXX at raw[i:], if any
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := unit(i)
		if !ok {
			i++ // another escape: skip its character
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := unit(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// tooDeep reports whether the valid JSON b nests objects and arrays more
// than max deep.
func tooDeep(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// memberName decodes the JSON string raw, a member name. The names the
// protocol reads are returned as constants, without a copy.
func memberName(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		switch string(raw[1 : len(raw)-1]) { // compared, not copied
		case "jsonrpc":
			return "jsonrpc", true
		case "id":
			return "id", true
		case "method":
			return "method", true
		case "params":
			return "params", true
		case "name":
			return "name", true
		case "arguments":
			return "arguments", true
		case "_meta":
			return "_meta", true
		case actionArg:
			return actionArg, true
		}
	}
	return unquote(raw)
}

// decodeString decodes a JSON string value into *out (left as is when
// raw is not one). out does not escape: the caller's variable stays on
// its stack.
func decodeString(raw []byte, out *string) bool {
	s, ok := unquote(raw)
	if ok {
		*out = s
	}
	return ok
}

// unquote decodes a JSON string value. The values the protocol's hot
// path reads over and over (its version, the methods) are returned as
// constants, without a copy.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		switch v := raw[1 : len(raw)-1]; string(v) { // compared, not copied
		case "2.0":
			return "2.0", true
		case "tools/call":
			return "tools/call", true
		case "tools/list":
			return "tools/list", true
		default:
			return string(v), true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// The scanners below work on valid JSON (json.Valid is checked first).

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}

// scanObject splits the object b into its members, appended to dst. On
// the request path dst is a caller's array on the stack (members of
// small objects then cost no allocation), and member names the protocol
// reads are not copied (memberName).
func scanObject(dst []member, b []byte) ([]member, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	out := dst[:0]
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return nil, false
		}
		end := skipString(b, i)
		key, ok := memberName(b[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		vend := skipValue(b, i)
		out = append(out, member{key: key, raw: b[i:vend]})
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return out, true
		}
		return nil, false
	}
	return nil, false
}

// scanArray splits the array b into its elements.
func scanArray(b []byte) ([][]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	var out [][]byte
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return out, true
	}
	for i < len(b) {
		end := skipValue(b, i)
		out = append(out, b[i:end])
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return out, true
		}
		return nil, false
	}
	return nil, false
}
