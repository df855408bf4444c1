package registry

import (
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
)

// FixedHeaderApplier is an Applier whose Apply does one thing: set the
// same header on every request, with the same value (an API key or a
// ready token sent in a header). The Dispatcher then applies it once, to
// a header map it keeps in the applier's cache and sends, read-only, with
// every request of that credential that has no other header
// (sharedHeader), instead of building the map per call; the registry
// still never reads the value.
type FixedHeaderApplier interface {
	Applier
	// HeaderCache returns the cache the Dispatcher keeps the maps in; nil
	// when this applier's Apply is not a fixed header (it is then called
	// per request).
	HeaderCache() *HeaderCache
}

// HeaderCache is where a FixedHeaderApplier keeps the header maps the
// Dispatcher made with it: with and without Accept-Encoding: gzip. Its
// zero value is empty. The maps hold the credential: a cache prints as
// redacted.
type HeaderCache struct {
	plain, gzip atomic.Pointer[fixedHeader]
}

// fixedHeader is a map made by applying a FixedHeaderApplier; h is nil
// when its Apply failed or did more than add one header, and the requests
// then take the per-call path (which returns the same error).
type fixedHeader struct{ h http.Header }

// String implements fmt.Stringer without the maps' values.
func (*HeaderCache) String() string { return "registry.HeaderCache{redacted}" }

// Format implements fmt.Formatter: fmt reaches unexported fields by
// reflection, past String, so the cache prints itself.
func (c *HeaderCache) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// sharedHeader returns the header map of a request to an operation that
// sends no header of its own (no header or cookie parameter, no body, the
// default Accept, no header from the call) with a's credential: Accept,
// Accept-Encoding: gzip when gzip (what askGzip adds), and what a.Apply
// sets, made once per applier and read-only. ok is false when there is
// none: a is not a fixed header, or its Apply failed or touched anything
// but one header of its own.
//
// Sharing one map between concurrent requests is sound because nothing
// writes to it after it is made: BuildRequest's callers that may modify
// their request's header never get it (only DoInto asks for it), DoInto
// does not, and it is sent only to an *http.Transport, which reads a
// request's header and never writes it (the RoundTripper contract; its
// own Accept-Encoding, which this map makes it skip, would go in a map of
// its own). TestDispatcherSharedHeaderUnderLoad holds it under the race
// detector.
func sharedHeader(a Applier, gzip bool) (http.Header, bool) {
	fa, ok := a.(FixedHeaderApplier)
	if !ok {
		return nil, false
	}
	if _, ok := a.(OperationApplier); ok {
		return nil, false
	}
	c := fa.HeaderCache()
	if c == nil {
		return nil, false
	}
	slot := &c.plain
	if gzip {
		slot = &c.gzip
	}
	if f := slot.Load(); f != nil {
		return f.h, f.h != nil
	}
	f := &fixedHeader{h: applyOnce(a, gzip)}
	// Two first calls may both make a map: either is right, and the
	// one stored stays.
	if !slot.CompareAndSwap(nil, f) {
		f = slot.Load()
	}
	return f.h, f.h != nil
}

// applyOnce applies a to a request holding only the shared headers and
// returns its header, or nil when Apply failed or did anything but add
// one header that is neither Accept nor one that changes askGzip's
// answer (Accept-Encoding, Range).
func applyOnce(a Applier, gzip bool) http.Header {
	h := http.Header{"Accept": acceptJSON}
	if gzip {
		h["Accept-Encoding"] = acceptGzip
	}
	before := len(h)
	u := &url.URL{}
	req := &http.Request{Method: http.MethodGet, URL: u, Header: h, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	if err := a.Apply(req); err != nil {
		return nil
	}
	if req.Header == nil || len(req.Header) != before+1 || *u != (url.URL{}) || req.Host != "" ||
		len(req.Header["Accept"]) != 1 || &req.Header["Accept"][0] != &acceptJSON[0] || req.Header["Range"] != nil {
		return nil
	}
	if ae := req.Header["Accept-Encoding"]; gzip && (len(ae) != 1 || &ae[0] != &acceptGzip[0]) || !gzip && ae != nil {
		return nil
	}
	return req.Header
}
