package fidelity

// Argument synthesis: a value valid against an operation's compiled input
// schema. No library generates valid instances of a JSON Schema with
// formats, patterns and combinators resolved the way the dispatcher
// serialises them, so this is written here.

import (
	"encoding/json"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Synth returns a value valid against s: required properties (every
// property at the top level, where the arguments are), the first enum or
// const value, formats and patterns honoured, the first branch of oneOf /
// anyOf that validates.
func Synth(s *jsonschema.Schema, depth int, all bool) any {
	if s == nil {
		return "x"
	}
	if s.Const != nil {
		return *s.Const
	}
	for _, e := range s.Enum {
		if e != nil {
			return e
		}
	}
	if len(s.Enum) > 0 {
		return nil
	}
	if s.Default != nil && depth > 0 {
		var v any
		if err := json.Unmarshal(s.Default, &v); err == nil && v != nil {
			return v
		}
	}
	if branches := append(slices.Clone(s.OneOf), s.AnyOf...); len(branches) > 0 {
		check := &jsonschema.Schema{OneOf: s.OneOf, AnyOf: s.AnyOf}
		r, rerr := check.Resolve(nil)
		var first any
		for i, b := range branches {
			if isNullOnly(b) {
				continue
			}
			merged := mergeBranch(s, b)
			v := Synth(merged, depth, all)
			if i == 0 || first == nil {
				first = v
			}
			if rerr == nil && r.Validate(v) == nil {
				return v
			}
		}
		if first != nil {
			return first
		}
	}
	if len(s.AllOf) > 0 {
		merged := *s
		merged.AllOf = nil
		for _, m := range s.AllOf {
			merged = *mergeBranch(&merged, m)
		}
		return Synth(&merged, depth, all)
	}
	t := s.Type
	if t == "" {
		for _, x := range s.Types {
			if x != "null" {
				t = x
				break
			}
		}
	}
	if t == "" {
		switch {
		case len(s.Properties) > 0 || s.AdditionalProperties != nil:
			t = "object"
		case s.Items != nil:
			t = "array"
		default:
			return "x"
		}
	}
	switch t {
	case "object":
		out := map[string]any{}
		if depth > 8 {
			return out
		}
		req := map[string]bool{}
		for _, r := range s.Required {
			req[r] = true
		}
		for _, k := range sortedProps(s.Properties) {
			ps := s.Properties[k]
			fixed := ps != nil && (ps.Const != nil || len(ps.Enum) == 1)
			if ps == nil || ps.ReadOnly || !(req[k] || all || fixed) {
				continue
			}
			if v := Synth(ps, depth+1, depth == 0 && k == "body"); v != nil || req[k] {
				out[k] = v
			}
		}
		for _, r := range s.Required {
			if _, ok := out[r]; !ok && s.Properties[r] == nil {
				out[r] = "abc"
			}
		}
		if len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil && depth < 4 {
			out["key"] = Synth(s.AdditionalProperties, depth+1, false)
		}
		if len(out) == 0 && depth > 0 {
			// An empty object vanishes in form encodings: send one
			// property.
			for _, k := range sortedProps(s.Properties) {
				if ps := s.Properties[k]; ps != nil && !ps.ReadOnly {
					out[k] = Synth(ps, depth+1, false)
					break
				}
			}
		}
		return out
	case "array":
		n := 1
		if s.MinItems != nil && *s.MinItems > 1 {
			n = *s.MinItems
		}
		out := make([]any, 0, n)
		for i := range n {
			v := Synth(s.Items, depth+1, false)
			if i > 0 && s.Items != nil && len(s.Items.Enum) > i {
				v = s.Items.Enum[i]
			}
			if str, ok := v.(string); ok && i > 0 && s.UniqueItems {
				if n, err := strconv.Atoi(str); err == nil {
					v = strconv.Itoa(n + i)
				} else {
					v = str + strconv.Itoa(i)
				}
			}
			out = append(out, v)
		}
		return out
	case "integer", "number":
		n := 1.0
		if s.Minimum != nil {
			n = math.Ceil(*s.Minimum)
		}
		if s.ExclusiveMinimum != nil {
			n = math.Floor(*s.ExclusiveMinimum) + 1
		}
		if s.Maximum != nil && n > *s.Maximum {
			n = math.Floor(*s.Maximum)
		}
		if s.ExclusiveMaximum != nil && n >= *s.ExclusiveMaximum {
			n = math.Ceil(*s.ExclusiveMaximum) - 1
		}
		if s.MultipleOf != nil && *s.MultipleOf > 0 {
			n = math.Ceil(n / *s.MultipleOf) * *s.MultipleOf
		}
		return n
	case "boolean":
		return true
	case "null":
		return nil
	}
	return synthString(s)
}

func isNullOnly(s *jsonschema.Schema) bool {
	return s != nil && (s.Type == "null" || (len(s.Types) == 1 && s.Types[0] == "null") ||
		(len(s.Enum) == 1 && s.Enum[0] == nil))
}

// mergeBranch returns parent without its combinators, overlaid with the
// branch's keywords.
func mergeBranch(parent, branch *jsonschema.Schema) *jsonschema.Schema {
	m := *parent
	m.OneOf, m.AnyOf, m.AllOf = nil, nil, nil
	b := *branch
	if b.Type != "" || len(b.Types) > 0 {
		m.Type, m.Types = b.Type, b.Types
	}
	if b.Properties != nil {
		props := map[string]*jsonschema.Schema{}
		for k, v := range m.Properties {
			props[k] = v
		}
		for k, v := range b.Properties {
			props[k] = v
		}
		m.Properties = props
	}
	m.Required = append(slices.Clone(m.Required), b.Required...)
	for _, f := range []func(){
		func() {
			if b.Items != nil {
				m.Items = b.Items
			}
		},
		func() {
			if b.Enum != nil {
				m.Enum = b.Enum
			}
		},
		func() {
			if b.Const != nil {
				m.Const = b.Const
			}
		},
		func() {
			if b.Format != "" {
				m.Format = b.Format
			}
		},
		func() {
			if b.Pattern != "" {
				m.Pattern = b.Pattern
			}
		},
		func() {
			if b.AdditionalProperties != nil {
				m.AdditionalProperties = b.AdditionalProperties
			}
		},
		func() {
			if b.MinLength != nil {
				m.MinLength = b.MinLength
			}
			if b.MaxLength != nil {
				m.MaxLength = b.MaxLength
			}
			if b.Minimum != nil {
				m.Minimum = b.Minimum
			}
			if b.Maximum != nil {
				m.Maximum = b.Maximum
			}
			if b.MinItems != nil {
				m.MinItems = b.MinItems
			}
		},
	} {
		f()
	}
	m.OneOf, m.AnyOf, m.AllOf = b.OneOf, b.AnyOf, b.AllOf
	return &m
}

// synthString returns a string of the schema's format, pattern and length.
func synthString(s *jsonschema.Schema) string {
	// Digits satisfy the most id patterns, and a validator decoding an
	// ambiguous query parameter (oneOf string or array of ids) as an
	// array still accepts them.
	v := "123"
	switch s.Format {
	case "date-time":
		v = "2024-01-02T03:04:05Z"
	case "date":
		v = "2024-01-02"
	case "time":
		v = "03:04:05Z"
	case "email":
		v = "a@example.test"
	case "uri", "url":
		v = "https://example.test/x"
	case "uuid":
		v = "123e4567-e89b-12d3-a456-426614174000"
	case "ipv4":
		v = "192.0.2.1"
	case "ipv6":
		v = "2001:db8::1"
	case "hostname":
		v = "example.test"
	case "byte":
		v = "YWJj"
	case "int64", "int32", "snowflake":
		v = "123"
	case "binary":
		v = "data"
	}
	if s.Pattern != "" {
		if p, ok := fromPattern(s.Pattern); ok {
			v = p
		}
	}
	if s.MinLength != nil && len(v) < *s.MinLength {
		v += strings.Repeat("a", *s.MinLength-len(v))
	}
	if s.MaxLength != nil && len(v) > *s.MaxLength {
		v = v[:*s.MaxLength]
	}
	return v
}

// fromPattern generates a string matching a regular expression: the first
// alternative, the first character of every class, the minimum number of
// repetitions (at least one).
func fromPattern(p string) (string, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	var gen func(r *syntax.Regexp)
	gen = func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpLiteral:
			b.WriteString(string(r.Rune))
		case syntax.OpCharClass:
			if len(r.Rune) > 0 {
				c := r.Rune[0]
				// Prefer a letter or digit inside the class.
				for i := 0; i+1 < len(r.Rune); i += 2 {
					if r.Rune[i] <= 'a' && 'a' <= r.Rune[i+1] {
						c = 'a'
						break
					}
					if r.Rune[i] <= '1' && '1' <= r.Rune[i+1] {
						c = '1'
					}
				}
				b.WriteRune(c)
			}
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpCapture:
			for _, s := range r.Sub {
				gen(s)
			}
		case syntax.OpConcat:
			for _, s := range r.Sub {
				gen(s)
			}
		case syntax.OpAlternate:
			if len(r.Sub) > 0 {
				gen(r.Sub[0])
			}
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
			if r.Op != syntax.OpQuest {
				gen(r.Sub[0])
			}
		case syntax.OpRepeat:
			n := max(r.Min, 1)
			if r.Max >= 0 && n > r.Max {
				n = r.Max
			}
			for range n {
				gen(r.Sub[0])
			}
		}
	}
	gen(re)
	out := b.String()
	if ok, _ := regexp.MatchString(p, out); !ok {
		return "", false
	}
	return out, true
}

func sortedProps(m map[string]*jsonschema.Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
