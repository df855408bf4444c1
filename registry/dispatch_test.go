package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
)

// testOp builds an operation with an input schema the way the compiler
// does: one property per parameter, "body", no other properties.
func testOp(method, path string, params []Param, body *Body) *Operation {
	in := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	for _, p := range params {
		in.Properties[p.Name] = p.Schema
		if p.Required {
			in.Required = append(in.Required, p.Name)
		}
	}
	if body != nil {
		in.Properties["body"] = body.Schema
		if body.Required {
			in.Required = append(in.Required, "body")
		}
	}
	return &Operation{ID: "op", Name: "test_op", Method: method, Path: path, Params: params, Body: body, InputSchema: in}
}

func str() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }
func arr() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{}}
}
func obj() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }
func no() *bool               { b := false; return &b }
func yes() *bool              { b := true; return &b }

// recorded is what the upstream server saw.
type recorded struct {
	method, uri, contentType, body string
	header                         http.Header
}

// recorder is a loopback upstream that records the last request.
func recorder(t *testing.T) (*httptest.Server, func() recorded) {
	t.Helper()
	var mu sync.Mutex
	var last recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = recorded{method: r.Method, uri: r.RequestURI, contentType: r.Header.Get("Content-Type"), body: string(b), header: r.Header.Clone()}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() recorded { mu.Lock(); defer mu.Unlock(); return last }
}

// headerApplier sets a header and records the Content-Type it saw, to
// prove it runs last.
type headerApplier struct {
	name, value string
	sawCT       *string
}

func (a headerApplier) Apply(req *http.Request) error {
	if a.sawCT != nil {
		*a.sawCT = req.Header.Get("Content-Type")
	}
	req.Header.Set(a.name, a.value)
	return nil
}

type queryApplier struct{ value string }

func (a queryApplier) Apply(req *http.Request) error {
	q := req.URL.Query()
	q.Set("api_key", a.value)
	req.URL.RawQuery = q.Encode()
	return nil
}

func TestBuildRequest(t *testing.T) {
	t.Parallel()
	srv, last := recorder(t)
	id := Param{Name: "id", In: "path", Required: true, Schema: str()}
	tests := []struct {
		name     string
		op       *Operation
		base     string
		args     map[string]any
		wantURI  string
		wantCT   string
		wantBody string
		check    func(t *testing.T, r recorded)
	}{
		{name: "path escaping", op: testOp("GET", "/files/{id}", []Param{id}, nil),
			args: map[string]any{"id": "a b/c?d"}, wantURI: "/v1/files/a%20b%2Fc%3Fd"},
		{name: "mid-segment param", op: testOp("GET", "/Accounts/{Sid}.json", []Param{{Name: "Sid", In: "path", Required: true, Schema: str()}}, nil),
			args: map[string]any{"Sid": "AC123"}, wantURI: "/v1/Accounts/AC123.json"},
		{name: "fragment in template", op: testOp("POST", "/oauth2/token#refresh", nil, nil), wantURI: "/v1/oauth2/token"},
		{name: "query form explode", op: testOp("GET", "/x", []Param{{Name: "c", In: "query", Schema: arr()}, {Name: "n", In: "query", Schema: &jsonschema.Schema{Type: "integer"}}}, nil),
			args: map[string]any{"c": []any{"red", "blue"}, "n": float64(20)}, wantURI: "/v1/x?c=red&c=blue&n=20"},
		{name: "query form no explode", op: testOp("GET", "/x", []Param{{Name: "c", In: "query", Explode: no(), Schema: arr()}}, nil),
			args: map[string]any{"c": []any{"red", "blue"}}, wantURI: "/v1/x?c=red%2Cblue"},
		{name: "query pipe delimited", op: testOp("GET", "/x", []Param{{Name: "c", In: "query", Style: "pipeDelimited", Explode: no(), Schema: arr()}}, nil),
			args: map[string]any{"c": []any{"a", "b"}}, wantURI: "/v1/x?c=a%7Cb"},
		{name: "deepObject", op: testOp("GET", "/x", []Param{{Name: "filter", In: "query", Style: "deepObject", Schema: obj()}}, nil),
			args:    map[string]any{"filter": map[string]any{"size": "m", "range": map[string]any{"min": float64(1)}}},
			wantURI: "/v1/x?filter%5Brange%5D%5Bmin%5D=1&filter%5Bsize%5D=m"},
		{name: "form-encoded nested body", op: testOp("POST", "/customers", nil, &Body{ContentType: "application/x-www-form-urlencoded", Schema: obj(),
			Encoding: map[string]Encoding{"expand": {Style: "deepObject", Explode: yes()}}}),
			args: map[string]any{"body": map[string]any{
				"metadata": map[string]any{"a": "1"},
				"items":    []any{map[string]any{"price": "p_1", "quantity": float64(2)}},
				"expand":   []any{"x", "y"},
				"name":     "Ann & Bob",
			}},
			wantURI: "/v1/customers", wantCT: "application/x-www-form-urlencoded",
			wantBody: "expand%5B0%5D=x&expand%5B1%5D=y&items%5B0%5D%5Bprice%5D=p_1&items%5B0%5D%5Bquantity%5D=2&metadata%5Ba%5D=1&name=Ann+%26+Bob"},
		{name: "form-encoded by encoding", op: testOp("POST", "/f", nil, &Body{ContentType: "application/x-www-form-urlencoded", Schema: obj(),
			Encoding: map[string]Encoding{"pipes": {Style: "pipeDelimited", Explode: no()}, "csv": {Explode: no()}, "meta": {ContentType: "application/json"}, "kv": {Explode: no()}}}),
			args: map[string]any{"body": map[string]any{
				"tags": []any{"a", "b"}, "pipes": []any{"a", "b"}, "csv": []any{"a", "b"},
				"meta": map[string]any{"k": "v"}, "kv": map[string]any{"x": "1"}, "skip": nil,
			}},
			wantURI: "/v1/f", wantCT: "application/x-www-form-urlencoded",
			wantBody: "csv=a%2Cb&kv=x%2C1&meta=%7B%22k%22%3A%22v%22%7D&pipes=a%7Cb&tags=a&tags=b"},
		{name: "path styles and content params", op: testOp("GET", "/p/{l}/{m}", []Param{
			{Name: "l", In: "path", Required: true, Style: "label", Schema: str()},
			{Name: "m", In: "path", Required: true, Style: "matrix", Schema: str()},
			{Name: "q", In: "query", ContentType: "application/json", Schema: obj()},
			{Name: "s", In: "query", Style: "spaceDelimited", Explode: no(), Schema: arr()},
		}, nil),
			args:    map[string]any{"l": "x", "m": "y", "q": map[string]any{"a": float64(1)}, "s": []any{"a", "b"}},
			wantURI: "/v1/p/.x/;m=y?q=%7B%22a%22%3A1%7D&s=a+b"},
		{name: "octet-stream body", op: testOp("PUT", "/blob", nil, &Body{ContentType: "application/octet-stream", Schema: &jsonschema.Schema{Type: "string", Format: "binary"}}),
			args: map[string]any{"body": "raw bytes"}, wantURI: "/v1/blob", wantCT: "application/octet-stream", wantBody: "raw bytes"},
		{name: "json-patch body", op: testOp("PATCH", "/doc", nil, &Body{ContentType: "application/json-patch+json", Schema: &jsonschema.Schema{Type: "array", Items: obj()}}),
			args:    map[string]any{"body": []any{map[string]any{"op": "replace", "path": "/a", "value": "b"}}},
			wantURI: "/v1/doc", wantCT: "application/json-patch+json", wantBody: `[{"op":"replace","path":"/a","value":"b"}]`},
		{name: "json body", op: testOp("POST", "/w", nil, &Body{ContentType: "application/json", Required: true, Schema: obj()}),
			args: map[string]any{"body": map[string]any{"name": "w", "tags": []any{"a"}}}, wantURI: "/v1/w",
			wantCT: "application/json", wantBody: `{"name":"w","tags":["a"]}`},
		{name: "header and cookie params", op: testOp("GET", "/h", []Param{{Name: "X-Trace", In: "header", Schema: str()}, {Name: "sess", In: "cookie", Schema: str()}}, nil),
			args: map[string]any{"X-Trace": "t-1", "sess": "s1"}, wantURI: "/v1/h",
			check: func(t *testing.T, r recorded) {
				if r.header.Get("X-Trace") != "t-1" || r.header.Get("Cookie") != "sess=s1" || r.header.Get("Accept") != "application/json" {
					t.Errorf("headers %v", r.header)
				}
			}},
		{name: "base with trailing slash", op: testOp("GET", "/files", nil, nil), base: srv.URL + "/api/v2/", wantURI: "/api/v2/files"},
		{name: "relative op server", op: func() *Operation { o := testOp("GET", "/f", nil, nil); o.Server = "/upload/"; return o }(), wantURI: "/upload/f"},
		{name: "multipart", op: testOp("POST", "/up", nil, &Body{ContentType: "multipart/form-data",
			Schema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"file": {Type: "string", Format: "binary"}, "name": str(), "meta": obj(), "tags": arr()}}}),
			args: map[string]any{"body": map[string]any{"file": "DATA", "name": "n.txt", "meta": map[string]any{"k": "v"}, "tags": []any{"a", "b"}}}, wantURI: "/v1/up",
			check: func(t *testing.T, r recorded) {
				mt, params, err := mime.ParseMediaType(r.contentType)
				if err != nil || mt != "multipart/form-data" {
					t.Fatalf("content type %q", r.contentType)
				}
				form, err := multipart.NewReader(strings.NewReader(r.body), params["boundary"]).ReadForm(1 << 20)
				if err != nil {
					t.Fatal(err)
				}
				if form.Value["name"][0] != "n.txt" || len(form.File["file"]) != 1 {
					t.Errorf("form %v %v", form.Value, form.File)
				}
				if got := form.Value["meta"]; len(got) != 1 || got[0] != `{"k":"v"}` {
					t.Errorf("JSON part %v", got)
				}
				if got := form.Value["tags"]; len(got) != 2 || got[1] != "b" {
					t.Errorf("array parts %v", got)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if base == "" {
				base = srv.URL + "/v1"
			}
			var sawCT string
			d := &Dispatcher{}
			resp, err := d.Do(context.Background(), Call{Op: tt.op, BaseURL: base, Args: tt.args,
				Credentials: headerApplier{name: "Authorization", value: "Bearer tok", sawCT: &sawCT}})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.Status != 200 || string(resp.Body) != `{"ok":true}` || resp.ContentType != "application/json" {
				t.Errorf("response %+v", resp)
			}
			r := last()
			if r.uri != tt.wantURI || r.method != tt.op.Method {
				t.Errorf("request %s %s, want %s", r.method, r.uri, tt.wantURI)
			}
			if tt.wantCT != "" && r.contentType != tt.wantCT {
				t.Errorf("content type %q, want %q", r.contentType, tt.wantCT)
			}
			if tt.wantBody != "" && r.body != tt.wantBody {
				t.Errorf("body %q\nwant %q", r.body, tt.wantBody)
			}
			if r.header.Get("Authorization") != "Bearer tok" || sawCT != r.contentType {
				t.Errorf("credentials not applied last: auth %q, applier saw content type %q", r.header.Get("Authorization"), sawCT)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestBuildRequestInvalid(t *testing.T) {
	t.Parallel()
	op := testOp("GET", "/files/{id}", []Param{
		{Name: "id", In: "path", Required: true, Schema: str()},
		{Name: "limit", In: "query", Schema: &jsonschema.Schema{Type: "integer"}},
	}, nil)
	tests := []struct {
		name, base string
		args       map[string]any
		code       string
		want       []string
	}{
		{"missing required", "http://127.0.0.1/", map[string]any{}, "invalid_arguments", []string{"id (string, required)", "limit (integer)", "missing required id"}},
		{"unknown argument", "http://127.0.0.1/", map[string]any{"id": "1", "bogus": true}, "invalid_arguments", []string{`unknown "bogus"`, "id (string, required)"}},
		{"wrong type", "http://127.0.0.1/", map[string]any{"id": "1", "limit": "ten"}, "invalid_arguments", []string{`argument "limit"`}},
		{"dot dot", "http://127.0.0.1/", map[string]any{"id": ".."}, "invalid_arguments", []string{`"id"`}},
		{"relative base", "/v1", map[string]any{"id": "1"}, "invalid_config", nil},
		{"ftp base", "ftp://example.test/", map[string]any{"id": "1"}, "invalid_config", nil},
		{"empty base", "", map[string]any{"id": "1"}, "invalid_config", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := BuildRequest(context.Background(), Call{Op: op, BaseURL: tt.base, Args: tt.args})
			se, ok := switchboard.AsError(err)
			if !ok || se.Code != tt.code || !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err.Error(), w)
				}
			}
			if strings.Contains(err.Error(), "ten") {
				t.Errorf("argument value echoed: %q", err.Error())
			}
		})
	}
}

const canary = "CANARY-sk_live_5f3a9b7c1d"

func TestDispatcherErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if ra := q.Get("retry"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if q.Get("big") != "" {
			w.Write([]byte(strings.Repeat("x", 1000)))
			return
		}
		var status int
		switch q.Get("s") {
		case "401":
			status = 401
		case "403":
			status = 403
		case "404":
			status = 404
		case "429":
			status = 429
		case "503":
			status = 503
		case "500":
			status = 500
		case "400":
			status = 400
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, `{"message":"Bad\nthing\u0007 happened","secret":"`+canary+`","error":{"code":"`+canary+`"},"request":{"headers":"`+canary+`"}}`)
	}))
	t.Cleanup(srv.Close)
	// A failure with an oversized body keeps its status mapping.
	big := &Dispatcher{MaxResponseBytes: 10}
	if _, err := big.Do(context.Background(), Call{Op: testOp("GET", "/x", []Param{{Name: "s", In: "query", Schema: str()}}, nil), BaseURL: srv.URL, Args: map[string]any{"s": "401"}}); !errors.Is(err, switchboard.ErrUnauthorized) {
		t.Errorf("oversized 401: %v", err)
	}
	op := testOp("GET", "/x", []Param{{Name: "s", In: "query", Schema: str()}, {Name: "retry", In: "query", Schema: str()}, {Name: "big", In: "query", Schema: str()}}, nil)
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		args   map[string]any
		code   string
		kind   error
		status int
		retry  time.Duration
		want   string
	}{
		{map[string]any{"s": "401"}, "reconnect_required", switchboard.ErrUnauthorized, 401, 0, ""},
		{map[string]any{"s": "403"}, "forbidden", switchboard.ErrForbidden, 403, 0, ""},
		{map[string]any{"s": "404"}, "not_found", switchboard.ErrNotFound, 404, 0, ""},
		{map[string]any{"s": "429", "retry": "7"}, "rate_limited", switchboard.ErrUnavailable, 429, 7 * time.Second, ""},
		{map[string]any{"s": "429"}, "rate_limited", switchboard.ErrUnavailable, 429, time.Second, ""},
		{map[string]any{"s": "503", "retry": date}, "rate_limited", switchboard.ErrUnavailable, 503, 90 * time.Second, ""},
		{map[string]any{"s": "503"}, "upstream_unavailable", switchboard.ErrUnavailable, 503, 0, ""},
		{map[string]any{"s": "500"}, "upstream_unavailable", switchboard.ErrUnavailable, 500, 0, ""},
		{map[string]any{"s": "400"}, "upstream_rejected", switchboard.ErrInvalid, 400, 0, "Bad thing happened"},
		{map[string]any{"big": "1"}, "upstream_unavailable", switchboard.ErrUnavailable, 200, 0, "response larger than 500 bytes"},
	}
	d := &Dispatcher{MaxResponseBytes: 500}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			t.Parallel()
			resp, err := d.Do(context.Background(), Call{Op: op, BaseURL: srv.URL, Args: tt.args, Credentials: queryApplier{canary}})
			var ue *UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v", err)
			}
			if ue.Code != tt.code || ue.Status != tt.status || !errors.Is(err, tt.kind) {
				t.Errorf("got %+v", ue)
			}
			// An HTTP-date Retry-After is relative to now, so the delay shrinks by
			// however long the test took to get here: allow a loaded machine.
			if tt.retry != 0 && (ue.RetryAfter < tt.retry-30*time.Second || ue.RetryAfter > tt.retry) {
				t.Errorf("retry after %v, want %v", ue.RetryAfter, tt.retry)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), canary) || strings.ContainsAny(err.Error(), "\n\a") {
				t.Errorf("error %q", err.Error())
			}
			// Non-2xx answers come back with the error; an oversized one
			// does not.
			if tt.status != 200 && (resp == nil || resp.Status != tt.status) {
				t.Errorf("response %+v alongside the error", resp)
			}
			if tt.status == 200 && resp != nil {
				t.Errorf("oversized response returned")
			}
		})
	}
}

func TestDispatcherTransportErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		if r.URL.Path == "/reset" {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	t.Cleanup(srv.Close)
	tests := []struct{ name, base, path, want string }{
		{"refused", closedURL, "/x", "could not be reached"},
		{"timeout", srv.URL, "/slow", "did not answer in time"},
		{"reset", srv.URL, "/reset", "closed the connection"},
	}
	d := &Dispatcher{Client: &http.Client{Timeout: 100 * time.Millisecond}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := d.Do(context.Background(), Call{Op: testOp("GET", tt.path, nil, nil), BaseURL: tt.base, Credentials: queryApplier{canary}})
			var ue *UpstreamError
			if !errors.As(err, &ue) || ue.Code != "upstream_unavailable" || !errors.Is(err, switchboard.ErrUnavailable) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(ue.Message, tt.want) || strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), url.QueryEscape(canary)) {
				t.Errorf("error %q", err.Error())
			}
		})
	}
}
