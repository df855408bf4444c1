package mcp

import (
	"net/http"

	"github.com/switchboardhq/switchboard/registry"
)

// FastServed returns how many requests h's fast path answered.
func FastServed(h http.Handler) int64 { return h.(*handler).fastServed.Load() }

// StructuredContent is the structured content of a successful tool result
// for an upstream body, for a tool with or without an output schema.
func StructuredContent(body string, hasSchema bool) any {
	return successResult(&registry.Response{Status: 200, Body: []byte(body)}, hasSchema).StructuredContent
}
