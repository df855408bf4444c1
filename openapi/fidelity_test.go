package openapi_test

// Request fidelity against the six vendor descriptions in ../shared/specs:
// every operation is called with arguments synthesised from its compiled
// input schema, and a loopback upstream validates each request it receives
// against the description with kin-openapi's openapi3filter (a Swagger 2.0
// description against its conversion to OpenAPI 3).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
)

// vendorSpecs are the shared descriptions and the share of their
// operations whose requests must validate.
var vendorSpecs = []string{"slack.json", "stripe.yaml", "twilio.json", "box.json", "discord.json", "openai.yaml"}

// minValid is the share of requests that must validate.
const minValid = 0.98

// compiled is a vendor description compiled once per test binary.
type compiled struct {
	spec   []byte
	result *openapi.Result
	err    error
}

var (
	compileMu   sync.Mutex
	compileOnce = map[string]*sync.Once{}
	compileRes  = map[string]*compiled{}
)

// compileSpec compiles a shared description once per test binary.
func compileSpec(t testing.TB, file string) *compiled {
	t.Helper()
	return compileFile(t, filepath.Join(specstest.Dir(t), file))
}

// compileFile compiles a description file once per test binary.
func compileFile(t testing.TB, file string) *compiled {
	t.Helper()
	compileMu.Lock()
	once := compileOnce[file]
	if once == nil {
		once = new(sync.Once)
		compileOnce[file] = once
		compileRes[file] = &compiled{}
	}
	c := compileRes[file]
	compileMu.Unlock()
	once.Do(func() {
		c.spec, c.err = os.ReadFile(file)
		if c.err == nil {
			c.result, c.err = openapi.Analyze(c.spec, nil)
		}
		if c.err == nil {
			indexedArrays(c.result.Doc)
		}
	})
	if c.err != nil {
		t.Fatalf("%s: %v", file, c.err)
	}
	return c
}

// indexedArrays adapts the validation copy of a description to what
// openapi3filter can decode: it refuses every deepObject array (a query
// parameter or a form body property; OpenAPI defines deepObject for objects
// only, Stripe uses it for arrays as a[0]=x), so those become objects
// keyed by index whose values have the items' schema, which checks the
// a[0][b]=x serialisation the dispatcher sends. The compiled registry is
// built before and is not affected.
func indexedArrays(doc *openapi3.T) {
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

// call is one operation to exercise.
type call struct {
	entity, action string
	op             *registry.Operation
	args           map[string]any
	// ownServer reports that the operation names an absolute server of
	// its own: op is then a copy aimed at the test upstream.
	ownServer bool
}

// errSkip is returned by a sender that cannot aim the call at the test
// upstream; the call is not made and not counted.
var errSkip = errors.New("skipped")

// calls lists every action of the API with synthesised arguments: every
// parameter and every top-level body property the synthesiser can satisfy.
func calls(api *registry.Spec) []call {
	var out []call
	for _, e := range api.Entities {
		for _, a := range e.Actions {
			args, _ := synth(a.Op.InputSchema, 0, true).(map[string]any)
			if a.Op.Validate(args) != nil && args["body"] != nil {
				// The synthesiser could not satisfy some optional body
				// property: send the required ones only.
				args["body"] = synth(a.Op.InputSchema.Properties["body"], 1, false)
			}
			out = append(out, call{entity: e.Name, action: a.Name, op: a.Op, args: args})
		}
	}
	return out
}

// validator is the upstream: it validates each request against the
// operation the test says it is calling.
type validator struct {
	doc  *openapi3.T
	base string // the server's path prefix, such as /v1

	mu      sync.Mutex
	want    *registry.Operation
	got     int
	lastErr error
}

func (v *validator) expect(op *registry.Operation) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.want, v.got, v.lastErr = op, 0, nil
}

func (v *validator) result() (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.got, v.lastErr
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	op := v.want
	v.mu.Unlock()
	err := v.validate(r, op)
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
func (v *validator) validate(r *http.Request, op *registry.Operation) error {
	if op == nil {
		return errors.New("unexpected request")
	}
	tmpl, _, _ := strings.Cut(op.Path, "#")
	tmpl, _, _ = strings.Cut(tmpl, "?")
	if r.Method != op.Method {
		return fmt.Errorf("method %s, want %s", r.Method, op.Method)
	}
	names, re := templateRegexp(v.base, tmpl)
	m := re.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		return fmt.Errorf("path %s does not match %s%s", r.URL.EscapedPath(), v.base, tmpl)
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

// loopbackClient refuses to dial anything but loopback.
func loopbackClient() *http.Client {
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
				return nil, fmt.Errorf("test client: refusing to dial %s", host)
			}
			return d.DialContext(ctx, network, addr)
		}},
	}
}

// bearer is the test credential.
type bearer struct{}

func (bearer) Apply(r *http.Request) error {
	r.Header.Set("Authorization", "Bearer test-token")
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

// outcome is the fidelity of one description.
type outcome struct {
	total    int
	failures []string
	skipped  []string
}

func (o outcome) valid() int { return o.total - len(o.failures) }

// exercise calls every operation of the description through send and
// validates what the upstream receives.
func exercise(t *testing.T, c *compiled, send func(v *validator, c call, baseURL string) error) outcome {
	api := c.result.Spec
	v := &validator{doc: c.result.Doc}
	srv := httptest.NewServer(v)
	defer srv.Close()
	var o outcome
	for _, cl := range calls(api) {
		o.total++
		v.base = serverPath(api)
		op, base, moved := local(cl.op)
		if moved {
			v.base = base
		}
		cl.op, cl.ownServer = op, moved
		v.expect(cl.op)
		err := send(v, cl, srv.URL+serverPath(api))
		got, verr := v.result()
		switch {
		case errors.Is(err, errSkip):
			o.total--
			o.skipped = append(o.skipped, fmt.Sprintf("%s.%s (%s)", cl.entity, cl.action, cl.op.ID))
		case err != nil && got == 0:
			o.failures = append(o.failures, fmt.Sprintf("%s.%s (%s): not sent: %v", cl.entity, cl.action, cl.op.ID, err))
		case got != 1:
			o.failures = append(o.failures, fmt.Sprintf("%s.%s (%s): %d requests", cl.entity, cl.action, cl.op.ID, got))
		case verr != nil:
			o.failures = append(o.failures, fmt.Sprintf("%s.%s (%s): %s", cl.entity, cl.action, cl.op.ID, oneLineErr(verr)))
		}
	}
	return o
}

func oneLineErr(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// report logs the outcome and fails below minValid.
func report(t *testing.T, file string, o outcome, minOps int) {
	t.Helper()
	t.Logf("%s: %d of %d requests validate (%.1f%%)", file, o.valid(), o.total, 100*float64(o.valid())/float64(max(o.total, 1)))
	for _, f := range o.failures {
		t.Logf("  invalid: %s", f)
	}
	if len(o.skipped) > 0 {
		t.Logf("  not called (own absolute server, not the instance's base URL): %s", strings.Join(o.skipped, ", "))
	}
	if o.total < minOps {
		t.Errorf("%s: only %d operations exercised, want %d", file, o.total, minOps)
	}
	if float64(o.valid()) < minValid*float64(o.total) {
		t.Errorf("%s: %d of %d requests validate, want at least %.0f%%", file, o.valid(), o.total, 100*minValid)
	}
}

// dispatch sends calls with d.
func dispatch(t *testing.T, d *registry.Dispatcher) func(v *validator, c call, baseURL string) error {
	return func(v *validator, c call, baseURL string) error {
		_, err := d.Do(t.Context(), registry.Call{Op: c.op, BaseURL: baseURL, Args: c.args, Credentials: bearer{}})
		return err
	}
}

// TestVendorRequestFidelity drives registry.Dispatcher directly.
func TestVendorRequestFidelity(t *testing.T) {
	t.Parallel()
	specstest.Dir(t)
	d := &registry.Dispatcher{Client: loopbackClient()}
	for _, file := range vendorSpecs {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			o := exercise(t, compileSpec(t, file), dispatch(t, d))
			report(t, file, o, 50)
		})
	}
}

// synth returns a value valid against s: required properties (every
// property at the top level, where the arguments are), the first enum or
// const value, formats and patterns honoured, the first branch of oneOf /
// anyOf that validates.
func synth(s *jsonschema.Schema, depth int, all bool) any {
	if s == nil {
		return "x"
	}
	if s.Const != nil {
		return *s.Const
	}
	for _, e := range s.Enum {
		if e != nil {
			return e
		}
	}
	if len(s.Enum) > 0 {
		return nil
	}
	if s.Default != nil && depth > 0 {
		var v any
		if err := json.Unmarshal(s.Default, &v); err == nil && v != nil {
			return v
		}
	}
	if branches := append(slices.Clone(s.OneOf), s.AnyOf...); len(branches) > 0 {
		check := &jsonschema.Schema{OneOf: s.OneOf, AnyOf: s.AnyOf}
		r, rerr := check.Resolve(nil)
		var first any
		for i, b := range branches {
			if isNullOnly(b) {
				continue
			}
			merged := mergeBranch(s, b)
			v := synth(merged, depth, all)
			if i == 0 || first == nil {
				first = v
			}
			if rerr == nil && r.Validate(v) == nil {
				return v
			}
		}
		if first != nil {
			return first
		}
	}
	if len(s.AllOf) > 0 {
		merged := *s
		merged.AllOf = nil
		for _, m := range s.AllOf {
			merged = *mergeBranch(&merged, m)
		}
		return synth(&merged, depth, all)
	}
	t := s.Type
	if t == "" {
		for _, x := range s.Types {
			if x != "null" {
				t = x
				break
			}
		}
	}
	if t == "" {
		switch {
		case len(s.Properties) > 0 || s.AdditionalProperties != nil:
			t = "object"
		case s.Items != nil:
			t = "array"
		default:
			return "x"
		}
	}
	switch t {
	case "object":
		out := map[string]any{}
		if depth > 8 {
			return out
		}
		req := map[string]bool{}
		for _, r := range s.Required {
			req[r] = true
		}
		for _, k := range sortedProps(s.Properties) {
			ps := s.Properties[k]
			fixed := ps != nil && (ps.Const != nil || len(ps.Enum) == 1)
			if ps == nil || ps.ReadOnly || !(req[k] || all || fixed) {
				continue
			}
			if v := synth(ps, depth+1, depth == 0 && k == "body"); v != nil || req[k] {
				out[k] = v
			}
		}
		for _, r := range s.Required {
			if _, ok := out[r]; !ok && s.Properties[r] == nil {
				out[r] = "abc"
			}
		}
		if len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil && depth < 4 {
			out["key"] = synth(s.AdditionalProperties, depth+1, false)
		}
		if len(out) == 0 && depth > 0 {
			// An empty object vanishes in form encodings: send one
			// property.
			for _, k := range sortedProps(s.Properties) {
				if ps := s.Properties[k]; ps != nil && !ps.ReadOnly {
					out[k] = synth(ps, depth+1, false)
					break
				}
			}
		}
		return out
	case "array":
		n := 1
		if s.MinItems != nil && *s.MinItems > 1 {
			n = *s.MinItems
		}
		out := make([]any, 0, n)
		for i := range n {
			v := synth(s.Items, depth+1, false)
			if i > 0 && s.Items != nil && len(s.Items.Enum) > i {
				v = s.Items.Enum[i]
			}
			if str, ok := v.(string); ok && i > 0 && s.UniqueItems {
				if n, err := strconv.Atoi(str); err == nil {
					v = strconv.Itoa(n + i)
				} else {
					v = str + strconv.Itoa(i)
				}
			}
			out = append(out, v)
		}
		return out
	case "integer", "number":
		n := 1.0
		if s.Minimum != nil {
			n = math.Ceil(*s.Minimum)
		}
		if s.ExclusiveMinimum != nil {
			n = math.Floor(*s.ExclusiveMinimum) + 1
		}
		if s.Maximum != nil && n > *s.Maximum {
			n = math.Floor(*s.Maximum)
		}
		if s.ExclusiveMaximum != nil && n >= *s.ExclusiveMaximum {
			n = math.Ceil(*s.ExclusiveMaximum) - 1
		}
		if s.MultipleOf != nil && *s.MultipleOf > 0 {
			n = math.Ceil(n / *s.MultipleOf) * *s.MultipleOf
		}
		return n
	case "boolean":
		return true
	case "null":
		return nil
	}
	return synthString(s)
}

func isNullOnly(s *jsonschema.Schema) bool {
	return s != nil && (s.Type == "null" || (len(s.Types) == 1 && s.Types[0] == "null") ||
		(len(s.Enum) == 1 && s.Enum[0] == nil))
}

// mergeBranch returns parent without its combinators, overlaid with the
// branch's keywords.
func mergeBranch(parent, branch *jsonschema.Schema) *jsonschema.Schema {
	m := *parent
	m.OneOf, m.AnyOf, m.AllOf = nil, nil, nil
	b := *branch
	if b.Type != "" || len(b.Types) > 0 {
		m.Type, m.Types = b.Type, b.Types
	}
	if b.Properties != nil {
		props := map[string]*jsonschema.Schema{}
		for k, v := range m.Properties {
			props[k] = v
		}
		for k, v := range b.Properties {
			props[k] = v
		}
		m.Properties = props
	}
	m.Required = append(slices.Clone(m.Required), b.Required...)
	for _, f := range []func(){
		func() {
			if b.Items != nil {
				m.Items = b.Items
			}
		},
		func() {
			if b.Enum != nil {
				m.Enum = b.Enum
			}
		},
		func() {
			if b.Const != nil {
				m.Const = b.Const
			}
		},
		func() {
			if b.Format != "" {
				m.Format = b.Format
			}
		},
		func() {
			if b.Pattern != "" {
				m.Pattern = b.Pattern
			}
		},
		func() {
			if b.AdditionalProperties != nil {
				m.AdditionalProperties = b.AdditionalProperties
			}
		},
		func() {
			if b.MinLength != nil {
				m.MinLength = b.MinLength
			}
			if b.MaxLength != nil {
				m.MaxLength = b.MaxLength
			}
			if b.Minimum != nil {
				m.Minimum = b.Minimum
			}
			if b.Maximum != nil {
				m.Maximum = b.Maximum
			}
			if b.MinItems != nil {
				m.MinItems = b.MinItems
			}
		},
	} {
		f()
	}
	m.OneOf, m.AnyOf, m.AllOf = b.OneOf, b.AnyOf, b.AllOf
	return &m
}

// synthString returns a string of the schema's format, pattern and length.
func synthString(s *jsonschema.Schema) string {
	// Digits satisfy the most id patterns, and a validator decoding an
	// ambiguous query parameter (oneOf string or array of ids) as an
	// array still accepts them.
	v := "123"
	switch s.Format {
	case "date-time":
		v = "2024-01-02T03:04:05Z"
	case "date":
		v = "2024-01-02"
	case "time":
		v = "03:04:05Z"
	case "email":
		v = "a@example.test"
	case "uri", "url":
		v = "https://example.test/x"
	case "uuid":
		v = "123e4567-e89b-12d3-a456-426614174000"
	case "ipv4":
		v = "192.0.2.1"
	case "ipv6":
		v = "2001:db8::1"
	case "hostname":
		v = "example.test"
	case "byte":
		v = "YWJj"
	case "int64", "int32", "snowflake":
		v = "123"
	case "binary":
		v = "data"
	}
	if s.Pattern != "" {
		if p, ok := fromPattern(s.Pattern); ok {
			v = p
		}
	}
	if s.MinLength != nil && len(v) < *s.MinLength {
		v += strings.Repeat("a", *s.MinLength-len(v))
	}
	if s.MaxLength != nil && len(v) > *s.MaxLength {
		v = v[:*s.MaxLength]
	}
	return v
}

// fromPattern generates a string matching a regular expression: the first
// alternative, the first character of every class, the minimum number of
// repetitions (at least one).
func fromPattern(p string) (string, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	var gen func(r *syntax.Regexp)
	gen = func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpLiteral:
			b.WriteString(string(r.Rune))
		case syntax.OpCharClass:
			if len(r.Rune) > 0 {
				c := r.Rune[0]
				// Prefer a letter or digit inside the class.
				for i := 0; i+1 < len(r.Rune); i += 2 {
					if r.Rune[i] <= 'a' && 'a' <= r.Rune[i+1] {
						c = 'a'
						break
					}
					if r.Rune[i] <= '1' && '1' <= r.Rune[i+1] {
						c = '1'
					}
				}
				b.WriteRune(c)
			}
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpCapture:
			for _, s := range r.Sub {
				gen(s)
			}
		case syntax.OpConcat:
			for _, s := range r.Sub {
				gen(s)
			}
		case syntax.OpAlternate:
			if len(r.Sub) > 0 {
				gen(r.Sub[0])
			}
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
			if r.Op != syntax.OpQuest {
				gen(r.Sub[0])
			}
		case syntax.OpRepeat:
			n := max(r.Min, 1)
			if r.Max >= 0 && n > r.Max {
				n = r.Max
			}
			for range n {
				gen(r.Sub[0])
			}
		}
	}
	gen(re)
	out := b.String()
	if ok, _ := regexp.MatchString(p, out); !ok {
		return "", false
	}
	return out, true
}

func sortedProps(m map[string]*jsonschema.Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
