// Package fidelity measures request fidelity of a compiled OpenAPI
// description: every operation is called with arguments synthesised from
// its input schema, and a loopback upstream validates each request it
// receives against the description with kin-openapi's openapi3filter (a
// Swagger 2.0 description against its conversion to OpenAPI 3).
//
// The fidelity tests of package openapi and "switchboard connector
// fidelity" both use it.
package fidelity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/switchboardhq/switchboard/registry"
)

// IndexedArrays adapts the validation copy of a description to what
// openapi3filter can decode: it refuses every deepObject array (a query
// parameter or a form body property; OpenAPI defines deepObject for objects
// only, Stripe uses it for arrays as a[0]=x), so those become objects
// keyed by index whose values have the items' schema, which checks the
// a[0][b]=x serialisation the dispatcher sends. Call it after the registry
// is compiled: the compiled registry is not affected.
func IndexedArrays(doc *openapi3.T) {
	asObject := func(s *openapi3.SchemaRef) *openapi3.SchemaRef {
		if s == nil || s.Value == nil || !s.Value.Type.Is("array") || s.Value.Items == nil {
			return s
		}
		return &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"object"},
			AdditionalProperties: openapi3.AdditionalProperties{Schema: s.Value.Items}}}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
				for _, p := range list {
					if p != nil && p.Value != nil && p.Value.In == "query" && p.Value.Style == "deepObject" {
						p.Value.Schema = asObject(p.Value.Schema)
					}
				}
			}
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/x-www-form-urlencoded")
			if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
				continue
			}
			for name, enc := range mt.Encoding {
				if enc != nil && enc.Style == "deepObject" {
					if ps := mt.Schema.Value.Properties[name]; ps != nil {
						mt.Schema.Value.Properties[name] = asObject(ps)
					}
				}
			}
		}
	}
}

// Call is one operation to exercise.
type Call struct {
	Entity, Action string
	Op             *registry.Operation
	Args           map[string]any
	// OwnServer reports that the operation names an absolute server of
	// its own: Op is then a copy aimed at the loopback upstream.
	OwnServer bool
}

// ErrSkip is returned by a Sender that cannot aim the call at the
// loopback upstream; the call is not made and not counted.
var ErrSkip = errors.New("skipped")

// Calls lists every action of the API with synthesised arguments: every
// parameter and every top-level body property the synthesiser can satisfy.
func Calls(api *registry.Spec) []Call {
	var out []Call
	for _, e := range api.Entities {
		for _, a := range e.Actions {
			args, _ := Synth(a.Op.InputSchema, 0, true).(map[string]any)
			if a.Op.Validate(args) != nil && args["body"] != nil {
				// The synthesiser could not satisfy some optional body
				// property: send the required ones only.
				args["body"] = Synth(a.Op.InputSchema.Properties["body"], 1, false)
			}
			out = append(out, Call{Entity: e.Name, Action: a.Name, Op: a.Op, Args: args})
		}
	}
	return out
}

// validator is the upstream: it validates each request against the
// operation the runner says it is calling.
type validator struct {
	doc  *openapi3.T
	base string // the server's path prefix, such as /v1

	mu      sync.Mutex
	want    *registry.Operation
	got     int
	lastErr error
}

func (v *validator) expect(op *registry.Operation, base string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.want, v.base, v.got, v.lastErr = op, base, 0, nil
}

func (v *validator) result() (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.got, v.lastErr
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	op, base := v.want, v.base
	v.mu.Unlock()
	err := v.validate(r, op, base)
	v.mu.Lock()
	v.got++
	v.lastErr = err
	v.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
	}
	fmt.Fprint(w, `{"ok": true}`)
}

// validate checks r against op's path template and the description.
func (v *validator) validate(r *http.Request, op *registry.Operation, base string) error {
	if op == nil {
		return errors.New("unexpected request")
	}
	tmpl, _, _ := strings.Cut(op.Path, "#")
	tmpl, _, _ = strings.Cut(tmpl, "?")
	if r.Method != op.Method {
		return fmt.Errorf("method %s, want %s", r.Method, op.Method)
	}
	names, re := templateRegexp(base, tmpl)
	m := re.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		return fmt.Errorf("path %s does not match %s%s", r.URL.EscapedPath(), base, tmpl)
	}
	params := map[string]string{}
	for i, n := range names {
		s, err := url.PathUnescape(m[i+1])
		if err != nil {
			return fmt.Errorf("path parameter %s: %v", n, err)
		}
		params[n] = s
	}
	item := v.doc.Paths.Value(op.Path)
	if item == nil {
		return fmt.Errorf("no path item %s", op.Path)
	}
	operation := item.GetOperation(op.Method)
	if operation == nil {
		return fmt.Errorf("no operation %s %s", op.Method, op.Path)
	}
	route := &routers.Route{Spec: v.doc, Path: op.Path, PathItem: item, Method: op.Method, Operation: operation}
	return openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

var templateParam = regexp.MustCompile(`\{([^{}]+)\}`)

// templateRegexp matches a request path against base + tmpl, capturing
// the parameters (mid-segment ones too).
func templateRegexp(base, tmpl string) ([]string, *regexp.Regexp) {
	var names []string
	var b strings.Builder
	b.WriteString("^" + regexp.QuoteMeta(strings.TrimRight(base, "/")))
	last := 0
	for _, m := range templateParam.FindAllStringSubmatchIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		b.WriteString("([^/]+?)")
		names = append(names, tmpl[m[2]:m[3]])
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]) + "$")
	return names, regexp.MustCompile(b.String())
}

// LoopbackClient refuses to dial anything but loopback.
func LoopbackClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return nil, fmt.Errorf("fidelity client: refusing to dial %s", host)
			}
			return d.DialContext(ctx, network, addr)
		}},
	}
}

// Bearer is a placeholder credential: the validating upstream does not
// check authentication.
type Bearer struct{}

// Apply sets a fixed bearer token.
func (Bearer) Apply(r *http.Request) error {
	r.Header.Set("Authorization", "Bearer fidelity-token")
	return nil
}

// serverPath is the path of the API's first server ("/v1"), the prefix of
// every request path.
func serverPath(api *registry.Spec) string {
	if len(api.Servers) == 0 {
		return ""
	}
	u, err := url.Parse(api.Servers[0])
	if err != nil {
		return ""
	}
	return strings.TrimRight(u.Path, "/")
}

// local returns op, or a copy whose absolute server is replaced by its
// path, so that the call reaches the loopback upstream.
func local(op *registry.Operation) (*registry.Operation, string, bool) {
	if op.Server == "" || strings.HasPrefix(op.Server, "/") {
		return op, "", false
	}
	u, err := url.Parse(op.Server)
	if err != nil {
		return op, "", false
	}
	cp := *op
	cp.Server = "/" + strings.TrimLeft(u.Path, "/")
	return &cp, strings.TrimRight(u.Path, "/"), true
}

// A Sender makes one call against the upstream at baseURL; it returns
// ErrSkip when it cannot aim the call there.
type Sender func(c Call, baseURL string) error

// Dispatch sends calls with d, the registry's request building.
func Dispatch(ctx context.Context, d *registry.Dispatcher) Sender {
	return func(c Call, baseURL string) error {
		_, err := d.Do(ctx, registry.Call{Op: c.Op, BaseURL: baseURL, Args: c.Args, Credentials: Bearer{}})
		return err
	}
}

// Status is the result of one operation.
type Status string

const (
	OK      Status = "ok"
	Invalid Status = "invalid"
	Skipped Status = "skipped"
)

// Result is the outcome of one operation.
type Result struct {
	Entity, Action, OperationID string
	Status                      Status
	// Reason is empty for OK; Group is the reason's kind, for counting.
	Reason, Group string
}

// Outcome is the fidelity of one description.
type Outcome struct {
	Results []Result
	// Total counts the operations called (not skipped).
	Total int
	// Failures and Skipped describe, one line each, the invalid and the
	// skipped operations.
	Failures, Skipped []string
	// Called and Failed hold the operation ids exercised and those whose
	// request did not validate.
	Called, Failed map[string]bool
}

// Valid is the number of called operations whose request validated.
func (o Outcome) Valid() int { return o.Total - len(o.Failures) }

// Run calls every operation of api through send and validates what the
// loopback upstream receives against doc.
func Run(api *registry.Spec, doc *openapi3.T, send Sender) Outcome {
	v := &validator{doc: doc}
	srv := httptest.NewServer(v)
	defer srv.Close()
	o := Outcome{Called: map[string]bool{}, Failed: map[string]bool{}}
	for _, cl := range Calls(api) {
		o.Total++
		base := serverPath(api)
		op, opBase, moved := local(cl.Op)
		if moved {
			base = opBase
		}
		cl.Op, cl.OwnServer = op, moved
		v.expect(cl.Op, base)
		err := send(cl, srv.URL+serverPath(api))
		got, verr := v.result()
		res := Result{Entity: cl.Entity, Action: cl.Action, OperationID: cl.Op.ID, Status: Invalid}
		if !errors.Is(err, ErrSkip) {
			o.Called[cl.Op.ID] = true
		}
		switch {
		case errors.Is(err, ErrSkip):
			o.Total--
			res.Status, res.Reason, res.Group = Skipped, "own absolute server", "own absolute server (not called)"
			if !cl.OwnServer {
				res.Reason, res.Group = oneLine(err), "not aimed at the upstream (not called)"
			}
			o.Skipped = append(o.Skipped, fmt.Sprintf("%s.%s (%s)", cl.Entity, cl.Action, cl.Op.ID))
		case err != nil && got == 0:
			res.Reason, res.Group = "not sent: "+oneLine(err), "not sent"
		case got != 1:
			res.Reason, res.Group = fmt.Sprintf("%d requests", got), "not exactly one request"
		case verr != nil:
			res.Reason, res.Group = oneLine(verr), group(verr)
		default:
			res.Status = OK
		}
		if res.Status == Invalid {
			o.Failed[cl.Op.ID] = true
			o.Failures = append(o.Failures, fmt.Sprintf("%s.%s (%s): %s", cl.Entity, cl.Action, cl.Op.ID, res.Reason))
		}
		o.Results = append(o.Results, res)
	}
	return o
}

// group names the kind of a validation error, for counting.
func group(err error) string {
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		switch {
		case re.Parameter != nil:
			return re.Parameter.In + " parameter invalid"
		case re.RequestBody != nil:
			return "request body invalid"
		}
		return "request invalid"
	}
	var se *openapi3filter.SecurityRequirementsError
	if errors.As(err, &se) {
		return "security requirements"
	}
	s := err.Error()
	switch {
	case strings.HasPrefix(s, "method "):
		return "wrong method"
	case strings.HasPrefix(s, "path "):
		return "wrong path"
	}
	return "other"
}

func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
