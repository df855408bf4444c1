package openapi

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
)

const outputSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "Out", "version": "1"},
  "paths": {
    "/things/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "get": {"operationId": "getThing", "x-entity": "things", "x-action": "get",
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
                      "404": {"description": "no", "content": {"application/json": {"schema": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}}}}}},
      "delete": {"operationId": "deleteThing", "x-entity": "things", "x-action": "delete", "responses": {"204": {"description": "gone"}}}
    },
    "/things": {
      "get": {"operationId": "listThings", "x-entity": "things", "x-action": "list",
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Thing"}}}}}}},
      "post": {"operationId": "makeThing", "x-entity": "things", "x-action": "make",
        "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"oneOf": [{"$ref": "#/components/schemas/Thing"}, {"type": "object", "properties": {"queued": {"type": "boolean"}}}]}}}}}}
    },
    "/files/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "get": {"operationId": "getFile", "x-entity": "files", "x-action": "get",
        "responses": {"200": {"description": "bytes", "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}},
      "head": {"operationId": "headFile", "x-entity": "files", "x-action": "head",
        "responses": {"200": {"description": "ok"}}}
    },
    "/ping": {
      "get": {"operationId": "ping", "x-entity": "ping", "x-action": "get",
        "responses": {"200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}}}
    }
  },
  "components": {"schemas": {"Thing": {"type": "object", "required": ["id", "name"], "additionalProperties": false, "properties": {
    "id": {"type": "integer", "minimum": 10}, "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 3},
    "kind": {"type": "string", "enum": ["a", "b"]}, "url": {"type": "string", "format": "uri"},
    "owner": {"$ref": "#/components/schemas/Thing"}
  }}}}
}`

func mustResolve(t *testing.T, s *jsonschema.Schema) *jsonschema.Resolved {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	r, err := js.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve %s: %v", raw, err)
	}
	return r
}

func TestOutputSchemas(t *testing.T) {
	t.Parallel()
	api, err := Compile([]byte(outputSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	op := func(id string) *registry.Operation {
		o, ok := api.Operation(id)
		if !ok {
			t.Fatalf("no operation %s", id)
		}
		return o
	}
	// Operations: what a success looks like, or nil when unknown.
	for _, id := range []string{"getFile", "headFile"} {
		if op(id).OutputSchema != nil {
			t.Errorf("%s: output schema for an undescribed or binary answer", id)
		}
	}
	for _, id := range []string{"getThing", "deleteThing", "listThings", "makeThing", "ping"} {
		if s := op(id).OutputSchema; s == nil || s.Type != "object" {
			t.Errorf("%s: output schema %v, want an object schema", id, s)
		}
	}
	things, _ := api.Entity("things")
	files, _ := api.Entity("files")
	ping, _ := api.Entity("ping")
	if things.OutputSchema == nil || ping.OutputSchema == nil || files.OutputSchema != nil {
		t.Fatalf("entity output schemas: things %v, ping %v, files %v", things.OutputSchema, ping.OutputSchema, files.OutputSchema)
	}
	doc := string(api.ToolsJSON())
	if strings.Count(doc, `"outputSchema"`) != 2 {
		t.Errorf("tools/list: %s", doc)
	}
	// Real answers validate: extra fields, required ones missing, values
	// outside enum, pattern, bounds and format, nulls, wrapped arrays,
	// no body, text, the describe answer.
	describe, _ := things.Describe("get")
	var describeDoc any
	json.Unmarshal(describe, &describeDoc)
	r := mustResolve(t, things.OutputSchema)
	for _, v := range []string{
		`{"id": 3, "name": "X", "kind": "zzz", "url": "not a uri", "extra": {"deep": [1]}, "owner": {"id": null, "surprise": true}}`,
		`{}`,
		`{"name": null, "owner": null}`,
		`{"result": [{"id": 1}, {"name": "q", "more": 1}]}`,
		`{"result": []}`,
		`{"result": null}`,
		`{"result": "plain text"}`,
		`{"queued": true}`,
	} {
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(x); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}
	if err := r.Validate(describeDoc); err != nil {
		t.Errorf("the describe answer is refused: %v", err)
	}
	// The schema still says something: a thing's id is a number.
	var wrong any
	json.Unmarshal([]byte(`{"id": "ten", "result": 5, "queued": "no"}`), &wrong)
	if r.Validate(wrong) == nil {
		t.Error("a wrongly typed answer validates")
	}
	pr := mustResolve(t, ping.OutputSchema)
	for _, v := range []any{map[string]any{"result": "pong"}, map[string]any{"result": nil}} {
		if err := pr.Validate(v); err != nil {
			t.Errorf("ping %v refused: %v", v, err)
		}
	}
}

// TestOutputSchemasBuiltinAndVendors checks that every output schema of
// the built-in GitHub connector and of the vendor descriptions is an
// object schema that resolves, within the tools/list budget.
func TestOutputSchemasBuiltinAndVendors(t *testing.T) {
	t.Parallel()
	// vendor names a description in the shared specs; the subtest skips
	// (fails under CI=true) when they are missing.
	type input struct{ spec, mapping, vendor string }
	inputs := map[string]input{"github": {spec: "../catalog/builtin/github/openapi.json", mapping: "../catalog/builtin/github/mapping.json"}}
	for _, f := range []string{"stripe.yaml", "slack.json", "openai.yaml"} {
		inputs[f] = input{vendor: f}
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if in.vendor != "" {
				in.spec = specstest.Path(t, in.vendor)
			}
			spec, err := os.ReadFile(in.spec)
			if err != nil {
				t.Fatal(err)
			}
			var mapping []byte
			if in.mapping != "" {
				if mapping, err = os.ReadFile(in.mapping); err != nil {
					t.Fatal(err)
				}
			}
			api, err := Compile(spec, mapping)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range api.Entities {
				if e.OutputSchema == nil {
					continue
				}
				n++
				if e.OutputSchema.Type != "object" {
					t.Errorf("%s: output schema is not an object schema", e.Name)
				}
				mustResolve(t, e.OutputSchema)
			}
			if name == "github" && n != len(api.Entities) {
				t.Errorf("%d of %d GitHub tools have an output schema, want all", n, len(api.Entities))
			}
			if api.ToolsListSize() > ToolsBudget {
				t.Errorf("tools/list of %d bytes", api.ToolsListSize())
			}
			t.Logf("%s: %d of %d tools with an output schema; tools/list %d bytes", name, n, len(api.Entities), api.ToolsListSize())
		})
	}
}
