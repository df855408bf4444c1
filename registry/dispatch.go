package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
)

// Call is one operation to send upstream.
type Call struct {
	Op *Operation
	// BaseURL is the instance's absolute http(s) base URL. Op.Server, when
	// set, takes its place (an absolute URL) or is joined to its host (a
	// path).
	BaseURL string
	// Base, optional, is BaseURL parsed (url.Parse), kept by the caller
	// from call to call: the request copies it instead of parsing
	// BaseURL again. It must not be modified.
	Base *url.URL
	// Args are the operation's arguments: one per parameter by name, plus
	// "body".
	Args map[string]any
	// Strings, when Args is nil, are the arguments instead, when every
	// one is a string: the common call, built without a map (a map and a
	// boxed value per argument were a tenth of a tools/call's
	// allocations). Names must be distinct. The request is the one Args
	// holding the same strings would build, error for error.
	Strings []StringArg
	// Credentials, when set, inject the upstream credentials last.
	Credentials Applier
	// Header holds extra headers to send, optional.
	Header http.Header
	// Servers are the instance's URLs for operation-level servers, by
	// the server's URL in the description (ServerURLs): an Op.Server
	// listed here is called at the instance's URL instead.
	Servers map[string]string
}

// StringArg is an argument whose value is a string (Call.Strings).
type StringArg struct{ Name, Value string }

// stringArgsMap is args as the map Call.Args would hold.
func stringArgsMap(args []StringArg) map[string]any {
	m := make(map[string]any, len(args))
	for _, a := range args {
		m[a.Name] = a.Value
	}
	return m
}

// Response is an upstream answer, its body read and capped.
type Response struct {
	Status      int
	Header      http.Header
	Body        []byte
	ContentType string
}

// DefaultMaxResponseBytes caps upstream bodies when the Dispatcher sets no
// cap of its own.
const DefaultMaxResponseBytes = 10 << 20

// Dispatcher sends calls upstream. Client should be the guarded outbound
// client (dial guard, timeouts, no redirects); when nil a client with a 30 s
// timeout that follows no redirect is used. Since no redirect is followed,
// a request goes straight to the client's transport, bounded by the
// client's Timeout (http.Client.Do would add a copy of the headers, kept
// for redirects, and its own timer: a tenth of a tools/call's
// allocations); a client with a cookie jar goes through Do.
//
// A transport's ResponseHeaderTimeout (the egress client's: 30 s) is
// applied by the Dispatcher's deadline: until the answer's headers are in,
// the call's deadline is the earlier of the header wait and the whole
// exchange's, then the whole exchange's; either ends the call as the
// transport's timer would have ("did not answer in time"). Its requests go
// to a copy of the transport without the timer (its own connections),
// which the transport starts per request, two allocations; other users
// of the client (event streams) keep the transport and its timer.
type Dispatcher struct {
	Client           *http.Client
	MaxResponseBytes int64 // default DefaultMaxResponseBytes

	mu      sync.Mutex
	untimed atomic.Pointer[untimedTransport]
}

// untimedTransport is a copy of from without its ResponseHeaderTimeout.
type untimedTransport struct {
	from, to *http.Transport
}

// roundTripper returns the transport the Dispatcher sends client's
// requests to and the header wait it applies itself: client's transport
// and 0, or, for an http.Transport with a ResponseHeaderTimeout, its copy
// without one and that timeout.
func (d *Dispatcher) roundTripper(client *http.Client) (http.RoundTripper, time.Duration) {
	rt := client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok || t.ResponseHeaderTimeout <= 0 {
		return rt, 0
	}
	if u := d.untimed.Load(); u != nil && u.from == t {
		return u.to, t.ResponseHeaderTimeout
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.untimed.Load()
	if u == nil || u.from != t {
		to := t.Clone()
		to.ResponseHeaderTimeout = 0
		u = &untimedTransport{from: t, to: to}
		d.untimed.Store(u)
	}
	return u.to, t.ResponseHeaderTimeout
}

var defaultClient = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Do builds and sends the call and reads the answer. A non-2xx answer is
// returned together with an *UpstreamError (its body cut at the cap); a
// transport failure or an oversized 2xx body is an *UpstreamError with code
// upstream_unavailable, an address the egress guard refuses one with code
// egress_refused.
func (d *Dispatcher) Do(ctx context.Context, c Call) (*Response, error) {
	return d.DoInto(ctx, c, nil)
}

// DoInto is Do writing the response into out when out is not nil (and
// returning out), so that a caller can keep it in an allocation it has
// anyway; out is overwritten whole.
func (d *Dispatcher) DoInto(ctx context.Context, c Call, out *Response) (*Response, error) {
	client := d.Client
	if client == nil {
		client = defaultClient
	}
	reqCtx := ctx
	var rt http.RoundTripper // nil: through client.Do
	var h deadlineHandle
	var whole time.Time   // the exchange's deadline
	headersFirst := false // the call's deadline is the header wait's until the headers are in
	if client.Jar == nil {
		var headerWait time.Duration
		rt, headerWait = d.roundTripper(client)
		if client.Timeout > 0 {
			// The whole exchange, body included (read below), as
			// http.Client.Timeout bounds it, and until the headers
			// are in, the transport's header wait; cancelled, cause
			// context.DeadlineExceeded, at the deadline
			// (upstreamDeadlines).
			// The header wait counts from the call's start, the
			// connection's setup included (the transport's timer
			// starts once the request is written).
			now := time.Now()
			whole = now.Add(client.Timeout)
			at := whole
			if headerWait > 0 && headerWait < client.Timeout {
				at, headersFirst = now.Add(headerWait), true
			}
			reqCtx, h = upstreamDeadlines.withDeadline(ctx, at)
			defer h.end()
		} else if headerWait > 0 {
			// No deadline to carry the header wait: the transport
			// keeps its timer.
			rt = client.Transport
			if rt == nil {
				rt = http.DefaultTransport
			}
		}
	}
	// A request to an http.Transport may take its credential's shared
	// header map, with the Accept-Encoding that askGzip would add.
	share := shareNone
	if t, ok := rt.(*http.Transport); ok {
		share = sharePlain
		if !t.DisableCompression && c.Op != nil && c.Op.Method != http.MethodHead {
			share = shareGzip
		}
	}
	req, shared, err := buildRequest(reqCtx, c, share)
	if err != nil {
		return nil, err
	}
	limit := d.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	var resp *http.Response
	var gzipAsked bool
	if shared {
		// askGzip's answer is the map's.
		gzipAsked = share == shareGzip
		resp, err = roundTrip(rt, req)
	} else {
		resp, gzipAsked, err = send(client, rt, req)
	}
	if err != nil {
		// The transport's error text holds the URL, which may carry a
		// credential in its query: it is not kept.
		return nil, transportError(ctx, err)
	}
	if headersFirst {
		h.postpone(whole) // the headers are in: the body has the rest
	}
	defer resp.Body.Close()
	if gzipAsked {
		if g := gunzipResponse(resp); g != nil {
			defer g.release()
		}
	}
	body, err := readUpTo(resp, limit)
	if err != nil {
		ue := transportError(ctx, err)
		ue.Status = resp.StatusCode
		return nil, ue
	}
	failed := resp.StatusCode < 200 || resp.StatusCode > 299
	if int64(len(body)) > limit {
		if !failed {
			return nil, &UpstreamError{Code: "upstream_unavailable", Status: resp.StatusCode,
				Message: fmt.Sprintf("response larger than %d bytes", limit)}
		}
		// A failure keeps its status mapping; its body is cut at the cap.
		body = body[:limit]
	}
	if out == nil {
		out = new(Response)
	}
	*out = Response{Status: resp.StatusCode, Header: resp.Header, Body: body, ContentType: resp.Header.Get("Content-Type")}
	if failed {
		return out, NewUpstreamError(resp.StatusCode, resp.Header, body)
	}
	return out, nil
}

// send sends req to rt, or with client.Do when rt is nil (a client with
// a cookie jar; else the Dispatcher follows no redirects, so Do would add
// nothing but copies). It reports whether it asked for gzip (askGzip),
// which the caller then decodes.
func send(client *http.Client, rt http.RoundTripper, req *http.Request) (*http.Response, bool, error) {
	if rt == nil {
		resp, err := client.Do(req)
		return resp, false, err
	}
	gzipAsked := askGzip(rt, req)
	resp, err := roundTrip(rt, req)
	return resp, gzipAsked, err
}

// roundTrip sends req to rt.
func roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := rt.RoundTrip(req)
	if err == nil && resp == nil {
		err = errors.New("the transport returned no response")
	}
	return resp, err
}

// readUpTo reads resp's body, at most limit+1 bytes (one more than the
// cap, to tell a body at the cap from a longer one). A body of announced
// length within the cap is read into a buffer of that size (the transport
// holds the body to its Content-Length), without io.ReadAll's growing
// copies.
func readUpTo(resp *http.Response, limit int64) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= limit {
		body := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit+1))
}

func transportError(ctx context.Context, err error) *UpstreamError {
	if ue, ok := EgressRefused(err); ok {
		return ue
	}
	msg := "the upstream service could not be reached"
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		msg = "the upstream service did not answer in time"
	case ctx.Err() != nil:
		msg = "the request was canceled"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection reset"):
		msg = "the upstream service closed the connection"
	}
	return &UpstreamError{Code: "upstream_unavailable", Message: msg}
}

func invalidArgs(op *Operation, format string, args ...any) error {
	name := ""
	if op != nil {
		name = op.Name + ": "
	}
	return switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s%s", name, fmt.Sprintf(format, args...))
}

// BuildRequest builds the upstream request of a call: it validates the
// arguments, fills the path, query, header and cookie parameters, encodes
// the body in the operation's content type, and applies the credentials
// last.
func BuildRequest(ctx context.Context, c Call) (*http.Request, error) {
	req, _, err := buildRequest(ctx, c, shareNone)
	return req, err
}

// What a request's header map may be (buildRequest).
const (
	shareNone  = iota // its own
	sharePlain        // shared, without Accept-Encoding (sharedHeader)
	shareGzip         // shared, with Accept-Encoding: gzip
)

// buildRequest is BuildRequest; with share other than shareNone, a request
// that needs no header but Accept and the credential's, and no body, gets
// the shared read-only header map of its credential (sharedHeader), with
// Accept-Encoding: gzip for shareGzip, and shared reports it.
func buildRequest(ctx context.Context, c Call, share int) (req *http.Request, shared bool, err error) {
	op := c.Op
	if op == nil {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config", "no operation to call")
	}
	if err := op.Load(); err != nil {
		return nil, false, err
	}
	args := argSet{m: c.Args, list: c.Strings}
	if args.m == nil && (args.list == nil || !op.validStrings(args.list)) {
		// Without a map, only arguments certainly valid are built from
		// the list; anything else (and every error's text) is the map's.
		args = argSet{m: stringArgsMap(args.list)}
	}
	if args.m != nil {
		var unknown []string
		for k := range args.m {
			if !op.takesArg(k) {
				unknown = append(unknown, fmt.Sprintf("%q", truncateString(k, 40)))
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return nil, false, invalidArgs(op, "unknown %s; expects %s", strings.Join(unknown, ", "), op.expects())
		}
		if err := op.Validate(args.m); err != nil {
			return nil, false, err
		}
	}
	server := op.Server
	if s, ok := c.Servers[server]; ok && s != "" {
		server = s
	}
	u, err := baseURL(c.BaseURL, c.Base, server)
	if err != nil {
		return nil, false, err
	}
	if u.RawPath, err = fillPath(strings.TrimRight(u.EscapedPath(), "/")+"/", op, args); err != nil {
		return nil, false, err
	}
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, false, invalidArgs(op, "a path parameter cannot be encoded")
	}

	var query []string
	if u.RawQuery != "" {
		query = append(query, u.RawQuery)
	}
	if q := templateQuery(op.Path); q != "" {
		query = append(query, q)
	}
	header := http.Header{}
	var cookies []*http.Cookie
	for _, p := range op.Params {
		if p.In == "path" {
			continue
		}
		v, s, ok := args.get(p.ArgName())
		if !ok {
			continue
		}
		switch p.In {
		case "query":
			if v == nil {
				// A string is one pair in every style, as is.
				query = append(query, url.QueryEscape(p.Name)+"="+url.QueryEscape(s))
				continue
			}
			if p.ContentType != "" {
				query = append(query, url.QueryEscape(p.Name)+"="+url.QueryEscape(contentValue(v)))
				continue
			}
			for _, kv := range queryPairs(p, v) {
				query = append(query, url.QueryEscape(kv[0])+"="+url.QueryEscape(kv[1]))
			}
		case "header":
			if v != nil {
				s = simpleValue(v, explode(p, false))
				if p.ContentType != "" {
					s = contentValue(v)
				}
			}
			if strings.ContainsAny(s, "\r\n") {
				return nil, false, invalidArgs(op, "header parameter %q holds a line break", p.Name)
			}
			header.Set(p.Name, s)
		case "cookie":
			if v != nil {
				s = simpleValue(v, false)
				if p.ContentType != "" {
					s = contentValue(v)
				}
			}
			if strings.ContainsAny(s, ";\r\n\x00") {
				return nil, false, invalidArgs(op, "cookie parameter %q holds a character a cookie cannot carry", p.Name)
			}
			cookies = append(cookies, &http.Cookie{Name: p.Name, Value: s, Quoted: false})
		}
	}
	u.RawQuery = strings.Join(query, "&")

	var body io.Reader
	contentType := ""
	if op.Body != nil {
		if v, s, ok := args.get("body"); ok {
			if v == nil {
				v = s
			}
			b, ct, err := encodeBody(op, v)
			if err != nil {
				return nil, false, err
			}
			body, contentType = bytes.NewReader(b), ct
		}
	}
	u.Host = strings.TrimSuffix(u.Host, ":")
	if share != shareNone && ctx != nil && body == nil && len(c.Header) == 0 && len(header) == 0 && len(cookies) == 0 &&
		(op.Accept == "" || op.Accept == "application/json") && standardMethod(op.Method) {
		if h, ok := sharedHeader(c.Credentials, share == shareGzip); ok {
			// What NewRequestWithContext makes of a request without a
			// body, but for the header map (TestSharedHeaderRequest):
			// the request is the only allocation besides its URL.
			nu := new(url.URL)
			*nu = u
			r := http.Request{Method: op.Method, URL: nu, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Host: u.Host}
			return r.WithContext(ctx), true, nil
		}
	}
	// The request takes u as built, rather than u written out and parsed
	// again: its Host as NewRequest sets it (an empty port dropped).
	req, err = http.NewRequestWithContext(ctx, op.Method, "", body)
	if err != nil {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_config", "the request for %s cannot be built", op.Name)
	}
	*req.URL = u // into the URL NewRequest made
	req.Host = u.Host
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept := op.Accept; accept == "" || accept == "application/json" {
		req.Header["Accept"] = acceptJSON
	} else {
		req.Header.Set("Accept", accept)
	}
	if c.Credentials != nil {
		apply := c.Credentials.Apply
		if oa, ok := c.Credentials.(OperationApplier); ok {
			apply = func(req *http.Request) error { return oa.ApplyOperation(op, req) }
		}
		if err := apply(req); err != nil {
			return nil, false, fmt.Errorf("applying credentials for %s: %w", op.Name, err)
		}
	}
	return req, false, nil
}

// argSet is a call's arguments: a map, or a list of strings (Call.Strings)
// when m is nil.
type argSet struct {
	m    map[string]any
	list []StringArg
}

// get returns the argument name: a value (v), or a string (s, v nil),
// which every style serialises as it is. An argument that is null counts
// as absent.
func (a argSet) get(name string) (v any, s string, ok bool) {
	if a.m == nil {
		for _, arg := range a.list {
			if arg.Name == name {
				return nil, arg.Value, true
			}
		}
		return nil, "", false
	}
	v, ok = a.m[name]
	if !ok || v == nil {
		return nil, "", false
	}
	if s, isString := v.(string); isString {
		return nil, s, true
	}
	return v, "", true
}

// standardMethod reports whether m is one of the methods net/http names,
// which NewRequestWithContext accepts (it refuses a method that is not a
// token).
func standardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// acceptJSON is the Accept header of most upstream requests, shared:
// header values are never modified in place (Add and Set replace the
// slice).
var acceptJSON = []string{"application/json"}

// takesArg reports whether name is one of op's arguments: a parameter's
// or "body". (A scan, not a map: operations have few parameters, and
// this runs on every call.)
func (op *Operation) takesArg(name string) bool {
	if name == "body" && op.Body != nil {
		return true
	}
	for _, p := range op.Params {
		if p.ArgName() == name {
			return true
		}
	}
	return false
}

// baseURL returns the URL the operation's path is joined to: base
// (parsed, as parsed when not nil) or server.
func baseURL(base string, parsed *url.URL, server string) (url.URL, error) {
	raw := base
	if server != "" && !strings.HasPrefix(server, "/") {
		raw, parsed = server, nil
	}
	if parsed == nil {
		p, err := url.Parse(raw)
		if err != nil {
			return url.URL{}, switchboard.E(switchboard.ErrInvalid, "invalid_config", "the base URL must be an absolute http or https URL")
		}
		parsed = p
	}
	u := *parsed
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return url.URL{}, switchboard.E(switchboard.ErrInvalid, "invalid_config", "the base URL must be an absolute http or https URL")
	}
	if strings.HasPrefix(server, "/") {
		u.Path, u.RawPath = strings.TrimRight(server, "/"), ""
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// fillPath substitutes the path template's parameters, percent-escaped,
// and returns it after prefix, without its leading slashes. Anything
// after a "#" or "?" in the template (some vendors use them to tell
// operations apart) is not part of the request path; a "?" part is sent
// as query (see templateQuery).
func fillPath(prefix string, op *Operation, args argSet) (string, error) {
	tmpl, _, _ := strings.Cut(op.Path, "#")
	tmpl, _, _ = strings.Cut(tmpl, "?")
	// Leading slashes can only be the template's: values are escaped,
	// labels and matrices start with "." and ";".
	tmpl = strings.TrimLeft(tmpl, "/")
	params := map[string]Param{}
	for _, p := range op.Params {
		if p.In == "path" {
			params[p.Name] = p
		}
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(tmpl) + 32)
	b.WriteString(prefix)
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(tmpl)
			break
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:i])
		name := tmpl[i+1 : i+j]
		tmpl = tmpl[i+j+1:]
		p, declared := params[name]
		if !declared {
			p = Param{Name: name, In: "path"}
		}
		v, s, ok := args.get(p.ArgName())
		if !ok {
			return "", invalidArgs(op, "missing required path parameter %q; expects %s", p.ArgName(), op.expects())
		}
		if v != nil {
			s = simpleValue(v, explode(p, false))
			if p.ContentType != "" {
				s = contentValue(v)
			}
		}
		if s == "" || s == "." || s == ".." {
			return "", invalidArgs(op, "path parameter %q must not be empty, \".\" or \"..\"", name)
		}
		switch p.Style {
		case "label":
			b.WriteString("." + url.PathEscape(s))
		case "matrix":
			b.WriteString(";" + url.PathEscape(name) + "=" + url.PathEscape(s))
		default:
			b.WriteString(url.PathEscape(s))
		}
	}
	return b.String(), nil
}

// templateQuery returns the fixed query some vendors write into a path
// template ("/responses?beta=true" tells two operations apart), escaped.
func templateQuery(path string) string {
	path, _, _ = strings.Cut(path, "#")
	_, q, ok := strings.Cut(path, "?")
	if !ok || q == "" {
		return ""
	}
	values, err := url.ParseQuery(q)
	if err != nil {
		return ""
	}
	return values.Encode()
}

// explode returns the parameter's explode setting or the default.
func explode(p Param, def bool) bool {
	if p.Explode != nil {
		return *p.Explode
	}
	return def
}

// queryPairs serializes one query parameter: form style (explode true by
// default), spaceDelimited, pipeDelimited or deepObject.
func queryPairs(p Param, v any) [][2]string {
	style := p.Style
	if style == "" {
		style = "form"
	}
	ex := explode(p, style == "form")
	switch val := v.(type) {
	case []any:
		if ex {
			out := make([][2]string, 0, len(val))
			for _, x := range val {
				out = append(out, [2]string{p.Name, scalar(x)})
			}
			return out
		}
		sep := ","
		switch style {
		case "spaceDelimited":
			sep = " "
		case "pipeDelimited":
			sep = "|"
		}
		parts := make([]string, len(val))
		for i, x := range val {
			parts[i] = scalar(x)
		}
		return [][2]string{{p.Name, strings.Join(parts, sep)}}
	case map[string]any:
		if style == "deepObject" {
			var out [][2]string
			flatten(p.Name, val, &out)
			return out
		}
		keys := sortedMapKeys(val)
		if ex {
			out := make([][2]string, 0, len(keys))
			for _, k := range keys {
				out = append(out, [2]string{k, scalar(val[k])})
			}
			return out
		}
		parts := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			parts = append(parts, k, scalar(val[k]))
		}
		return [][2]string{{p.Name, strings.Join(parts, ",")}}
	}
	return [][2]string{{p.Name, scalar(v)}}
}

// simpleValue serializes a value in OpenAPI's simple style.
func simpleValue(v any, ex bool) string {
	switch val := v.(type) {
	case []any:
		parts := make([]string, len(val))
		for i, x := range val {
			parts[i] = scalar(x)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		keys := sortedMapKeys(val)
		parts := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			if ex {
				parts = append(parts, k+"="+scalar(val[k]))
			} else {
				parts = append(parts, k, scalar(val[k]))
			}
		}
		return strings.Join(parts, ",")
	}
	return scalar(v)
}

// scalar renders a JSON value as text; composite values become JSON.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case json.Number:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// flatten encodes v under prefix with bracketed keys, Stripe style:
// a[b][c]=x, arrays as a[0]=x, a[1]=y.
func flatten(prefix string, v any, out *[][2]string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedMapKeys(x) {
			flatten(prefix+"["+k+"]", x[k], out)
		}
	case []any:
		for i, e := range x {
			flatten(prefix+"["+strconv.Itoa(i)+"]", e, out)
		}
	case nil:
	default:
		*out = append(*out, [2]string{prefix, scalar(x)})
	}
}

// encodeBody encodes the body argument in the operation's content type.
func encodeBody(op *Operation, v any) ([]byte, string, error) {
	ct := op.Body.ContentType
	base, _, _ := strings.Cut(ct, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	switch {
	case base == "application/x-www-form-urlencoded":
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, "", invalidArgs(op, "body must be an object")
		}
		var pairs [][2]string
		for _, k := range sortedMapKeys(obj) {
			pairs = append(pairs, formPairs(k, obj[k], op.Body.Encoding[k])...)
		}
		parts := make([]string, len(pairs))
		for i, kv := range pairs {
			parts[i] = url.QueryEscape(kv[0]) + "=" + url.QueryEscape(kv[1])
		}
		return []byte(strings.Join(parts, "&")), "application/x-www-form-urlencoded", nil
	case base == "multipart/form-data":
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, "", invalidArgs(op, "body must be an object")
		}
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, k := range sortedMapKeys(obj) {
			values := []any{obj[k]}
			enc := op.Body.Encoding[k]
			var ps *jsonschema.Schema
			if s := op.Body.Schema; s != nil {
				ps = s.Properties[k]
			}
			if list, ok := obj[k].([]any); ok && !isJSONType(enc.ContentType) {
				values = list
				if ps != nil {
					ps = ps.Items
				}
			}
			binary := ps != nil && (ps.Format == "binary" || ps.ContentMediaType != "")
			for _, x := range values {
				if x == nil {
					continue
				}
				var err error
				switch {
				case binary:
					var fw io.Writer
					if fw, err = w.CreateFormFile(k, k); err == nil {
						_, err = io.WriteString(fw, scalar(x))
					}
				case enc.ContentType != "" && !isJSONType(enc.ContentType) && !isComposite(x) && !strings.Contains(enc.ContentType, ","):
					var fw io.Writer
					h := textproto.MIMEHeader{}
					h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, escapeQuotes(k)))
					h.Set("Content-Type", enc.ContentType)
					if fw, err = w.CreatePart(h); err == nil {
						_, err = io.WriteString(fw, scalar(x))
					}
				case isJSONType(enc.ContentType) || isComposite(x):
					var fw io.Writer
					h := textproto.MIMEHeader{}
					h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, escapeQuotes(k)))
					h.Set("Content-Type", "application/json")
					if fw, err = w.CreatePart(h); err == nil {
						_, err = io.WriteString(fw, contentValue(x))
					}
				default:
					err = w.WriteField(k, scalar(x))
				}
				if err != nil {
					return nil, "", invalidArgs(op, "body field %q cannot be encoded", truncateString(k, 40))
				}
			}
		}
		if err := w.Close(); err != nil {
			return nil, "", invalidArgs(op, "body cannot be encoded")
		}
		return buf.Bytes(), w.FormDataContentType(), nil
	case strings.Contains(base, "json"):
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", invalidArgs(op, "body cannot be encoded as JSON")
		}
		return b, ct, nil
	}
	if s, ok := v.(string); ok {
		return []byte(s), ct, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "", invalidArgs(op, "body cannot be encoded")
	}
	return b, ct, nil
}

func sortedMapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// formPairs serialises one top-level property of a form-urlencoded body
// by its encoding: scalars as k=v; arrays of scalars as repeated keys
// (form, exploded: the default), joined by ",", " " or "|" (not exploded,
// spaceDelimited, pipeDelimited) or indexed k[0]=v (deepObject); objects,
// and arrays holding objects, with bracketed keys k[a][b]=v (deepObject,
// and the common convention when no encoding is given) or as k=a,1,b,2
// (form, not exploded); a property whose encoding is JSON as its JSON text.
func formPairs(k string, v any, enc Encoding) [][2]string {
	if v == nil {
		return nil
	}
	if isJSONType(enc.ContentType) && isComposite(v) {
		return [][2]string{{k, contentValue(v)}}
	}
	style := enc.Style
	if style == "" {
		style = "form"
	}
	ex := style == "form"
	if enc.Explode != nil {
		ex = *enc.Explode
	}
	switch val := v.(type) {
	case []any:
		if style == "deepObject" || !allScalar(val) {
			var out [][2]string
			flatten(k, val, &out)
			return out
		}
		return queryPairs(Param{Name: k, In: "query", Style: style, Explode: &ex}, val)
	case map[string]any:
		if style == "form" && !ex {
			return queryPairs(Param{Name: k, In: "query", Style: style, Explode: &ex}, val)
		}
		var out [][2]string
		flatten(k, val, &out)
		return out
	}
	return [][2]string{{k, scalar(v)}}
}

func allScalar(list []any) bool {
	for _, x := range list {
		if isComposite(x) {
			return false
		}
	}
	return true
}

func isComposite(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return true
	}
	return false
}

// isJSONType reports whether a media type is JSON (application/json or a
// +json type).
func isJSONType(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	return base == "application/json" || strings.HasSuffix(base, "+json")
}

// contentValue serialises a parameter or part described by a media type:
// strings as they are, anything else as JSON.
func contentValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return scalar(v)
	}
	return string(b)
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

func escapeQuotes(s string) string { return quoteEscaper.Replace(s) }
