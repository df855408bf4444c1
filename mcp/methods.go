package mcp

import (
	"net/http"

	"github.com/switchboardhq/switchboard"
)

// sdkMethods are the methods the SDK's server (v1.8.0) answers: requests
// and, under notifications/, notifications. Anything else is answered
// here, so that a client gets a JSON-RPC error rather than the SDK's
// plain-text 400 (TestUnknownMethods checks the list against the SDK).
var sdkMethods = map[string]bool{
	"initialize":                       true,
	"ping":                             true,
	"server/discover":                  true,
	"completion/complete":              true,
	"logging/setLevel":                 true,
	"prompts/list":                     true,
	"prompts/get":                      true,
	"tools/list":                       true,
	"tools/call":                       true,
	"resources/list":                   true,
	"resources/templates/list":         true,
	"resources/read":                   true,
	"resources/subscribe":              true,
	"resources/unsubscribe":            true,
	"subscriptions/listen":             true,
	"notifications/cancelled":          true,
	"notifications/initialized":        true,
	"notifications/roots/list_changed": true,
	"notifications/progress":           true,
}

// unknownMethod reports whether env is a request or notification of a
// method the server does not have.
func unknownMethod(env *envelope) bool {
	return env.hasMethod && !sdkMethods[env.method]
}

// methodNotFoundMessage names the method, cut to 40 bytes: a method name
// of any length is never echoed back whole.
func methodNotFoundMessage(method string) string {
	return "the server has no method " + quoteKey(method)
}

// writeMethodNotFound answers a single message of an unknown method: a
// notification is accepted (202, nothing to answer, as JSON-RPC asks); a
// request gets -32601, with 404 in the 2026-07-28 era (as the SDK answers
// it there) and 200 before it, where a JSON-RPC error travels in a
// successful HTTP response and clients read it as the call's error.
func writeMethodNotFound(w http.ResponseWriter, env *envelope, version string) {
	if env.id == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status := http.StatusOK
	if version >= versionStateless {
		status = http.StatusNotFound
	}
	writeRPCError(w, env.id, &switchboard.Error{Kind: switchboard.ErrNotFound, Code: "method_not_found",
		Message: methodNotFoundMessage(env.method), Status: status})
}
