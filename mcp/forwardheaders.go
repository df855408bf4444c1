package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
)

// Mcp-Param-* headers of forwarded tools (SEP-2243). A tool of the proxied
// server may annotate arguments with x-mcp-header; a 2026-07-28 caller
// then mirrors each such argument into an Mcp-Param-{Name} header, and the
// server must refuse (400, -32020) a call whose headers do not match its
// arguments. The SDK's server checks this only for the tools registered
// on it, and an instance's forwarded tools are not (they are the proxied
// server's, listed per instance): Switchboard checks them here against the
// proxied server's tool list, before forwarding, as the server would
// directly. The SDK's validator is unexported, hence this one; it follows
// the SDK's rules (the SDK's client, which Switchboard forwards with,
// writes the headers by the same rules). The bindings of each tool are
// read from its input schema once, when the instance lists the proxied
// server's tools (mcprelay.ToolList), not per call.

// checkForwardedParamHeaders returns why a 2026-07-28 tools/call to a
// tool of the server an instance proxies must be refused for its
// Mcp-Param-* headers, or "". The proxied server's tool list is the
// instance's cached one; when it cannot be had, the call goes on and
// reports that failure itself.
func (h *handler) checkForwardedParamHeaders(ctx context.Context, r *http.Request, env *envelope, p *auth.Principal, t *gateway.Target) string {
	if env.method != "tools/call" || !forwards(t.Connector) || r.Header.Get(headerVersion) != versionStateless {
		return ""
	}
	name, _ := toolName(env)
	if name == "" {
		return ""
	}
	list, err := h.g.RemoteToolList(ctx, t, p)
	if err != nil {
		return ""
	}
	bindings := list.Bindings(name)
	if len(bindings) == 0 {
		return "" // most tools: the arguments are not decoded
	}
	var params struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(env.params, &params) != nil {
		return ""
	}
	return checkParamBindings(r.Header, params.Arguments, bindings)
}

// checkParamBindings checks each binding's header against its argument:
// present exactly when the argument is (and not null), a =?base64?…?=
// value valid Base64, the decoded value equal to the argument (a string,
// a boolean, or an integer within ±(2^53-1)).
func checkParamBindings(hdr http.Header, args map[string]json.RawMessage, bindings []mcprelay.ParamBinding) string {
	for _, b := range bindings {
		name := "Mcp-Param-" + b.Header
		values := hdr.Values(name)
		raw, ok := argumentAt(args, b.Path)
		param := strings.Join(b.Path, ".")
		if !ok || string(raw) == "null" {
			if len(values) > 0 {
				return "header mismatch: unexpected " + name + " header for absent or null parameter \"" + param + "\""
			}
			continue
		}
		if len(values) == 0 || values[0] == "" {
			return "header mismatch: missing " + name + " header for parameter \"" + param + "\""
		}
		if len(values) > 1 {
			return "header mismatch: more than one " + name + " header"
		}
		got := values[0]
		if inner, ok := strings.CutPrefix(got, "=?base64?"); ok && strings.HasSuffix(inner, "?=") {
			dec, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(inner, "?="))
			if err != nil {
				return "header mismatch: " + name + " header contains invalid Base64 encoding"
			}
			got = string(dec)
		}
		want, isInt, ok := primitiveArgument(raw)
		if !ok {
			return "header mismatch: " + name + " header present but body parameter \"" + param + "\" is not a primitive type"
		}
		if !headerEquals(got, want, isInt) {
			return "header mismatch: " + name + " header value does not match the body value"
		}
	}
	return ""
}

// argumentAt is the argument at path in the call's arguments.
func argumentAt(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[part]
	}
	return cur, ok
}

// maxSafeInteger bounds the integers a header may carry (those a double
// holds exactly).
const maxSafeInteger = 1<<53 - 1

// primitiveArgument is an argument's header form: a string as it is, a
// boolean as true or false, an integer in decimal (isInt); ok is false
// for any other value.
func primitiveArgument(raw json.RawMessage) (s string, isInt, ok bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false, false
	}
	switch v := v.(type) {
	case string:
		return v, false, true
	case bool:
		return strconv.FormatBool(v), false, true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > maxSafeInteger {
			return "", false, false
		}
		return strconv.FormatInt(int64(v), 10), true, true
	}
	return "", false, false
}

// headerEquals compares a decoded header value with an argument's header
// form; an integer compares by value (1e2 is 100).
func headerEquals(got, want string, isInt bool) bool {
	if !isInt {
		return got == want
	}
	f, err := strconv.ParseFloat(got, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return false
	}
	w, _ := strconv.ParseInt(want, 10, 64)
	return int64(f) == w
}
