package registry

import (
	"os"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestCompiledKeepsWhatItCannotCarry: a registry whose schema uses a
// keyword the compact form does not carry (here if/then) is served as
// compiled, not cut down, and nothing is cached for it.
func TestCompiledKeepsWhatItCannotCarry(t *testing.T) {
	input := &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"n": {Type: "integer"}},
		If:         &jsonschema.Schema{Required: []string{"n"}},
		Then:       &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"n": {Minimum: new(float64)}}},
	}
	op := &Operation{ID: "op", Name: "op", Method: "GET", Path: "/x", InputSchema: input,
		Params: []Param{{Name: "n", In: "query", Schema: input.Properties["n"]}}}
	fresh := NewAPI("t", nil, []*Entity{{Name: "things", Actions: []*Action{{Name: "get", Op: op}}}}, nil)
	dir := t.TempDir()
	c := &Compiled{Dir: dir, Compiler: "test"}
	got, err := c.spec(c.key("aa", ""), []byte("spec"), nil, func([]byte, []byte) (*Spec, error) { return fresh, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got != fresh {
		t.Fatal("a registry the compact form cannot carry was not served as compiled")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("cached %d files for it", len(entries))
	}
	if err := got.ops["op"].Validate(map[string]any{"n": -1}); err == nil {
		t.Fatal("the if/then of the schema no longer applies")
	}
	// The keywords it does carry survive the trip exactly.
	op.InputSchema.If, op.InputSchema.Then = nil, nil
	one := 1.5
	op.InputSchema.Properties["n"].Const = new(any)
	op.InputSchema.Properties["m"] = &jsonschema.Schema{Types: []string{"number", "null"}, Maximum: &one,
		Enum: []any{1.5, nil, "x"}, Extra: map[string]any{"x-y": "z"}, Properties: map[string]*jsonschema.Schema{}}
	b, err := encodeSchema(op.InputSchema)
	if err != nil {
		t.Fatalf("encodeSchema: %v", err)
	}
	back, err := decodeSchema(b)
	if err != nil || back.Properties["n"].Const == nil || *back.Properties["n"].Const != nil || back.Properties["m"].Properties == nil {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}
