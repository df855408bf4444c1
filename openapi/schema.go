package openapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"
)

// Limits that keep tool schemas small.
const (
	// maxDescription bounds every description we emit.
	maxDescription = 1024
	// maxDepth is the nesting depth below which schemas are replaced by a
	// described placeholder.
	maxDepth = 8
	// maxNodes bounds the number of schema nodes converted for one
	// operation; past it, subschemas become placeholders.
	maxNodes = 4000
)

// converter turns kin-openapi schemas into self-contained JSON Schemas:
// every $ref inlined, cycles and deep nesting cut with placeholders. A
// converter is used for one operation at a time: every schema it returns is
// a fresh tree (jsonschema-go requires that no node appears twice).
type converter struct {
	stack map[*openapi3.Schema]bool
	nodes int
	// depthLimit and nodeLimit are maxDepth and maxNodes unless set
	// otherwise (output schemas are kept smaller).
	depthLimit, nodeLimit int
	// omit drops properties from the schemas converted: readOnly ones
	// from requests (a client never sends them, and a readOnly property
	// listed in required is required in responses only), writeOnly ones
	// from answers.
	omit omitMode
}

// omitMode says which properties a converter leaves out.
type omitMode int

const (
	omitNone omitMode = iota
	omitReadOnly
	omitWriteOnly
)

// omitted reports whether the property schema p is left out.
func (c *converter) omitted(p *openapi3.SchemaRef) bool {
	if p == nil || p.Value == nil {
		return false
	}
	return c.omit == omitReadOnly && p.Value.ReadOnly || c.omit == omitWriteOnly && p.Value.WriteOnly
}

// omittedName reports whether the property name of s (or of one of its
// allOf members, which a required list may name) is left out.
func (c *converter) omittedName(s *openapi3.Schema, name string, depth int) bool {
	if s == nil || depth > 8 {
		return false
	}
	if p, ok := s.Properties[name]; ok {
		return c.omitted(p)
	}
	for _, m := range s.AllOf {
		if m != nil && c.omittedName(m.Value, name, depth+1) {
			return true
		}
	}
	return false
}

func newConverter() *converter {
	return &converter{stack: map[*openapi3.Schema]bool{}, depthLimit: maxDepth, nodeLimit: maxNodes}
}

// refName returns the last segment of a $ref ("#/components/schemas/X" -> "X").
func refName(ref string) string {
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// truncate bounds s to n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	if n <= len(mark) {
		return ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// placeholder is what a schema that is not expanded becomes. It keeps the
// target's type when that is a single, known type, so validation stays
// permissive but meaningful.
func placeholder(s *openapi3.Schema, why string) *jsonschema.Schema {
	out := &jsonschema.Schema{Description: truncate(why, maxDescription)}
	if s != nil && s.Const != nil {
		v := s.Const
		out.Const = &v
	}
	if s != nil && len(s.Enum) > 0 && len(s.Enum) <= 64 {
		out.Enum = append([]any(nil), s.Enum...)
		if s.Nullable && !containsAny(out.Enum, nil) {
			out.Enum = append(out.Enum, nil)
		}
	}
	if s != nil && s.Type != nil && len(*s.Type) == 1 && len(s.OneOf) == 0 && len(s.AnyOf) == 0 {
		out.Type = (*s.Type)[0]
		if s.Nullable {
			out.Type = ""
			out.Types = []string{(*s.Type)[0], "null"}
		}
		if out.Type == "array" || hasType(out, "array") {
			out.Items = &jsonschema.Schema{}
		}
	}
	return out
}

// convert converts ref at the given depth. It never fails: anything it
// cannot express becomes a permissive, described schema. Errors are
// reserved for references the loader could not resolve.
func (c *converter) convert(ref *openapi3.SchemaRef, depth int) (*jsonschema.Schema, error) {
	if ref == nil {
		return &jsonschema.Schema{}, nil
	}
	s := ref.Value
	if s == nil {
		if ref.Ref != "" {
			return nil, fmt.Errorf("unresolved schema reference %q", ref.Ref)
		}
		return &jsonschema.Schema{}, nil
	}
	name := refName(ref.Ref)
	if c.stack[s] {
		if name == "" {
			name = "an enclosing schema"
		}
		return placeholder(s, fmt.Sprintf("(recursive reference to %s, not expanded)", name)), nil
	}
	if depth > c.depthLimit || c.nodes >= c.nodeLimit {
		what := name
		if what == "" {
			what = "nested schema"
		}
		d := fmt.Sprintf("(%s, not expanded: nesting limit)", what)
		if s.Description != "" {
			d = truncate(s.Description, maxDescription-len(d)-1) + " " + d
		}
		return placeholder(s, d), nil
	}
	c.nodes++
	if s.Always != nil {
		if *s.Always {
			return &jsonschema.Schema{}, nil
		}
		return &jsonschema.Schema{Not: &jsonschema.Schema{}}, nil
	}
	c.stack[s] = true
	defer delete(c.stack, s)

	out := &jsonschema.Schema{
		Title:       truncate(s.Title, 200),
		Description: truncate(s.Description, maxDescription),
		Format:      s.Format,
		Deprecated:  s.Deprecated,
		ReadOnly:    s.ReadOnly,
		WriteOnly:   s.WriteOnly,
		UniqueItems: s.UniqueItems,
		MultipleOf:  s.MultipleOf,
		Minimum:     s.Min,
		Maximum:     s.Max,
	}
	if s.Type != nil {
		types := append([]string(nil), (*s.Type)...)
		if s.Nullable && !contains(types, "null") {
			types = append(types, "null")
		}
		setTypes(out, types)
	}
	if len(s.Enum) > 0 {
		out.Enum = append([]any(nil), s.Enum...)
		if s.Nullable && !containsAny(out.Enum, nil) {
			out.Enum = append(out.Enum, nil)
		}
	}
	if s.Const != nil {
		v := s.Const
		out.Const = &v
	}
	if s.Default != nil {
		if b, err := json.Marshal(s.Default); err == nil {
			out.Default = b
		}
	}
	if eb := s.ExclusiveMin; eb.Value != nil {
		out.ExclusiveMinimum = eb.Value
	} else if eb.Bool != nil && *eb.Bool && s.Min != nil {
		out.ExclusiveMinimum, out.Minimum = s.Min, nil
	}
	if eb := s.ExclusiveMax; eb.Value != nil {
		out.ExclusiveMaximum = eb.Value
	} else if eb.Bool != nil && *eb.Bool && s.Max != nil {
		out.ExclusiveMaximum, out.Maximum = s.Max, nil
	}
	if s.MinLength > 0 {
		out.MinLength = intPtr(s.MinLength)
	}
	if s.MaxLength != nil {
		out.MaxLength = intPtr(*s.MaxLength)
	}
	if s.Pattern != "" && validPattern(s.Pattern) {
		out.Pattern = s.Pattern
	}
	if s.MinItems > 0 {
		out.MinItems = intPtr(s.MinItems)
	}
	if s.MaxItems != nil {
		out.MaxItems = intPtr(*s.MaxItems)
	}
	if s.MinProps > 0 {
		out.MinProperties = intPtr(s.MinProps)
	}
	if s.MaxProps != nil {
		out.MaxProperties = intPtr(*s.MaxProps)
	}

	var err error
	if s.Items != nil {
		if out.Items, err = c.convert(s.Items, depth+1); err != nil {
			return nil, err
		}
	}
	for _, p := range s.PrefixItems {
		ps, err := c.convert(p, depth+1)
		if err != nil {
			return nil, err
		}
		out.PrefixItems = append(out.PrefixItems, ps)
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]*jsonschema.Schema, len(s.Properties))
		for _, k := range sortedKeys(s.Properties) {
			if c.omitted(s.Properties[k]) {
				continue
			}
			ps, err := c.convert(s.Properties[k], depth+1)
			if err != nil {
				return nil, err
			}
			out.Properties[k] = ps
		}
	}
	for _, k := range sortedKeys(s.PatternProperties) {
		if !validPattern(k) {
			continue
		}
		ps, err := c.convert(s.PatternProperties[k], depth+1)
		if err != nil {
			return nil, err
		}
		if out.PatternProperties == nil {
			out.PatternProperties = map[string]*jsonschema.Schema{}
		}
		out.PatternProperties[k] = ps
	}
	out.Required = dedupe(s.Required)
	if c.omit != omitNone {
		out.Required = slices.DeleteFunc(out.Required, func(name string) bool { return c.omittedName(s, name, 0) })
		if len(out.Required) == 0 {
			out.Required = nil
		}
	}
	ap := s.AdditionalProperties
	switch {
	case ap.Has != nil && !*ap.Has:
		out.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
	case ap.Schema != nil:
		if out.AdditionalProperties, err = c.convert(ap.Schema, depth+1); err != nil {
			return nil, err
		}
	}
	// Alternatives describe the same value as their parent: they do not
	// nest it deeper.
	if out.OneOf, err = c.convertList(s.OneOf, depth); err != nil {
		return nil, err
	}
	if out.AnyOf, err = c.convertList(s.AnyOf, depth); err != nil {
		return nil, err
	}
	if d := s.Discriminator; d != nil && d.PropertyName != "" {
		pinned := pinDiscriminator(d, s.OneOf, out.OneOf)
		pinned = pinDiscriminator(d, s.AnyOf, out.AnyOf) || pinned
		requireDiscriminator(d.PropertyName, out.OneOf)
		requireDiscriminator(d.PropertyName, out.AnyOf)
		if pinned {
			note := fmt.Sprintf("The property %q decides which alternative applies.", d.PropertyName)
			out.Description = strings.TrimSpace(truncate(out.Description, maxDescription-len(note)-1) + " " + note)
		}
	}
	if s.Not != nil {
		if out.Not, err = c.convert(s.Not, depth+1); err != nil {
			return nil, err
		}
	}
	if len(s.AllOf) > 0 {
		// allOf members are at the same nesting level as their parent.
		all, err := c.convertList(s.AllOf, depth)
		if err != nil {
			return nil, err
		}
		if !mergeAllOf(out, all) {
			out.AllOf = all
		}
	}
	if hasType(out, "array") && out.Items == nil && len(out.PrefixItems) == 0 {
		out.Items = &jsonschema.Schema{}
	}
	return out, nil
}

func (c *converter) convertList(refs openapi3.SchemaRefs, depth int) ([]*jsonschema.Schema, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	out := make([]*jsonschema.Schema, 0, len(refs))
	for _, r := range refs {
		s, err := c.convert(r, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// mergeAllOf folds allOf members into out when every member is a plain
// object schema (type object or none, properties, required, description)
// and no property is defined twice. It reports whether it merged.
func mergeAllOf(out *jsonschema.Schema, all []*jsonschema.Schema) bool {
	if out.Type != "" && out.Type != "object" || len(out.Types) > 0 {
		return false
	}
	seen := map[string]bool{}
	for k := range out.Properties {
		seen[k] = true
	}
	for _, m := range all {
		if !simpleObject(m) {
			return false
		}
		for k := range m.Properties {
			if seen[k] {
				return false
			}
			seen[k] = true
		}
	}
	for _, m := range all {
		if m.Type == "object" {
			out.Type = "object"
		}
		if out.Description == "" {
			out.Description = m.Description
		}
		if out.Title == "" {
			out.Title = m.Title
		}
		if len(m.Properties) > 0 && out.Properties == nil {
			out.Properties = map[string]*jsonschema.Schema{}
		}
		for k, v := range m.Properties {
			out.Properties[k] = v
		}
		out.Required = append(out.Required, m.Required...)
	}
	out.Required = dedupe(out.Required)
	return true
}

// simpleObject reports whether s only describes object properties.
func simpleObject(s *jsonschema.Schema) bool {
	if s.Type != "" && s.Type != "object" || len(s.Types) > 0 {
		return false
	}
	c := *s
	c.Type, c.Title, c.Description, c.Properties, c.Required = "", "", "", nil, nil
	b, err := json.Marshal(&c)
	return err == nil && (string(b) == "{}" || string(b) == "true")
}

func setTypes(out *jsonschema.Schema, types []string) {
	switch len(types) {
	case 0:
	case 1:
		out.Type = types[0]
	default:
		out.Types = types
	}
}

func hasType(s *jsonschema.Schema, t string) bool {
	return s.Type == t || contains(s.Types, t)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsAny(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func dedupe(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(list))
	out := make([]string, 0, len(list))
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func intPtr(n uint64) *int {
	const maxInt = int(^uint(0) >> 1)
	v := maxInt
	if n < uint64(maxInt) {
		v = int(n)
	}
	return &v
}

// validPattern reports whether a pattern compiles as a Go regexp; vendor
// patterns written for ECMAScript are dropped rather than breaking
// validation of the whole operation.
func validPattern(p string) bool {
	_, err := regexp.Compile(p)
	return err == nil
}

// requireDiscriminator makes a discriminator's property required in every
// branch that declares it: OpenAPI has payloads carry it, and JSON Schema
// has no discriminator keyword to say so.
func requireDiscriminator(prop string, branches []*jsonschema.Schema) {
	for _, b := range branches {
		if b == nil || b.Properties[prop] == nil || contains(b.Required, prop) {
			continue
		}
		b.Required = append(b.Required, prop)
	}
}

// pinDiscriminator gives each branch that is a named component the values
// of the discriminator property that select it: those the mapping names
// it by, or else its component name (OpenAPI's implicit mapping), unless
// the branch restricts the property to values of its own. JSON
// Schema has no discriminator keyword, so without this two overlapping
// branches both match and oneOf refuses every body; with it, exactly the
// branch the property names applies, as OpenAPI means. It reports whether
// any branch was pinned.
func pinDiscriminator(d *openapi3.Discriminator, refs openapi3.SchemaRefs, branches []*jsonschema.Schema) bool {
	if len(refs) != len(branches) {
		return false
	}
	pinned := false
	for i, r := range refs {
		b := branches[i]
		if r == nil || r.Ref == "" || b == nil {
			continue
		}
		if p := b.Properties[d.PropertyName]; p != nil && (len(p.Enum) > 0 || p.Const != nil) {
			continue // the branch names its values itself
		}
		name := refName(r.Ref)
		var values []any
		for _, k := range sortedKeys(d.Mapping) {
			if m := d.Mapping[k]; m.Ref == r.Ref || refName(m.Ref) == name && !strings.Contains(m.Ref, "#") {
				values = append(values, k)
			}
		}
		if len(values) == 0 {
			if mappedElsewhere(d, name) {
				continue
			}
			values = []any{name}
		}
		prop := &jsonschema.Schema{}
		if p := b.Properties[d.PropertyName]; p != nil {
			cp := *p
			prop = &cp
		}
		prop.Enum, prop.Const = values, nil
		if prop.Type == "" && len(prop.Types) == 0 {
			prop.Type = "string"
		}
		if b.Properties == nil {
			b.Properties = map[string]*jsonschema.Schema{}
		}
		b.Properties[d.PropertyName] = prop
		if !contains(b.Required, d.PropertyName) {
			b.Required = append(b.Required, d.PropertyName)
		}
		pinned = true
	}
	return pinned
}

// mappedElsewhere reports whether the mapping names a value for the
// component name: then the name itself does not select it implicitly.
func mappedElsewhere(d *openapi3.Discriminator, name string) bool {
	_, ok := d.Mapping[name]
	return ok
}
