package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

func TestEntityOutputSchema(t *testing.T) {
	t.Parallel()
	obj := func(desc string) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Description: desc, Properties: map[string]*jsonschema.Schema{
			"id":    {Types: []string{"integer", "null"}, Description: "The id."},
			"owner": {Types: []string{"object", "null"}, Properties: map[string]*jsonschema.Schema{"login": {Types: []string{"string", "null"}}}},
		}}
	}
	op := func(s *jsonschema.Schema) *Action { return &Action{Name: "a", Op: &Operation{OutputSchema: s}} }
	same := []*Action{op(obj("x")), op(obj("x"))}
	if EntityOutputSchema([]*Action{op(obj("x")), op(nil)}, 8192) != nil {
		t.Error("an action with an unknown answer: the entity has an output schema")
	}
	if EntityOutputSchema(nil, 8192) != nil {
		t.Error("no actions: an output schema")
	}
	tests := []struct {
		limit      int
		branches   int // anyOf members, fallback included; 0: permissive
		has, hasnt string
	}{
		{8192, 2, `"The id."`, ""},
		{350, 2, `"login"`, `"The id."`},
		{300, 2, `"owner":{"type":["object","null"]}`, `"login"`},
		{250, 0, `"description"`, `"anyOf"`},
		{0, 0, `"description"`, `"anyOf"`},
	}
	for _, tt := range tests {
		s := EntityOutputSchema(same, tt.limit)
		b, _ := json.Marshal(s)
		if s.Type != "object" || len(s.AnyOf) != tt.branches || !strings.Contains(string(b), tt.has) || (tt.hasnt != "" && strings.Contains(string(b), tt.hasnt)) {
			t.Errorf("limit %d: %s", tt.limit, b)
		}
		if tt.limit > 0 && len(b) > tt.limit {
			t.Errorf("limit %d: %d bytes", tt.limit, len(b))
		}
		if _, err := s.Resolve(nil); err != nil {
			t.Errorf("limit %d: %v", tt.limit, err)
		}
	}
	// The result is exact: every answer shape the tools return validates.
	r, err := EntityOutputSchema(same, 8192).Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []map[string]any{{"id": 1.0, "more": true}, {"result": "text"}, {"result": nil}, {"entity": "e", "actions": []any{}}} {
		if err := r.Validate(v); err != nil {
			t.Errorf("%v refused: %v", v, err)
		}
	}
}
