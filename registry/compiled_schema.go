package registry

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/google/jsonschema-go/jsonschema"
)

// wireSchema is how the compiled form stores a JSON Schema: the keywords
// the OpenAPI compiler produces, decoded by encoding/json in one pass.
// It exists because jsonschema-go's own decoder parses every subtree again
// at each level of nesting (into its struct, then into a map for unknown
// keywords), which made decoding one deeply nested operation schema of the
// shared descriptions take hundreds of milliseconds. A schema that uses a
// keyword this type does not carry is never stored in it: encodeSchema
// checks that the schema survives the trip unchanged (the same JSON from
// jsonschema-go) and refuses it otherwise.
type wireSchema struct {
	Type        string          `json:"type,omitempty"`
	Types       []string        `json:"types,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Format      string          `json:"format,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	Deprecated  bool            `json:"deprecated,omitempty"`
	ReadOnly    bool            `json:"readOnly,omitempty"`
	WriteOnly   bool            `json:"writeOnly,omitempty"`
	Examples    []any           `json:"examples,omitempty"`
	Enum        []any           `json:"enum,omitempty"`
	// HasConst distinguishes a const of null from no const.
	HasConst         bool     `json:"hasConst,omitempty"`
	Const            any      `json:"const,omitempty"`
	MultipleOf       *float64 `json:"multipleOf,omitempty"`
	Minimum          *float64 `json:"minimum,omitempty"`
	Maximum          *float64 `json:"maximum,omitempty"`
	ExclusiveMinimum *float64 `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum *float64 `json:"exclusiveMaximum,omitempty"`
	MinLength        *int     `json:"minLength,omitempty"`
	MaxLength        *int     `json:"maxLength,omitempty"`
	Pattern          string   `json:"pattern,omitempty"`
	MinItems         *int     `json:"minItems,omitempty"`
	MaxItems         *int     `json:"maxItems,omitempty"`
	UniqueItems      bool     `json:"uniqueItems,omitempty"`
	MinProperties    *int     `json:"minProperties,omitempty"`
	MaxProperties    *int     `json:"maxProperties,omitempty"`
	Required         []string `json:"required,omitempty"`

	Items       *wireSchema            `json:"items,omitempty"`
	PrefixItems []*wireSchema          `json:"prefixItems,omitempty"`
	Properties  map[string]*wireSchema `json:"properties,omitempty"`
	// NoProperties is an empty, not absent, Properties (written as {}).
	NoProperties         bool                   `json:"noProperties,omitempty"`
	PatternProperties    map[string]*wireSchema `json:"patternProperties,omitempty"`
	AdditionalProperties *wireSchema            `json:"additionalProperties,omitempty"`
	AllOf                []*wireSchema          `json:"allOf,omitempty"`
	AnyOf                []*wireSchema          `json:"anyOf,omitempty"`
	OneOf                []*wireSchema          `json:"oneOf,omitempty"`
	Not                  *wireSchema            `json:"not,omitempty"`

	Extra map[string]any `json:"extra,omitempty"`
}

func toWire(s *jsonschema.Schema) *wireSchema {
	if s == nil {
		return nil
	}
	w := &wireSchema{
		Type: s.Type, Types: s.Types, Title: s.Title, Description: s.Description, Format: s.Format,
		Default: s.Default, Deprecated: s.Deprecated, ReadOnly: s.ReadOnly, WriteOnly: s.WriteOnly,
		Examples: s.Examples, Enum: s.Enum, MultipleOf: s.MultipleOf, Minimum: s.Minimum, Maximum: s.Maximum,
		ExclusiveMinimum: s.ExclusiveMinimum, ExclusiveMaximum: s.ExclusiveMaximum,
		MinLength: s.MinLength, MaxLength: s.MaxLength, Pattern: s.Pattern,
		MinItems: s.MinItems, MaxItems: s.MaxItems, UniqueItems: s.UniqueItems,
		MinProperties: s.MinProperties, MaxProperties: s.MaxProperties, Required: s.Required,
		Items: toWire(s.Items), PrefixItems: toWireList(s.PrefixItems),
		Properties: toWireMap(s.Properties), PatternProperties: toWireMap(s.PatternProperties),
		AdditionalProperties: toWire(s.AdditionalProperties),
		AllOf:                toWireList(s.AllOf), AnyOf: toWireList(s.AnyOf), OneOf: toWireList(s.OneOf),
		Not: toWire(s.Not), Extra: s.Extra,
	}
	if s.Const != nil {
		w.HasConst, w.Const = true, *s.Const
	}
	w.NoProperties = s.Properties != nil && len(s.Properties) == 0
	return w
}

func toWireList(list []*jsonschema.Schema) []*wireSchema {
	if list == nil {
		return nil
	}
	out := make([]*wireSchema, len(list))
	for i, s := range list {
		out[i] = toWire(s)
	}
	return out
}

func toWireMap(m map[string]*jsonschema.Schema) map[string]*wireSchema {
	if m == nil {
		return nil
	}
	out := make(map[string]*wireSchema, len(m))
	for k, s := range m {
		out[k] = toWire(s)
	}
	return out
}

func (w *wireSchema) schema() *jsonschema.Schema {
	if w == nil {
		return nil
	}
	s := &jsonschema.Schema{
		Type: w.Type, Types: w.Types, Title: w.Title, Description: w.Description, Format: w.Format,
		Default: w.Default, Deprecated: w.Deprecated, ReadOnly: w.ReadOnly, WriteOnly: w.WriteOnly,
		Examples: w.Examples, Enum: w.Enum, MultipleOf: w.MultipleOf, Minimum: w.Minimum, Maximum: w.Maximum,
		ExclusiveMinimum: w.ExclusiveMinimum, ExclusiveMaximum: w.ExclusiveMaximum,
		MinLength: w.MinLength, MaxLength: w.MaxLength, Pattern: w.Pattern,
		MinItems: w.MinItems, MaxItems: w.MaxItems, UniqueItems: w.UniqueItems,
		MinProperties: w.MinProperties, MaxProperties: w.MaxProperties, Required: w.Required,
		Items: w.Items.schema(), PrefixItems: fromWireList(w.PrefixItems),
		Properties: fromWireMap(w.Properties), PatternProperties: fromWireMap(w.PatternProperties),
		AdditionalProperties: w.AdditionalProperties.schema(),
		AllOf:                fromWireList(w.AllOf), AnyOf: fromWireList(w.AnyOf), OneOf: fromWireList(w.OneOf),
		Not: w.Not.schema(), Extra: w.Extra,
	}
	if w.HasConst {
		c := w.Const
		s.Const = &c
	}
	if w.NoProperties {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	return s
}

func fromWireList(list []*wireSchema) []*jsonschema.Schema {
	if list == nil {
		return nil
	}
	out := make([]*jsonschema.Schema, len(list))
	for i, w := range list {
		out[i] = w.schema()
	}
	return out
}

func fromWireMap(m map[string]*wireSchema) map[string]*jsonschema.Schema {
	if m == nil {
		return nil
	}
	out := make(map[string]*jsonschema.Schema, len(m))
	for k, w := range m {
		out[k] = w.schema()
	}
	return out
}

// errWire is the refusal of a schema the compiled form cannot carry
// unchanged.
var errWire = errors.New("a schema uses keywords the compiled form does not carry")

// encodeSchema encodes s for the compiled form, after checking that
// decodeSchema gives back a schema jsonschema-go writes exactly as s.
func encodeSchema(s *jsonschema.Schema) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	b, err := json.Marshal(toWire(s))
	if err != nil {
		return nil, err
	}
	back, err := decodeSchema(b)
	if err != nil {
		return nil, err
	}
	want, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	got, err := json.Marshal(back)
	if err != nil || !bytes.Equal(want, got) {
		return nil, errWire
	}
	return b, nil
}

// decodeSchema decodes what encodeSchema wrote; empty is no schema.
func decodeSchema(b []byte) (*jsonschema.Schema, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var w wireSchema
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	return w.schema(), nil
}
