package registry

import (
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
