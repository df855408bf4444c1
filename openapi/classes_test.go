package openapi_test

// One test per class of failure of issue 14 ("OpenAPI fidelity, second
// pass"), each on a minimal description written for it in testdata.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/registry"
)

// analyzeFixture compiles a testdata description.
func analyzeFixture(t *testing.T, file string) *openapi.Result {
	t.Helper()
	spec, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatalf("Analyze(%s): %v", file, err)
	}
	return r
}

func operation(t *testing.T, r *openapi.Result, id string) *registry.Operation {
	t.Helper()
	op, ok := r.Spec.Operation(id)
	if !ok {
		t.Fatalf("operation %s not compiled; findings %v", id, r.Findings)
	}
	return op
}

// TestReadOnlyNotRequiredInRequests (class 4): readOnly properties are not
// part of a request schema, nor of its required list (here through allOf),
// and writeOnly ones are not part of the answer's schema; a request
// without the server-set fields is valid and sent.
func TestReadOnlyNotRequiredInRequests(t *testing.T) {
	t.Parallel()
	r := analyzeFixture(t, "testdata/readonly.yaml")
	op := operation(t, r, "createNote")
	body := op.InputSchema.Properties["body"]
	for _, name := range []string{"id", "created"} {
		if body.Properties[name] != nil || slices.Contains(body.Required, name) {
			t.Errorf("readOnly %q is in the request schema: %v", name, body.Required)
		}
	}
	if body.Properties["pin"] == nil || !slices.Contains(body.Required, "pin") || !slices.Contains(body.Required, "text") {
		t.Errorf("request schema lost a writable property: %+v", body.Required)
	}
	if err := op.Validate(map[string]any{"body": map[string]any{"text": "hi", "pin": "1234"}}); err != nil {
		t.Errorf("a request without the readOnly fields is refused: %v", err)
	}
	out, _ := json.Marshal(op.OutputSchema)
	if strings.Contains(string(out), `"pin"`) || !strings.Contains(string(out), `"created"`) {
		t.Errorf("output schema %s: want created and no writeOnly pin", out)
	}
	d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
	o := exercise(t, &compiled{result: r}, dispatch(t, d))
	if o.Total != 1 || len(o.Failures) > 0 {
		t.Errorf("upstream validation: %d calls, failures %v", o.Total, o.Failures)
	}
}

// TestBodyErrorNamesPath (class 6): a body validation error names the JSON
// path of the failing field and what was expected, never the value, in a
// short message.
func TestBodyErrorNamesPath(t *testing.T) {
	t.Parallel()
	op := operation(t, analyzeFixture(t, "testdata/errorpath.yaml"), "createOrder")
	const canary = "CANARY-VALUE-93"
	item := func(qty any) map[string]any { return map[string]any{"sku": "a", "qty": qty} }
	for _, tt := range []struct {
		name string
		body map[string]any
		want []string
	}{
		{"minimum in an array element", map[string]any{"customer": map[string]any{"email": "a"}, "items": []any{item(1), item(0)}},
			[]string{`at body.items[1].qty`, `expected minimum 1`}},
		{"type", map[string]any{"customer": map[string]any{"email": "a"}, "items": []any{item(canary)}},
			[]string{`at body.items[0].qty`, `expected type integer`}},
		{"enum", map[string]any{"customer": map[string]any{"email": "a", "tier": canary}, "items": []any{}},
			[]string{`at body.customer.tier`, `expected one of ["free","paid"]`}},
		{"required", map[string]any{"customer": map[string]any{}, "items": []any{}},
			[]string{`at body.customer`, `expected required properties ["email"]`}},
		{"required at the top of the body", map[string]any{"items": []any{}},
			[]string{`argument "body" does not match its schema: expected required properties ["customer"]`}},
	} {
		err := op.Validate(map[string]any{"body": tt.body})
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		msg := err.Error()
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tt.name, msg, w)
			}
		}
		if strings.Contains(msg, canary) {
			t.Errorf("%s: the value is echoed: %q", tt.name, msg)
		}
		reason, _, _ := strings.Cut(msg, "; expects")
		if len(reason) > 400 {
			t.Errorf("%s: %d bytes before the operation's summary", tt.name, len(reason))
		}
	}
}

// TestBadReferencesRepaired (class 1): a deep reference (into another
// schema's oneOf) and a response referring to a requestBodies component
// are inlined from the document; a reference to nothing leaves out only
// the operation that depends on it (through a component), named with its
// JSON path; the rest compiles and its requests validate.
func TestBadReferencesRepaired(t *testing.T) {
	t.Parallel()
	r := analyzeFixture(t, "testdata/badrefs.yaml")
	for _, id := range []string{"listPets", "createPet", "getPet", "deletePet"} {
		operation(t, r, id)
	}
	if _, ok := r.Spec.Operation("listOwners"); ok {
		t.Error("listOwners, which depends on a reference to nothing, was compiled")
	}
	want := map[string]string{
		`$.paths['/pets'].get.responses['200'].content['application/json'].schema`: `"#/components/schemas/PetOrList/oneOf/1" inlined`,
		`$.paths['/pets'].post.responses['201']`:                                   `refers to a requestBodies component where a response is expected`,
		`$.components.schemas.Owners.items`:                                        `reference to nothing`,
		`$.paths['/owners'].get`:                                                   `operation listOwners left out`,
	}
	for _, f := range r.Findings {
		if w, ok := want[f.Path]; ok && strings.Contains(f.Message, w) {
			delete(want, f.Path)
		}
	}
	for path, msg := range want {
		t.Errorf("no finding %q at %s in %v", msg, path, r.Findings)
	}
	if !slices.ContainsFunc(r.Spec.Problems, func(p string) bool { return strings.Contains(p, "listOwners") }) {
		t.Errorf("problems %v do not name listOwners", r.Spec.Problems)
	}
	list := operation(t, r, "listPets")
	if out, _ := json.Marshal(list.OutputSchema); !strings.Contains(string(out), `"array"`) {
		t.Errorf("listPets answers %s, want the inlined array branch", out)
	}
	d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
	o := exercise(t, &compiled{result: r}, dispatch(t, d))
	if o.Total != 4 || len(o.Failures) > 0 {
		t.Errorf("upstream validation: %d calls, failures %v", o.Total, o.Failures)
	}
}

// TestDiscriminatorPicksBranch (class 5): overlapping oneOf branches with a
// discriminator (one mapped, one by its component name) accept a body that
// matches both, the discriminator deciding; an unknown value is refused;
// the schema the agent sees says which property decides; the request the
// agent sends validates upstream.
func TestDiscriminatorPicksBranch(t *testing.T) {
	t.Parallel()
	r := analyzeFixture(t, "testdata/discriminator.yaml")
	op := operation(t, r, "createPet")
	for _, body := range []map[string]any{
		{"petType": "cat", "name": "Tom"},
		{"petType": "Dog", "name": "Rex"},
		{"petType": "cat", "name": "Tom", "indoor": true},
	} {
		if err := op.Validate(map[string]any{"body": body}); err != nil {
			t.Errorf("%v refused: %v", body, err)
		}
	}
	for _, body := range []map[string]any{{"petType": "bird", "name": "Tweety"}, {"name": "Nobody"}, {"petType": "Cat", "name": "Tom"}} {
		if err := op.Validate(map[string]any{"body": body}); err == nil {
			t.Errorf("%v accepted", body)
		}
	}
	if d := op.InputSchema.Properties["body"].Description; !strings.Contains(d, `"petType" decides`) {
		t.Errorf("body schema description %q does not name the deciding property", d)
	}
	d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
	o := exercise(t, &compiled{result: r}, dispatch(t, d))
	if o.Total != 1 || len(o.Failures) > 0 {
		t.Errorf("upstream validation: %d calls, failures %v", o.Total, o.Failures)
	}
}

// TestCoarseTagGroupedByResource (class 10): 30 operations under one tag
// are grouped by the resource in their path, singular and plural paths
// merged ("/users", "/user/{id}"), as are untagged ones; no entity holds
// the whole tag.
func TestCoarseTagGroupedByResource(t *testing.T) {
	t.Parallel()
	r := analyzeFixture(t, "testdata/coarsetags.yaml")
	got := map[string]int{}
	for _, e := range r.Spec.Entities {
		got[e.Name] = len(e.Actions)
	}
	want := map[string]int{"users": 6, "orders": 6, "invoices": 6, "products": 6, "shipments": 6, "widgets": 2}
	if len(got) != len(want) {
		t.Errorf("entities %v, want %v", got, want)
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("entity %s has %d actions, want %d (all: %v)", name, got[name], n, got)
		}
	}
}

// TestAcceptDeclaredMediaTypes (class 9, the request side): each request
// asks for the media types its operation's success answers declare, JSON
// first, instead of application/json always; error answers' types are not
// asked for.
func TestAcceptDeclaredMediaTypes(t *testing.T) {
	t.Parallel()
	r := analyzeFixture(t, "testdata/mediatypes.yaml")
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got[req.URL.Path] = req.Header.Get("Accept")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
	for _, id := range []string{"getReport", "downloadFile", "getStatus"} {
		args := map[string]any{"id": "7"}
		if id == "getStatus" {
			args = nil
		}
		if _, err := d.Do(t.Context(), registry.Call{Op: operation(t, r, id), BaseURL: srv.URL, Args: args, Credentials: fidelity.Bearer{}}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	want := map[string]string{
		"/reports/7":       "application/vnd.acme.report.v2+json, application/pdf",
		"/files/7/content": "application/octet-stream",
		"/status":          "application/json",
	}
	for path, accept := range want {
		if got[path] != accept {
			t.Errorf("%s: Accept %q, want %q", path, got[path], accept)
		}
	}
}
