package registry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// keyHeader is a FixedHeaderApplier as auth's API key applier is one:
// Apply sets one header, always to the same value.
type keyHeader struct {
	name, value string
	cache       HeaderCache
	applied     int // calls of Apply (not concurrent: TestSharedHeaderRequest)
}

func (k *keyHeader) Apply(req *http.Request) error {
	k.applied++
	if strings.ContainsAny(k.value, "\r\n") {
		return errors.New("bad value")
	}
	req.Header.Set(k.name, k.value)
	return nil
}

func (k *keyHeader) HeaderCache() *HeaderCache { return &k.cache }

// opKeyHeader is a keyHeader that chooses by operation: never shared.
type opKeyHeader struct{ keyHeader }

func (k *opKeyHeader) ApplyOperation(_ *Operation, req *http.Request) error { return k.Apply(req) }

// TestSharedHeaderRequest: a request built with its credential's shared
// header map is the request BuildRequest builds, with the Accept-Encoding
// askGzip adds: the same fields and the same bytes on the wire; the
// credential is applied once per map; a request that needs any other
// header, or a credential that is not a fixed header, takes its own map.
func TestSharedHeaderRequest(t *testing.T) {
	str := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} } // one per place
	get := testOp("GET", "/widgets/{id}?view=full", []Param{{Name: "id", In: "path", Required: true, Schema: str()},
		{Name: "q", In: "query", Schema: str()}, {Name: "X-Trace", In: "header", Schema: str()}}, nil)
	type callKey struct{}
	ctx := context.WithValue(context.Background(), callKey{}, "call")
	wire := func(req *http.Request) string {
		var b bytes.Buffer
		if err := req.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, gz := range []bool{false, true} {
		share := sharePlain
		if gz {
			share = shareGzip
		}
		key := &keyHeader{name: "x-api-key", value: "k1"}
		for _, args := range []map[string]any{{"id": "w 1"}, {"id": "w1", "q": "a&b"}} {
			c := Call{Op: get, BaseURL: "http://127.0.0.1:9/v1/", Args: args, Credentials: key}
			want, err := BuildRequest(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if gz {
				want.Header["Accept-Encoding"] = acceptGzip
			}
			for range 2 {
				got, shared, err := buildRequest(ctx, c, share)
				if err != nil || !shared {
					t.Fatalf("%v: shared %v, %v", args, shared, err)
				}
				if got.Context() != ctx {
					t.Errorf("%v: the request's context is not the call's", args)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v gzip %v:\nshared %+v\nown    %+v", args, gz, got, want)
				}
				if g, w := wire(got), wire(want); g != w {
					t.Errorf("%v gzip %v: on the wire\n%q\nwant\n%q", args, gz, g, w)
				}
			}
		}
		// Once for the map, once per BuildRequest above.
		if key.applied != 3 {
			t.Errorf("gzip %v: Apply called %d times, want 3", gz, key.applied)
		}
		if s := fmt.Sprintf("%v %+v %s %#v", &key.cache, &key.cache, &key.cache, &key.cache); strings.Contains(s, "k1") {
			t.Errorf("the cache prints its value: %s", s)
		}
	}

	// What takes a map of its own.
	key := &keyHeader{name: "X-Api-Key", value: "k1"}
	body := &Body{ContentType: "application/json", Schema: &jsonschema.Schema{Type: "object"}}
	own := map[string]Call{
		"header parameter": {Op: get, Args: map[string]any{"id": "w1", "X-Trace": "t"}, Credentials: key},
		"call header":      {Op: get, Args: map[string]any{"id": "w1"}, Credentials: key, Header: http.Header{"Traceparent": {"00-x"}}},
		"body":             {Op: testOp("POST", "/widgets", nil, body), Args: map[string]any{"body": map[string]any{}}, Credentials: key},
		"other accept":     {Op: &Operation{ID: "op", Name: "csv", Method: "GET", Path: "/export", Accept: "text/csv", InputSchema: &jsonschema.Schema{Type: "object"}}, Credentials: key},
		"no credential":    {Op: get, Args: map[string]any{"id": "w1"}},
		"by operation":     {Op: get, Args: map[string]any{"id": "w1"}, Credentials: &opKeyHeader{keyHeader{name: "X-Api-Key", value: "k1"}}},
		"sets Accept":      {Op: get, Args: map[string]any{"id": "w1"}, Credentials: &keyHeader{name: "Accept", value: "text/plain"}},
		"sets Range":       {Op: get, Args: map[string]any{"id": "w1"}, Credentials: &keyHeader{name: "Range", value: "bytes=0-"}},
		"odd method":       {Op: testOp("PURGE", "/widgets", nil, nil), Credentials: key},
	}
	for name, c := range own {
		c.BaseURL = "http://127.0.0.1:9"
		if _, shared, err := buildRequest(ctx, c, shareGzip); err != nil || shared {
			t.Errorf("%s: shared %v, %v", name, shared, err)
		}
	}
	// A credential Apply refuses fails as before, every time.
	bad := Call{Op: get, BaseURL: "http://127.0.0.1:9", Args: map[string]any{"id": "w1"}, Credentials: &keyHeader{name: "X-Api-Key", value: "a\nb"}}
	_, wantErr := BuildRequest(ctx, bad)
	for range 2 {
		if _, _, err := buildRequest(ctx, bad, shareGzip); err == nil || err.Error() != wantErr.Error() {
			t.Errorf("refused credential: %v, want %v", err, wantErr)
		}
	}
}

// TestDispatcherSharedHeaderUnderLoad: concurrent calls of one credential
// share its header map over HTTP/1.1 and HTTP/2; each request arrives with
// the credential, Accept and Accept-Encoding: gzip, gzip answers are
// decoded, and the race detector finds no write to the shared map.
func TestDispatcherSharedHeaderUnderLoad(t *testing.T) {
	t.Parallel()
	doc := `{"id":"w1"}`
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte(doc))
	zw.Close()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "k1" || r.Header.Get("Accept") != "application/json" ||
			strings.Join(r.Header.Values("Accept-Encoding"), ",") != "gzip" {
			http.Error(w, fmt.Sprint(r.Header), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/z") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(zipped.Bytes())
			return
		}
		w.Write([]byte(doc))
	})
	h1, h2 := upstreams(t, handler)
	str := &jsonschema.Schema{Type: "string"}
	op := testOp("GET", "/widgets/{id}", []Param{{Name: "id", In: "path", Required: true, Schema: str}}, nil)
	for _, srv := range []*httptest.Server{h1, h2} {
		key := &keyHeader{name: "X-Api-Key", value: "k1"}
		d := &Dispatcher{Client: &http.Client{Transport: srv.Client().Transport, Timeout: 10 * time.Second}}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					id := "w1"
					if (g+i)%2 == 0 {
						id = "z"
					}
					resp, err := d.Do(context.Background(), Call{Op: op, BaseURL: srv.URL, Args: map[string]any{"id": id}, Credentials: key})
					if err == nil && string(resp.Body) != doc {
						err = fmt.Errorf("body %q", resp.Body)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", srv.URL, err)
		}
		if f := key.cache.gzip.Load(); f == nil || f.h == nil {
			t.Errorf("%s: the calls did not share a header map", srv.URL)
		}
	}
}

// upstreams starts handler over HTTP/1.1 and over HTTP/2 with TLS (the
// transport's HTTP/2 side has its own header and gzip handling).
func upstreams(t *testing.T, handler http.Handler) (h1, h2 *httptest.Server) {
	h1 = httptest.NewServer(handler)
	t.Cleanup(h1.Close)
	h2 = httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	return h1, h2
}
