package mcp

import "net/http"

// FastServed returns how many requests h's fast path answered.
func FastServed(h http.Handler) int64 { return h.(*handler).fastServed.Load() }
