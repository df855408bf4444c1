package registry

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// ResultProperty is the property that carries an upstream answer that is
// not a JSON object in a tool result's structured content:
// {"result": answer}.
const ResultProperty = "result"

// PermissiveOutputSchema is the smallest exact output schema of an entity
// tool: every structured content the tools return is an object.
func PermissiveOutputSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Description: `The upstream's JSON answer: an object as is, any other answer as {"result": answer}.`}
}

// fallbackOutput is the branch of every entity output schema that covers
// what no action's schema describes: a body that is empty or not JSON
// ({"result": text or null}) and the DescribeAction answer (an object
// without "result").
func fallbackOutput() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "object",
		Description: `A non-JSON answer as {"result": text}, or the "describe" answer.`,
		Properties:  map[string]*jsonschema.Schema{ResultProperty: {Types: []string{"string", "null"}}},
	}
}

// outputShapes are the depths an entity output schema is tried at, most
// detailed first: 0 keeps the operations' schemas whole.
var outputShapes = []struct {
	depth        int
	descriptions bool
}{{0, true}, {3, false}, {2, false}, {1, false}}

// EntityOutputSchema returns the output schema of an entity tool, or nil
// when some action's operation has no OutputSchema (the answer is not
// known, so no schema would be exact). The schema is an object schema
// whose anyOf lists the actions' distinct output schemas plus a branch
// for empty or non-JSON answers and the DescribeAction answer: the most
// detailed form whose JSON is at most limit bytes, cutting nested schemas
// to their type and leaving descriptions out as needed; when none fits,
// or limit ≤ 0, PermissiveOutputSchema. Every form is exact: cutting a
// schema only makes it accept more.
func EntityOutputSchema(actions []*Action, limit int) *jsonschema.Schema {
	if len(actions) == 0 {
		return nil
	}
	for _, a := range actions {
		if a.Op == nil || a.Op.OutputSchema == nil {
			return nil
		}
	}
	if limit <= 0 {
		return PermissiveOutputSchema()
	}
	// Shapes grow richer towards the front: try the smallest first and
	// stop at the first that is too large (marshalling large trees is the
	// cost here).
	var best *jsonschema.Schema
	for i := len(outputShapes) - 1; i >= 0; i-- {
		sh := outputShapes[i]
		seen := map[string]bool{}
		var branches []*jsonschema.Schema
		size := len(`{"type":"object","anyOf":[]}`)
		for _, a := range actions {
			b := cutSchema(a.Op.OutputSchema, sh.depth, sh.descriptions, 0)
			key, err := json.Marshal(b)
			if err != nil {
				return PermissiveOutputSchema()
			}
			if !seen[string(key)] {
				seen[string(key)] = true
				branches = append(branches, b)
				size += len(key) + 1
			}
			if size > limit {
				break
			}
		}
		fb := fallbackOutput()
		key, _ := json.Marshal(fb)
		if size+len(key) > limit {
			break
		}
		best = &jsonschema.Schema{Type: "object", AnyOf: append(branches, fb)}
	}
	if best == nil {
		return PermissiveOutputSchema()
	}
	return best
}

// cutSchema returns a copy of s (a fresh tree) in which subschemas nested
// deeper than depth (when depth > 0) keep only their type, and without
// descriptions and titles unless descriptions. Only the keywords output
// schemas use are copied (see Operation.OutputSchema); anything else is
// left out, which only makes the copy more permissive.
func cutSchema(s *jsonschema.Schema, depth int, descriptions bool, level int) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if depth > 0 && level >= depth {
		return &jsonschema.Schema{Type: s.Type, Types: slices.Clone(s.Types)}
	}
	out := &jsonschema.Schema{Type: s.Type, Types: slices.Clone(s.Types), Deprecated: s.Deprecated}
	if descriptions {
		out.Title, out.Description = s.Title, s.Description
	}
	next := func(c *jsonschema.Schema) *jsonschema.Schema { return cutSchema(c, depth, descriptions, level+1) }
	same := func(c *jsonschema.Schema) *jsonschema.Schema { return cutSchema(c, depth, descriptions, level) }
	out.Items = next(s.Items)
	for _, p := range s.PrefixItems {
		out.PrefixItems = append(out.PrefixItems, next(p))
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]*jsonschema.Schema, len(s.Properties))
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			out.Properties[k] = next(s.Properties[k])
		}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not == nil {
		out.AdditionalProperties = next(ap)
	}
	// Alternatives describe the value itself: same level.
	for _, b := range s.AnyOf {
		out.AnyOf = append(out.AnyOf, same(b))
	}
	for _, b := range s.AllOf {
		out.AllOf = append(out.AllOf, same(b))
	}
	return out
}
