package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Bounds of the parts of an argument error.
const (
	maxErrPath     = 120
	maxErrExpected = 200
)

// schemaReason reduces a jsonschema validation error to the JSON path of
// the failing value in the arguments and what its schema expects there,
// never echoing the value itself (it may be a secret).
//
// jsonschema-go reports the schema location of a failure ("validating
// /properties/body/properties/items/items: minimum: ..."), not the
// instance location, and its detail echoes the value. So the path is
// found here by walking the schema location alongside the arguments, and
// what is expected is described from the schema keyword alone.
func schemaReason(root *jsonschema.Schema, args map[string]any, msg string) string {
	loc, detail := failureLocation(msg)
	if loc == "" {
		return "arguments do not match the schema"
	}
	path, sub := instancePath(root, args, loc)
	keyword, rest, _ := strings.Cut(detail, ":")
	keyword = strings.TrimSpace(keyword)
	arg := path
	if i := strings.IndexAny(arg, ".["); i >= 0 {
		arg = arg[:i]
	}
	exp := truncateBytes(expectation(keyword, strings.TrimSpace(rest), sub), maxErrExpected)
	if path == arg {
		return fmt.Sprintf("argument %q does not match its schema: expected %s", arg, exp)
	}
	return fmt.Sprintf("argument %q does not match its schema at %s: expected %s", arg, truncateBytes(path, maxErrPath), exp)
}

// failureLocation returns the innermost schema pointer of a jsonschema-go
// validation message and the detail that follows it.
func failureLocation(msg string) (string, string) {
	const marker = "validating "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return "", ""
	}
	loc, detail, ok := strings.Cut(msg[i+len(marker):], ": ")
	if !ok || !strings.HasPrefix(loc, "/") {
		return "", ""
	}
	return loc, detail
}

// instancePath walks the schema pointer loc from root alongside the value
// v and returns the path of the value it reaches ("body.items[0].qty")
// and the schema there. Where an array element or an extra property is
// meant, the first one that fails that schema is named.
func instancePath(root *jsonschema.Schema, v any, loc string) (string, *jsonschema.Schema) {
	segs := strings.Split(strings.TrimPrefix(loc, "/"), "/")
	for i := range segs {
		segs[i] = unescapePointer(segs[i])
	}
	var b strings.Builder
	s := root
	addKey := func(k string) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	for i := 0; i < len(segs) && s != nil; i++ {
		switch seg := segs[i]; seg {
		case "properties", "patternProperties":
			if i+1 >= len(segs) {
				return b.String(), s
			}
			i++
			name := segs[i]
			if seg == "properties" {
				s = s.Properties[name]
				m, _ := v.(map[string]any)
				v = m[name]
				addKey(name)
				continue
			}
			s = s.PatternProperties[name]
		case "items", "additionalItems":
			s = s.Items
			list, _ := v.([]any)
			idx := firstFailing(s, len(list), func(j int) any { return list[j] })
			fmt.Fprintf(&b, "[%d]", idx)
			if idx < len(list) {
				v = list[idx]
			}
		case "prefixItems":
			if i+1 >= len(segs) {
				return b.String(), s
			}
			i++
			n, _ := strconv.Atoi(segs[i])
			if n >= len(s.PrefixItems) {
				return b.String(), s
			}
			s = s.PrefixItems[n]
			fmt.Fprintf(&b, "[%d]", n)
			list, _ := v.([]any)
			if n < len(list) {
				v = list[n]
			}
		case "additionalProperties":
			s = s.AdditionalProperties
			m, _ := v.(map[string]any)
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			idx := firstFailing(s, len(keys), func(j int) any { return m[keys[j]] })
			if idx < len(keys) {
				addKey(keys[idx])
				v = m[keys[idx]]
			}
		case "oneOf", "anyOf", "allOf":
			if i+1 >= len(segs) {
				return b.String(), s
			}
			i++
			list := map[string][]*jsonschema.Schema{"oneOf": s.OneOf, "anyOf": s.AnyOf, "allOf": s.AllOf}[seg]
			n, _ := strconv.Atoi(segs[i])
			if n >= len(list) {
				return b.String(), s
			}
			s = list[n]
		case "not":
			s = s.Not
		default:
			return b.String(), s
		}
	}
	return b.String(), s
}

// firstFailing returns the index of the first of n values that s
// refuses, or 0 when none is found.
func firstFailing(s *jsonschema.Schema, n int, at func(int) any) int {
	if s == nil {
		return 0
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return 0
	}
	for j := range n {
		if r.Validate(at(j)) != nil {
			return j
		}
	}
	return 0
}

// expectation says what a schema keyword expects, from the schema (never
// from the value refused).
func expectation(keyword, detail string, s *jsonschema.Schema) string {
	var m map[string]any
	if s != nil {
		if b, err := json.Marshal(s); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	val := func(k string) string {
		b, _ := json.Marshal(m[k])
		return string(b)
	}
	switch keyword {
	case "type":
		if s != nil && s.Type != "" {
			return "type " + s.Type
		}
		return "type " + val("type")
	case "required":
		_, names, _ := strings.Cut(detail, "missing properties:")
		return "required properties " + strings.TrimSpace(names)
	case "enum":
		return "one of " + val("enum")
	case "const":
		return "the value " + val("const")
	case "oneOf":
		if s != nil {
			return fmt.Sprintf("exactly one of %d alternatives", len(s.OneOf))
		}
	case "anyOf":
		if s != nil {
			return fmt.Sprintf("at least one of %d alternatives", len(s.AnyOf))
		}
	case "not":
		return "no such property or value"
	case "additionalProperties":
		return "no properties other than those declared"
	}
	if _, ok := m[keyword]; ok {
		return keyword + " " + val(keyword)
	}
	return "a value matching its schema (" + keyword + ")"
}

func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
