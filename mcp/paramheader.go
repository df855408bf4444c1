package mcp

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard/registry"
)

// paramHeader is the header the describe action's target argument is
// mirrored into on the 2026-07-28 transport (x-mcp-header, SEP-2243).
const paramHeader = "Mcp-Param-" + registry.DescribeTargetHeader

// checkParamHeader validates Mcp-Param-Target against the target argument
// of a tools/call to one of the instance's entity tools, as SEP-2243 asks
// of servers: the header is present exactly when the argument is, a
// =?base64?…?= value is strict Base64, and the decoded value equals the
// argument. It returns a message when the request must be refused (400,
// -32020).
//
// The SDK validates these headers too, but it reads each tool's input
// schema into a struct whose "type" is a single string, so a schema with a
// type list anywhere (["integer","null"] for a nullable field, common in
// vendor APIs) yields no annotations and nothing is checked. Our tools
// declare exactly one annotated argument, so the check is done here, for
// both the fast path and the SDK path.
func checkParamHeader(r *http.Request, env *envelope, api *registry.Spec) string {
	if api == nil || env.method != "tools/call" || r.Header.Get(headerVersion) != versionStateless || len(env.params) == 0 || env.params[0] != '{' {
		return ""
	}
	name, _ := toolName(env)
	var args []byte
	var paramsBuf [8]member
	params, _ := scanObject(paramsBuf[:0], env.params)
	for _, p := range params {
		if p.key == "arguments" {
			args = p.raw
		}
	}
	if _, ok := api.Entity(name); !ok {
		return "" // unknown tool: the SDK answers -32602
	}
	var raw []byte
	if len(args) > 0 && args[0] == '{' {
		var membersBuf [8]member
		members, _ := scanObject(membersBuf[:0], args)
		for _, m := range members {
			if m.key == registry.DescribeTarget {
				raw = m.raw
			}
		}
	}
	values := r.Header.Values(paramHeader)
	if len(raw) == 0 || string(raw) == "null" {
		if len(values) > 0 {
			return "unexpected " + paramHeader + " header for absent or null parameter \"" + registry.DescribeTarget + "\""
		}
		return ""
	}
	if len(values) != 1 || values[0] == "" {
		return "missing " + paramHeader + " header for parameter \"" + registry.DescribeTarget + "\""
	}
	got := values[0]
	if inner, ok := strings.CutPrefix(got, "=?base64?"); ok && strings.HasSuffix(inner, "?=") {
		b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(inner, "?="))
		if err != nil {
			return "" + paramHeader + " header contains invalid Base64 encoding"
		}
		got = string(b)
	}
	var want string
	if !decodeString(raw, &want) || got != want {
		return "" + paramHeader + " header value does not match the body value"
	}
	return ""
}
