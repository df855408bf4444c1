package openapi

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// LintPackage checks the connector package rooted at fsys: the manifest,
// the files it names, the description and mapping (compiled as the catalog
// would), the fields the auth section and base URL use, the tool schema
// rules for every tool and action, and the context budget. Findings are in
// a stable order; the package is usable when none is an error.
func LintPackage(fsys fs.FS) []Finding { return lintPackage(fsys, nil, "") }

// LintPackageIn is LintPackage for a package in the catalog folder named
// folder: the manifest id must also equal the folder name, as the catalog
// index requires.
func LintPackageIn(fsys fs.FS, folder string) []Finding { return lintPackage(fsys, nil, folder) }

// Lint checks a package Generate made, as LintPackage would check it once
// written, without compiling the description a second time: the
// compilation it was generated from stands for it (its written mapping
// compiles to the same registry, which the tests check).
func (p *Package) Lint() []Finding { return p.LintIn("") }

// LintIn is Lint for the package written to the catalog folder named
// folder (see LintPackageIn).
func (p *Package) LintIn(folder string) []Finding {
	fsys := fstest.MapFS{}
	for name, b := range p.Files {
		fsys[name] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
	return lintPackage(fsys, p.Result, folder)
}

// lintPackage is LintPackageIn; a non-nil compiled result is used instead
// of compiling the package's description.
func lintPackage(fsys fs.FS, compiled *Result, folder string) []Finding {
	var out []Finding
	add := func(sev, file, path, format string, args ...any) {
		out = append(out, Finding{Severity: sev, File: file, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	raw, err := fs.ReadFile(fsys, ManifestFile)
	if err != nil {
		add(SeverityError, ManifestFile, "$", "cannot read the manifest: %v", err)
		return out
	}
	// The manifest rules (schema, enums, fields, placeholders, files)
	// are the registry's, shared with connector verify.
	var files []string
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	out = append(out, registry.LintManifest(raw, folder, files)...)
	var m registry.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return out
	}
	if m.Type != registry.TypeOpenAPI {
		return out
	}
	if m.OpenAPI == "" {
		add(SeverityError, ManifestFile, "$.openapi", "type openapi names no description")
		return out
	}
	spec, err := fs.ReadFile(fsys, m.OpenAPI)
	if err != nil {
		add(SeverityError, ManifestFile, "$.openapi", "cannot read the description %q", m.OpenAPI)
		return out
	}
	var mapping []byte
	if m.Mapping != "" {
		if mapping, err = fs.ReadFile(fsys, m.Mapping); err != nil {
			add(SeverityError, ManifestFile, "$.mapping", "cannot read the mapping %q", m.Mapping)
			return out
		}
	}
	r := compiled
	if r == nil {
		r, err = Analyze(spec, mapping)
	}
	if err != nil {
		file := m.OpenAPI
		if switchboard.CodeOf(err) == "invalid_mapping" {
			file = m.Mapping
		}
		add(SeverityError, file, "$", "%v", err)
		return out
	}
	for _, f := range r.Findings {
		if f.File == "mapping" {
			f.File = m.Mapping
		} else {
			f.File = m.OpenAPI
		}
		out = append(out, f)
	}
	out = append(out, LintAPI(r.Spec)...)
	if m.Mapping != "" {
		used := map[*registry.Operation]bool{}
		for _, e := range r.Spec.Entities {
			for _, a := range e.Actions {
				used[a.Op] = true
			}
		}
		if n := countOperations(r) - len(used); n > 0 {
			add(SeverityWarning, m.Mapping, "$.entities", "%d operations of the description are not mapped to an action and cannot be called", n)
		}
	}
	return out
}

// countOperations counts the operations of the loaded description.
func countOperations(r *Result) int {
	n := 0
	if r.Doc.Paths != nil {
		for _, item := range r.Doc.Paths.Map() {
			if item != nil {
				n += len(item.Operations())
			}
		}
	}
	return n
}

// LintAPI checks a compiled registry against the tool rules: names,
// schemas (object root, no $ref, items on every array, no duplicate
// required entries, bounded descriptions, resolvable as JSON Schema
// 2020-12) for every tool and every action, and the context budget.
func LintAPI(api *registry.Spec) []Finding {
	var out []Finding
	for _, e := range api.Entities {
		where := "tools['" + e.Name + "']"
		if !toolNamePattern.MatchString(e.Name) {
			out = append(out, Finding{Severity: SeverityError, Path: where, Message: "tool name is not valid"})
		}
		for _, msg := range SchemaViolations(e.InputSchema) {
			out = append(out, Finding{Severity: SeverityError, Path: where + ".inputSchema", Message: msg})
		}
		for _, a := range e.Actions {
			aw := where + ".actions['" + a.Name + "']"
			if !toolNamePattern.MatchString(a.Name) || !toolNamePattern.MatchString(a.Op.Name) {
				out = append(out, Finding{Severity: SeverityError, Path: aw, Message: "action or operation name is not valid"})
			}
			for _, msg := range SchemaViolations(a.Op.InputSchema) {
				out = append(out, Finding{Severity: SeverityError, Path: aw + ".inputSchema", Message: msg})
			}
		}
	}
	if n := ToolsListBound(api); n > ToolsBudget {
		out = append(out, Finding{Severity: SeverityWarning, Path: "tools", Message: fmt.Sprintf("tools/list may take up to %d bytes on the wire, over the budget of %d", n, ToolsBudget)})
	}
	if len(api.Entities) > MaxEntities {
		out = append(out, Finding{Severity: SeverityWarning, Path: "tools", Message: fmt.Sprintf("%d tools, over the aim of %d", len(api.Entities), MaxEntities)})
	}
	return out
}

// SchemaViolations lists how s breaks the tool schema rules: an object
// root, no $ref, items on every array, no duplicate required entries,
// descriptions of at most 1024 bytes, and resolvable as JSON Schema
// 2020-12. Each message names the JSON pointer of the offending node.
func SchemaViolations(s *jsonschema.Schema) []string {
	if s == nil {
		return []string{"no schema"}
	}
	var out []string
	if s.Type != "object" {
		out = append(out, "root is not type object")
	}
	if _, err := s.Resolve(nil); err != nil {
		out = append(out, "does not resolve as JSON Schema 2020-12: "+truncate(err.Error(), 200))
	}
	b, err := json.Marshal(s)
	if err != nil {
		return append(out, "does not marshal: "+err.Error())
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return append(out, "does not marshal: "+err.Error())
	}
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		if len(out) > 20 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["$ref"]; ok {
				out = append(out, "$ref at "+ptr)
			}
			if d, ok := x["description"].(string); ok && len(d) > maxDescription {
				out = append(out, fmt.Sprintf("description of %d bytes at %s", len(d), ptr))
			}
			isArray := x["type"] == "array"
			if list, ok := x["type"].([]any); ok {
				isArray = isArray || slices.Contains(list, any("array"))
			}
			if isArray && x["items"] == nil && x["prefixItems"] == nil {
				out = append(out, "array without items at "+ptr)
			}
			if req, ok := x["required"].([]any); ok {
				seen := map[any]bool{}
				for _, r := range req {
					if seen[r] {
						out = append(out, fmt.Sprintf("duplicate required %v at %s", r, ptr))
					}
					seen[r] = true
				}
			}
			for _, k := range sortedKeys(x) {
				walk(ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", ptr, i), e)
			}
		}
	}
	walk("", v)
	return out
}
