package mcp

import (
	"bytes"
	"net/http"
)

// responseBuffer is an http.ResponseWriter that keeps the response in
// memory: the SDK's tools/list answer the fast path records, and a batch's
// answers, which are checked before they are sent.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newResponseBuffer() *responseBuffer {
	return &responseBuffer{header: http.Header{}}
}

// Header implements http.ResponseWriter.
func (b *responseBuffer) Header() http.Header { return b.header }

// WriteHeader implements http.ResponseWriter; the first status counts.
func (b *responseBuffer) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

// Write implements http.ResponseWriter.
func (b *responseBuffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Flush implements http.Flusher: there is nothing to flush before the
// buffer is sent.
func (b *responseBuffer) Flush() {}

// code is the response's status (200 when nothing set one).
func (b *responseBuffer) code() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// send writes the buffered response to w, with body in place of the
// buffered one when body is not nil.
func (b *responseBuffer) send(w http.ResponseWriter, body []byte) {
	if body == nil {
		body = b.body.Bytes()
	}
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	w.WriteHeader(b.code())
	w.Write(body)
}
