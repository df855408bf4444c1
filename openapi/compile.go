// Package openapi compiles a vendor's OpenAPI description (3.0, 3.1, and
// Swagger 2.0 by conversion) into the registry's entity -> action ->
// operation model: self-contained, bounded JSON Schemas for every tool, with
// tool-safe, unique, deterministic names.
package openapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// Compile compiles an OpenAPI description (JSON or YAML) and an optional
// entity mapping (JSON, see package doc of Mapping) into a registry API.
// Operations that cannot be compiled are left out and listed in
// API.Problems; only a description that cannot be loaded at all, or a
// malformed mapping, is an error.
func Compile(spec []byte, mapping []byte) (*registry.API, error) {
	doc, err := load(spec)
	if err != nil {
		return nil, err
	}
	var m *Mapping
	if len(mapping) > 0 {
		m = new(Mapping)
		if err := json.Unmarshal(mapping, m); err != nil {
			return nil, switchboard.E(switchboard.ErrInvalid, "invalid_mapping", "the entity mapping is not valid JSON").WithCause(err)
		}
	}
	c := &compiler{doc: doc, names: map[string]bool{}}
	c.servers = serverURLs(doc.Servers)
	c.operations()
	entities := c.group(m)
	title := ""
	if doc.Info != nil {
		title = doc.Info.Title
	}
	return registry.NewAPI(title, c.servers, entities, c.problems), nil
}

var swagger2 = regexp.MustCompile(`(?:^|[\s{,])["']?swagger["']?\s*:\s*["']?2\.`)

// load parses the description without following external references.
func load(spec []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	loader.Context = context.Background()
	invalid := func(err error) error {
		return switchboard.E(switchboard.ErrInvalid, "invalid_openapi", "the OpenAPI description cannot be loaded").WithCause(err)
	}
	if swagger2.Match(spec) {
		js := spec
		if t := strings.TrimSpace(string(spec[:min(len(spec), 64)])); !strings.HasPrefix(t, "{") {
			var v any
			if err := yaml.Unmarshal(spec, &v); err != nil {
				return nil, invalid(err)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, invalid(err)
			}
			js = b
		}
		var d2 openapi2.T
		if err := json.Unmarshal(js, &d2); err != nil {
			return nil, invalid(err)
		}
		doc, err := openapi2conv.ToV3WithLoader(&d2, loader, nil)
		if err != nil {
			return nil, invalid(err)
		}
		return doc, nil
	}
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, invalid(err)
	}
	if doc.OpenAPI == "" {
		return nil, invalid(errors.New("no openapi version"))
	}
	return doc, nil
}

// compiler holds the state of one Compile.
type compiler struct {
	doc      *openapi3.T
	servers  []string
	ops      []*compiledOp
	names    map[string]bool // operation names taken
	problems []string
}

// compiledOp is an operation with what grouping needs to know about it.
type compiledOp struct {
	op     *registry.Operation
	tags   []string
	entity string // x-entity
	action string // x-action
}

var methodOrder = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY", "CONNECT"}

// operations compiles every operation, in path then method order.
func (c *compiler) operations() {
	if c.doc.Paths == nil {
		return
	}
	paths := c.doc.Paths.Map()
	for _, path := range sortedKeys(paths) {
		item := paths[path]
		if item == nil {
			continue
		}
		ops := item.Operations()
		methods := make([]string, 0, len(ops))
		for m := range ops {
			methods = append(methods, m)
		}
		slices.SortFunc(methods, func(a, b string) int {
			ia, ib := slices.Index(methodOrder, strings.ToUpper(a)), slices.Index(methodOrder, strings.ToUpper(b))
			if ia < 0 {
				ia = len(methodOrder)
			}
			if ib < 0 {
				ib = len(methodOrder)
			}
			return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a, b))
		})
		for _, m := range methods {
			if op := ops[m]; op != nil {
				c.operation(path, strings.ToUpper(m), item, op)
			}
		}
	}
}

// operation compiles one operation, recording a problem instead of failing.
func (c *compiler) operation(path, method string, item *openapi3.PathItem, op *openapi3.Operation) {
	id := op.OperationID
	if id == "" {
		id = strings.ToLower(method) + "_" + strings.Trim(toolSafe(path, 1<<20), "_")
	}
	defer func() {
		if r := recover(); r != nil {
			c.problems = append(c.problems, fmt.Sprintf("%s %s (%s): left out: %v", method, path, id, r))
		}
	}()
	o, err := c.build(path, method, item, op, id)
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("%s %s (%s): left out: %v", method, path, id, err))
		return
	}
	o.Name = c.uniqueName(toolSafe(id, 64))
	co := &compiledOp{op: o, tags: op.Tags}
	if v, ok := op.Extensions["x-entity"].(string); ok {
		co.entity = v
	}
	if v, ok := op.Extensions["x-action"].(string); ok {
		co.action = v
	}
	c.ops = append(c.ops, co)
}

func (c *compiler) build(path, method string, item *openapi3.PathItem, op *openapi3.Operation, id string) (*registry.Operation, error) {
	o := &registry.Operation{
		ID:          id,
		Method:      method,
		Path:        path,
		Summary:     truncate(oneLine(op.Summary), maxDescription),
		Description: truncate(op.Description, maxDescription),
	}
	// Servers: operation over path item; kept only when they differ from
	// the document's, so the instance's base URL applies otherwise.
	var servers []string
	if op.Servers != nil && len(*op.Servers) > 0 {
		servers = serverURLs(*op.Servers)
	} else if len(item.Servers) > 0 {
		servers = serverURLs(item.Servers)
	}
	if len(servers) > 0 && (len(c.servers) == 0 || servers[0] != c.servers[0]) {
		o.Server = servers[0]
	}

	input := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	conv := newConverter()
	// Parameters: path item first, operation overrides by (in, name).
	var params []*openapi3.Parameter
	index := map[string]int{}
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, pr := range list {
			if pr == nil || pr.Value == nil {
				if pr != nil && pr.Ref != "" {
					return nil, fmt.Errorf("unresolved parameter reference %q", pr.Ref)
				}
				continue
			}
			k := pr.Value.In + "\x00" + pr.Value.Name
			if i, ok := index[k]; ok {
				params[i] = pr.Value
				continue
			}
			index[k] = len(params)
			params = append(params, pr.Value)
		}
	}
	for _, p := range params {
		if p.Name == "" || p.In == "" {
			continue
		}
		if p.In == openapi3.ParameterInHeader && skippedHeader(p.Name) {
			continue
		}
		if _, dup := input.Properties[p.Name]; dup || p.Name == "body" {
			continue
		}
		sref := p.Schema
		if sref == nil {
			for _, ct := range sortedKeys(p.Content) {
				if mt := p.Content[ct]; mt != nil && mt.Schema != nil {
					sref = mt.Schema
					break
				}
			}
		}
		s, err := conv.convert(sref, 1)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
		}
		if p.Description != "" {
			s.Description = truncate(p.Description, maxDescription)
		}
		required := p.Required || p.In == openapi3.ParameterInPath
		o.Params = append(o.Params, registry.Param{
			Name: p.Name, In: p.In, Required: required, Style: p.Style, Explode: p.Explode, Schema: s,
		})
		input.Properties[p.Name] = s
		if required {
			input.Required = append(input.Required, p.Name)
		}
	}
	if op.RequestBody != nil {
		rb := op.RequestBody.Value
		if rb == nil && op.RequestBody.Ref != "" {
			return nil, fmt.Errorf("unresolved request body reference %q", op.RequestBody.Ref)
		}
		if rb != nil {
			if ct, mt := pickContent(rb.Content); ct != "" {
				var sref *openapi3.SchemaRef
				if mt != nil {
					sref = mt.Schema
				}
				s, err := conv.convert(sref, 1)
				if err != nil {
					return nil, fmt.Errorf("request body: %w", err)
				}
				if s.Description == "" && rb.Description != "" {
					s.Description = truncate(rb.Description, maxDescription)
				}
				o.Body = &registry.Body{ContentType: ct, Required: rb.Required, Schema: s}
				input.Properties["body"] = s
				if rb.Required {
					input.Required = append(input.Required, "body")
				}
			}
		}
	}
	input.Required = dedupe(input.Required)
	if _, err := input.Resolve(nil); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	o.InputSchema = input
	return o, nil
}

// skippedHeader reports headers OpenAPI says to ignore as parameters.
func skippedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "accept", "content-type", "authorization":
		return true
	}
	return false
}

// pickContent chooses the request body media type: JSON, then form, then
// multipart, then the first other one in sorted order.
func pickContent(content openapi3.Content) (string, *openapi3.MediaType) {
	keys := sortedKeys(content)
	for _, want := range []string{"application/json", "application/x-www-form-urlencoded", "multipart/form-data"} {
		for _, k := range keys {
			base, _, _ := strings.Cut(k, ";")
			if strings.EqualFold(strings.TrimSpace(base), want) {
				return k, content[k]
			}
		}
	}
	if len(keys) > 0 {
		return keys[0], content[keys[0]]
	}
	return "", nil
}

// serverURLs returns the servers' URLs with variables replaced by their
// defaults.
func serverURLs(servers openapi3.Servers) []string {
	var out []string
	for _, s := range servers {
		if s == nil || s.URL == "" {
			continue
		}
		u := s.URL
		for _, name := range sortedKeys(s.Variables) {
			if v := s.Variables[name]; v != nil {
				u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
			}
		}
		out = append(out, u)
	}
	return out
}

// uniqueName returns name, or name with a numeric suffix, not yet taken.
func (c *compiler) uniqueName(name string) string {
	n := name
	for i := 2; c.names[n]; i++ {
		suffix := fmt.Sprintf("_%d", i)
		n = truncateName(name, 64-len(suffix)) + suffix
	}
	c.names[n] = true
	return n
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
