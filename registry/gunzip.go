package registry

import (
	"compress/flate"
	"compress/gzip"
	"io"
	"net/http"
	"sync"
)

// The Dispatcher asks for gzip itself and decodes it here, as
// http.Transport would (same conditions, same headers removed, the same
// gzip reader, its errors returned from Read): when the transport adds
// Accept-Encoding it builds a header map of its own for it, three
// allocations per call, where the request's map holds the shared value
// for nothing (acceptGzip).

// acceptGzip is the Accept-Encoding value, shared: header values are never
// modified in place.
var acceptGzip = []string{"gzip"}

// askGzip adds Accept-Encoding: gzip to req when rt is an http.Transport
// that would add it itself (compression on; no Accept-Encoding or Range
// of the request's own; not HEAD), and reports whether it did: then the
// answer is the Dispatcher's to decode (gunzipResponse), as the transport
// decodes only what it asked for.
func askGzip(rt http.RoundTripper, req *http.Request) bool {
	t, ok := rt.(*http.Transport)
	if !ok || t.DisableCompression || req.Method == http.MethodHead ||
		req.Header.Get("Accept-Encoding") != "" || req.Header.Get("Range") != "" {
		return false
	}
	req.Header["Accept-Encoding"] = acceptGzip
	return true
}

// gunzipResponse makes resp's body the decoded one when the upstream
// answered gzip, and returns the reader to release once the body is read
// (nil when there is none): the transport's handling of a response to the
// gzip it asked for, Content-Encoding and Content-Length removed, the
// length unknown. An answer without a body (a length of 0: 204, 304, an
// empty body) stays as it is, as with the transport.
func gunzipResponse(resp *http.Response) *gunzipBody {
	if resp.ContentLength == 0 || !asciiEqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		return nil
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	g := &gunzipBody{body: resp.Body}
	resp.Body = g
	return g
}

// gunzipBody decodes body, its gzip reader set up at the first Read (an
// error then, io.EOF for an empty body among them, is every Read's), as
// the transport's gzipReader does. Close closes body.
type gunzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

var gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}

func (g *gunzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		zr := gzipReaders.Get().(*gzip.Reader)
		if err := zr.Reset(g.body); err != nil {
			g.err = err
			putGzipReader(zr)
		} else {
			g.zr = zr
		}
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gunzipBody) Close() error { return g.body.Close() }

// release returns the gzip reader to the pool; g is not read after.
func (g *gunzipBody) release() {
	if g.zr != nil {
		putGzipReader(g.zr)
		g.zr, g.err = nil, io.ErrClosedPipe
	}
}

// putGzipReader pools zr, reset onto an empty flate.Reader so that it
// holds neither the body nor a buffer of it.
func putGzipReader(zr *gzip.Reader) {
	zr.Reset(emptyReader{})
	gzipReaders.Put(zr)
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyReader) ReadByte() (byte, error)  { return 0, io.EOF }

var _ flate.Reader = emptyReader{}

// asciiEqualFold is strings.EqualFold for ASCII only, as the transport
// compares Content-Encoding.
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lower(s[i]) != lower(t[i]) {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}
