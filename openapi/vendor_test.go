package openapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
)

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkSchema asserts the tool schema rules on a marshalled schema: no $ref,
// items on every array, descriptions bounded, no duplicate required names.
func checkSchema(t *testing.T, where string, s *jsonschema.Schema) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("%s: marshal: %v", where, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["$ref"]; ok {
				t.Errorf("%s: $ref at %s", where, path)
			}
			if d, ok := x["description"].(string); ok && len(d) > 1024 {
				t.Errorf("%s: description of %d chars at %s", where, len(d), path)
			}
			isArray := x["type"] == "array"
			if list, ok := x["type"].([]any); ok {
				for _, e := range list {
					isArray = isArray || e == "array"
				}
			}
			if isArray {
				if _, ok := x["items"]; !ok {
					if _, ok := x["prefixItems"]; !ok {
						t.Errorf("%s: array without items at %s", where, path)
					}
				}
			}
			if req, ok := x["required"].([]any); ok {
				seen := map[any]bool{}
				for _, r := range req {
					if seen[r] {
						t.Errorf("%s: duplicate required %v at %s", where, r, path)
					}
					seen[r] = true
				}
			}
			for k, e := range x {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+string(rune('0'+i%10)), e)
			}
		}
	}
	walk("", v)
}

func checkAPI(t *testing.T, api *registry.Spec) {
	t.Helper()
	names := map[string]bool{}
	for _, e := range api.Entities {
		if !toolName.MatchString(e.Name) {
			t.Errorf("entity name %q is not tool-safe", e.Name)
		}
		if names[e.Name] {
			t.Errorf("duplicate entity %q", e.Name)
		}
		names[e.Name] = true
		if len(e.Description) > 1024 {
			t.Errorf("entity %s: description of %d chars", e.Name, len(e.Description))
		}
		if _, err := e.InputSchema.Resolve(nil); err != nil {
			t.Errorf("entity %s: schema does not resolve: %v", e.Name, err)
		}
		checkSchema(t, "entity "+e.Name, e.InputSchema)
		for _, a := range e.Actions {
			if !toolName.MatchString(a.Name) || !toolName.MatchString(a.Op.Name) {
				t.Errorf("entity %s: action %q / op %q not tool-safe", e.Name, a.Name, a.Op.Name)
			}
		}
	}
}

func TestCompileVendorSpecs(t *testing.T) {
	t.Parallel()
	dir := specstest.Dir(t)
	tests := []struct {
		file string
		ops  int // operations in the description
		// valid are arguments that operations must accept.
		valid map[string]map[string]any
	}{
		{"slack.json", 174, nil},
		{"stripe.yaml", 468, map[string]map[string]any{
			"PostCustomers": {"body": map[string]any{"email": "a@example.test", "metadata": map[string]any{"k": "v"}, "expand": []any{"x"}}},
			"GetCustomers":  {"limit": float64(3), "created": map[string]any{"gt": float64(1)}},
		}},
		{"twilio.json", 197, map[string]map[string]any{"FetchAccount": {"Sid": "AC0123456789abcdef0123456789abcdef"}}},
		{"box.json", 296, nil},
		{"discord.json", 242, nil},
		{"openai.yaml", 288, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			spec, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Skipf("%s: %v", tt.file, err)
			}
			start := time.Now()
			r, err := Analyze(spec, nil)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			api := r.Spec
			elapsed := time.Since(start)
			checkAPI(t, api)
			for _, f := range LintAPI(api) {
				t.Errorf("lint: %s", f)
			}
			for _, f := range r.Findings {
				if f.Severity == SeverityError {
					t.Errorf("finding: %s", f)
				}
			}
			// The context budget: few tools, a small tools/list.
			if len(api.Entities) > MaxEntities || api.ToolsListSize() > ToolsBudget {
				t.Errorf("%d tools, tools/list of %d bytes: over the budget", len(api.Entities), api.ToolsListSize())
			}
			ops := map[*registry.Operation]bool{}
			for _, e := range api.Entities {
				for _, a := range e.Actions {
					ops[a.Op] = true
				}
			}
			t.Logf("%s: %d of %d operations in %d entities, %d problems, %v", tt.file, len(ops), tt.ops, len(api.Entities), len(api.Problems), elapsed)
			for i, p := range api.Problems {
				if i < 5 {
					t.Logf("problem: %s", p)
				}
			}
			for id, args := range tt.valid {
				op, ok := api.Operation(id)
				if !ok {
					t.Errorf("operation %s missing", id)
					continue
				}
				if err := op.Validate(args); err != nil {
					t.Errorf("%s: valid arguments refused: %v", id, err)
				}
			}
			if len(ops) != tt.ops {
				t.Errorf("%d of %d operations callable, want all", len(ops), tt.ops)
			}
			// The generated connector package lints without errors.
			pkg, err := Generate(spec, nil, GenerateOptions{SpecName: tt.file})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			files := fstest.MapFS{}
			for name, b := range pkg.Files {
				files[name] = &fstest.MapFile{Data: b}
			}
			warnings := 0
			for _, f := range LintPackage(files) {
				if f.Severity == SeverityError {
					t.Errorf("generated package: %s", f)
				} else {
					warnings++
				}
			}
			t.Logf("%s: generated package lints with 0 errors, %d warnings", tt.file, warnings)
		})
	}
}
