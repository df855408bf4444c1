package registry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDispatcherGzipMatchesTransport: the Dispatcher asks for gzip and
// decodes it itself (askGzip, gunzipResponse) on its transport path; with
// a cookie jar it goes through http.Client.Do, where the transport does
// both. For gzip answers good and bad, plain ones and requests with an
// Accept-Encoding or Range of their own, the two give the same response
// (status, headers, body, content type) or the same error, and the
// upstream receives the same Accept-Encoding.
func TestDispatcherGzipMatchesTransport(t *testing.T) {
	t.Parallel()
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	doc := `{"id":"w1","name":"` + strings.Repeat("widget ", 40) + `"}`
	bodies := map[string]struct {
		status   int
		encoding string
		body     []byte
	}{
		"/plain":     {200, "", []byte(doc)},
		"/gzip":      {200, "gzip", gz(doc)},
		"/GZIP":      {200, "GZIP", gz(doc)},
		"/empty":     {200, "gzip", nil},
		"/corrupt":   {200, "gzip", []byte("this is not gzip")},
		"/truncated": {200, "gzip", gz(doc)[:30]},
		"/trailing":  {200, "gzip", append(gz(doc), "junk"...)},
		"/big":       {200, "gzip", gz(strings.Repeat("x", 5000))},
		"/rejected":  {400, "gzip", gz(`{"message":"bad widget"}`)},
		"/br":        {200, "br", []byte("not decoded")},
		"/nocontent": {204, "gzip", nil},
		"/chunked":   {200, "gzip", gz(doc)}, // no Content-Length
	}
	var mu sync.Mutex
	var asked []string
	protos := map[string]bool{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, strings.Join(r.Header.Values("Accept-Encoding"), ",")+"|"+r.Header.Get("Range"))
		protos[r.Proto] = true
		mu.Unlock()
		b := bodies[r.URL.Path]
		if b.encoding != "" {
			w.Header().Set("Content-Encoding", b.encoding)
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/chunked" {
			w.Header().Set("Content-Length", fmt.Sprint(len(b.body)))
		}
		w.WriteHeader(b.status)
		w.Write(b.body)
	})
	// HTTP/1.1, and HTTP/2 over TLS (the transport's HTTP/2 side asks
	// for and decodes gzip by rules of its own).
	h1, h2 := upstreams(t, handler)
	for _, srv := range []*httptest.Server{h1, h2} {
		matchTransportGzip(t, srv, bodies, doc, &mu, &asked)
	}
	if !protos["HTTP/1.1"] || !protos["HTTP/2.0"] {
		t.Errorf("the upstream was called with %v, want HTTP/1.1 and HTTP/2.0", protos)
	}
}

func matchTransportGzip(t *testing.T, srv *httptest.Server, bodies map[string]struct {
	status   int
	encoding string
	body     []byte
}, doc string, mu *sync.Mutex, asked *[]string) {
	jar, _ := cookiejar.New(nil)
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tr := srv.Client().Transport
	ours := &Dispatcher{Client: &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: noRedirect}, MaxResponseBytes: 1000}
	theirs := &Dispatcher{Client: &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: noRedirect, Jar: jar}, MaxResponseBytes: 1000}

	type answer struct {
		Status      int
		Header      http.Header
		Body        string
		ContentType string
		Err         string
		Upstream    UpstreamError
	}
	call := func(d *Dispatcher, c Call) (answer, string) {
		mu.Lock()
		*asked = (*asked)[:0]
		mu.Unlock()
		resp, err := d.Do(context.Background(), c)
		var a answer
		if resp != nil {
			h := resp.Header.Clone()
			h.Del("Date")
			a = answer{Status: resp.Status, Header: h, Body: string(resp.Body), ContentType: resp.ContentType}
		}
		if err != nil {
			a.Err = err.Error()
			var ue *UpstreamError
			if errors.As(err, &ue) {
				a.Upstream = *ue
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return a, strings.Join(*asked, ";")
	}
	for path := range bodies {
		for _, header := range []http.Header{nil, {"Accept-Encoding": {"identity"}}, {"Range": {"bytes=0-"}}} {
			c := Call{Op: testOp("GET", path, nil, nil), BaseURL: srv.URL, Header: header}
			name := fmt.Sprintf("%s %s %v", srv.URL, path, header)
			got, gotAsked := call(ours, c)
			want, wantAsked := call(theirs, c)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\ndispatcher %+v\ntransport  %+v", name, got, want)
			}
			if gotAsked != wantAsked {
				t.Errorf("%s: upstream saw %q, through the transport %q", name, gotAsked, wantAsked)
			}
			if header == nil && gotAsked != "gzip|" {
				t.Errorf("%s: upstream saw Accept-Encoding %q", name, gotAsked)
			}
		}
	}
	// The decoded answer is the document, its encoding and length gone.
	resp, err := ours.Do(context.Background(), Call{Op: testOp("GET", "/gzip", nil, nil), BaseURL: srv.URL})
	if err != nil || string(resp.Body) != doc || resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("gzip answer: %+v, %v", resp, err)
	}
}
