package registry

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
)

func TestNewAPI(t *testing.T) {
	t.Parallel()
	get := testOp("GET", "/w/{id}", []Param{{Name: "id", In: "path", Required: true, Schema: str()}}, nil)
	get.ID, get.Name = "widgets/get", "widgets_get"
	list := testOp("GET", "/w", nil, nil)
	list.ID, list.Name = "listWidgets", "listWidgets"
	bad := testOp("GET", "/bad", []Param{{Name: "p", In: "query", Schema: &jsonschema.Schema{Type: "string", Pattern: "("}}}, nil)
	bad.ID, bad.Name = "bad", "bad"
	entities := []*Entity{
		{Name: "zeta", Actions: []*Action{{Name: "odd", Op: bad}}},
		{Name: "widgets", Actions: []*Action{{Name: "list", Op: list}, {Name: "get", Op: get}}},
	}
	api := NewAPI("W", []string{"https://example.test"}, entities, []string{"one left out"})
	if api.Entities[0].Name != "widgets" || api.Entities[1].Name != "zeta" {
		t.Errorf("entities not sorted")
	}
	if len(api.Problems) != 2 {
		t.Errorf("problems %v", api.Problems)
	}
	w, ok := api.Entity("widgets")
	if !ok || w.Actions[0].Name != "get" {
		t.Fatalf("Entity(widgets) = %v %v", w, ok)
	}
	if a, ok := w.Action("list"); !ok || a.Op != list {
		t.Errorf("Action(list) = %v %v", a, ok)
	}
	if _, ok := w.Action("nope"); ok {
		t.Error("Action(nope) found")
	}
	if _, ok := api.Entity("nope"); ok {
		t.Error("Entity(nope) found")
	}
	for _, key := range []string{"widgets/get", "widgets_get"} {
		if op, ok := api.Operation(key); !ok || op != get {
			t.Errorf("Operation(%q) = %v %v", key, op, ok)
		}
	}
	// Validate is safe for concurrent use.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			args := map[string]any{"id": "x"}
			if i%2 == 1 {
				args = map[string]any{}
			}
			if err := get.Validate(args); (err != nil) != (i%2 == 1) {
				t.Errorf("Validate(%v) = %v", args, err)
			}
		})
	}
	wg.Wait()
	if err := bad.Validate(map[string]any{"p": "x"}); !errors.Is(err, switchboard.ErrInvalid) || switchboard.CodeOf(err) != "invalid_config" {
		t.Errorf("unresolvable schema: %v", err)
	}
}

// The strings-only shortcut of Validate is taken only for schemas whose
// every constraint it checks, and never accepts what the schema
// validator refuses.
func TestValidateStringsOnlyAgreesWithValidator(t *testing.T) {
	schema := func(doc string) *jsonschema.Schema {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	cases := []struct {
		doc    string
		simple bool
	}{
		{`{"type":"object","properties":{"owner":{"type":"string","description":"who"},"repo":{"type":"string"}},"required":["owner"]}`, true},
		{`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false,"title":"t"}`, true},
		{`{"type":"object","properties":{"id":{"type":"string","x-vendor":1}}}`, true},
		{`{"type":"object","properties":{"id":{"type":"string","minLength":3}}}`, false},
		{`{"type":"object","properties":{"id":{"type":"string","enum":["a"]}}}`, false},
		{`{"type":"object","properties":{"id":{"type":"string","format":"date-time"}}}`, false},
		{`{"type":"object","properties":{"id":{"type":"string","pattern":"^a"}}}`, false},
		{`{"type":"object","properties":{"n":{"type":"integer"}}}`, false},
		{`{"type":"object","properties":{"id":{"type":["string","null"]}}}`, false},
		{`{"type":"object","properties":{"id":{"type":"string"}},"minProperties":2}`, false},
		{`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":{"type":"string"}}`, false},
		{`{"type":"object","properties":{"id":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string","maxLength":1}}}`, false},
		{`{"type":"object","properties":{"id":{"type":"string"}},"allOf":[{"required":["x"]}]}`, false},
	}
	argSets := []map[string]any{
		{}, {"owner": "octo"}, {"owner": "octo", "repo": "hello"}, {"id": "abc"}, {"id": "a"}, {"id": "2026-01-01"},
		{"id": 5.0}, {"id": nil}, {"n": 1.0}, {"owner": "", "extra": "x"},
	}
	for _, c := range cases {
		s := schema(c.doc)
		if got := stringsOnlySchema(s); got != c.simple {
			t.Errorf("stringsOnlySchema(%s) = %v, want %v", c.doc, got, c.simple)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", c.doc, err)
		}
		fast := &Operation{Name: "op", InputSchema: s, resolved: r, stringsOnly: stringsOnlySchema(s)}
		slow := &Operation{Name: "op", InputSchema: s, resolved: r}
		for _, args := range argSets {
			ef, es := fast.Validate(args), slow.Validate(args)
			if (ef == nil) != (es == nil) || (ef != nil && ef.Error() != es.Error()) {
				t.Errorf("schema %s, args %v: with the shortcut %v, without %v", c.doc, args, ef, es)
			}
		}
	}
}
