package openapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard/registry"
)

// Limits of an operation's output schema: smaller than input schemas, as
// response objects are large and only the tools/list budget shows them.
const (
	outputDepth = 3
	outputNodes = 60
)

// outputSchema returns the registry.Operation OutputSchema of op: the
// schema of a successful call's structured content, from its 2xx
// responses, loosened (see loosen) so that no real answer fails it. It is
// nil when a 2xx response says nothing about its body, has one that is
// neither JSON nor text, or there is no 2xx response.
func outputSchema(op *openapi3.Operation) (*jsonschema.Schema, error) {
	if op.Responses == nil {
		return nil, nil
	}
	var branches []*jsonschema.Schema
	add := func(s *jsonschema.Schema) { branches = append(branches, s) }
	responses := op.Responses.Map()
	for _, code := range sortedKeys(responses) {
		if !successCode(code) {
			continue
		}
		rr := responses[code]
		if rr == nil || rr.Value == nil {
			if rr != nil && rr.Ref != "" {
				return nil, fmt.Errorf("unresolved response reference %q", rr.Ref)
			}
			return nil, nil
		}
		if len(rr.Value.Content) == 0 {
			if code == "204" || code == "205" {
				add(wrapResult(&jsonschema.Schema{Type: "null"}))
				continue
			}
			return nil, nil // a body, undescribed
		}
		ct, mt := pickResponseContent(rr.Value.Content)
		switch {
		case ct == "":
			return nil, nil // neither JSON nor text
		case mt == nil || mt.Schema == nil || !isJSONType(ct):
			// Any JSON, or text: an object either way.
			add(&jsonschema.Schema{Type: "object"})
		default:
			conv := newConverter()
			conv.depthLimit, conv.nodeLimit = outputDepth, outputNodes
			conv.omit = omitWriteOnly
			s, err := conv.convert(mt.Schema, 1)
			if err != nil {
				return nil, fmt.Errorf("response %s: %w", code, err)
			}
			add(asStructured(loosen(s)))
		}
	}
	switch len(branches) {
	case 0:
		return nil, nil
	case 1:
		return branches[0], nil
	}
	// Several 2xx answers (rare): their distinct schemas.
	seen := map[string]bool{}
	distinct := branches[:0]
	for _, b := range branches {
		key, _ := json.Marshal(b)
		if !seen[string(key)] {
			seen[string(key)] = true
			distinct = append(distinct, b)
		}
	}
	if len(distinct) == 1 {
		return distinct[0], nil
	}
	return &jsonschema.Schema{Type: "object", AnyOf: distinct}, nil
}

// successCode reports whether a responses key is a 2xx status.
func successCode(code string) bool {
	return len(code) == 3 && code[0] == '2' && (strings.EqualFold(code[1:], "xx") || code[1] >= '0' && code[1] <= '9' && code[2] >= '0' && code[2] <= '9')
}

// isJSONType reports whether a media type is JSON (or JSON-based).
func isJSONType(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	return base == "application/json" || strings.HasSuffix(base, "+json") || base == "*/*" || base == "application/*"
}

// pickResponseContent chooses the media type a tool result is built from:
// JSON first, then text; "" when there is neither.
func pickResponseContent(content openapi3.Content) (string, *openapi3.MediaType) {
	keys := sortedKeys(content)
	for _, k := range keys {
		if isJSONType(k) {
			return k, content[k]
		}
	}
	for _, k := range keys {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(k)), "text/") {
			return k, content[k]
		}
	}
	return "", nil
}

// wrapResult is the structured content of a non-object answer of schema s.
func wrapResult(s *jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{registry.ResultProperty: s}}
}

// asStructured turns the (loosened) schema of an answer into the schema of
// the structured content the tool returns for it: an object answer is the
// content itself, anything else is {"result": answer}. When the schema
// allows both, the content is only known to be an object.
func asStructured(s *jsonschema.Schema) *jsonschema.Schema {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	nonNull := slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
	switch {
	case len(nonNull) == 1 && nonNull[0] == "object" || len(types) == 0 && objectOnly(s):
		// A null answer becomes {"result": null}, which every loosened
		// object schema accepts: the content is an object.
		s.Type, s.Types = "object", nil
		return s
	case len(nonNull) > 0 && !slices.Contains(nonNull, "object"):
		return wrapResult(s)
	}
	return &jsonschema.Schema{Type: "object", Description: s.Description}
}

// objectOnly reports whether every value s accepts, but null, is an
// object: by its type, or because each of its alternatives is so.
func objectOnly(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 {
		nonNull := slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
		return len(nonNull) == 1 && nonNull[0] == "object"
	}
	if len(s.AnyOf) > 0 && !slices.ContainsFunc(s.AnyOf, func(b *jsonschema.Schema) bool { return !objectOnly(b) }) {
		return true
	}
	return slices.ContainsFunc(s.AllOf, objectOnly)
}

// loosen makes a converted response schema accept every answer a vendor
// really sends: no required properties, no closed objects, null allowed
// wherever a type is given (descriptions forget nullable), no enum, const,
// format, pattern or bounds (vendors add values and stretch limits), and
// oneOf as anyOf (loosened branches overlap). It changes s in place and
// returns it.
func loosen(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	oneOf := s.OneOf
	*s = jsonschema.Schema{
		Title: s.Title, Description: s.Description, Deprecated: s.Deprecated,
		Type: s.Type, Types: s.Types,
		Items: s.Items, PrefixItems: s.PrefixItems, Properties: s.Properties,
		AdditionalProperties: s.AdditionalProperties,
		AnyOf:                s.AnyOf, AllOf: s.AllOf,
	}
	if len(oneOf) > 0 {
		if len(s.AnyOf) == 0 {
			s.AnyOf = oneOf
		} else {
			s.AllOf = append(s.AllOf, &jsonschema.Schema{AnyOf: oneOf})
		}
	}
	if s.Type != "" && s.Type != "null" {
		s.Types, s.Type = []string{s.Type, "null"}, ""
	} else if len(s.Types) > 0 && !slices.Contains(s.Types, "null") {
		s.Types = append(s.Types, "null")
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not != nil {
		s.AdditionalProperties = nil
	}
	loosen(s.Items)
	loosen(s.AdditionalProperties)
	for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.AnyOf, s.AllOf} {
		for _, c := range list {
			loosen(c)
		}
	}
	for _, c := range s.Properties {
		loosen(c)
	}
	return s
}
