// Package openapi compiles a vendor's OpenAPI description (3.0, 3.1, and
// Swagger 2.0 by normalisation and conversion) into the registry's entity ->
// action -> operation model: self-contained, bounded JSON Schemas for every
// tool, with tool-safe, unique, deterministic names.
//
// Large APIs are grouped into at most MaxEntities tools and their tools/list
// is kept within ToolsBudget bytes: tool schemas show the action enum and,
// when they fit, the actions' arguments; an action's full parameter schema
// is always one "describe" call away (registry.Entity.Describe). Generate
// writes a connector package from a description; LintPackage checks one.
package openapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// Compile compiles an OpenAPI description (JSON or YAML) and an optional
// entity mapping (JSON, see Mapping) into a registry API. Operations that
// cannot be compiled are left out and listed in API.Problems; only a
// description that cannot be loaded at all, or a malformed mapping, is an
// error. Compile is a registry.Compiler.
func Compile(spec []byte, mapping []byte) (*registry.Spec, error) {
	r, err := Analyze(spec, mapping)
	if err != nil {
		return nil, err
	}
	return r.Spec, nil
}

// Result is a compiled description with what a connector author needs to
// know about it.
type Result struct {
	// Spec is the compiled registry.
	Spec *registry.Spec
	// Doc is the loaded description (Swagger 2.0 converted to OpenAPI 3).
	Doc *openapi3.T
	// Mapping is the entity mapping the registry was built with: the one
	// given, or the grouping chosen by default. Compiling the description
	// with it gives the same registry.
	Mapping *Mapping
	// Findings are the problems found, in a stable order.
	Findings []Finding
	// knowledgeNotes say what to review in a proposed knowledge section
	// (Generate makes them findings of the mapping file).
	knowledgeNotes []string
}

// Finding is one problem found in a description or a connector package:
// the registry's lint finding, so that manifest and description problems
// print and serialise alike.
type Finding = registry.Finding

// Finding severities.
const (
	SeverityError   = registry.SeverityError
	SeverityWarning = registry.SeverityWarning
)

// Analyze compiles like Compile and also returns the loaded description,
// the mapping used and the findings.
//
// Without a mapping, a description whose operations hold a file tree
// (folders, their children, files) is taken for a knowledge source: the
// mapping chosen proposes a knowledge section for it, and the tools leave
// room for the knowledge tool (as any mapping with a knowledge section).
func Analyze(spec []byte, mapping []byte) (*Result, error) {
	doc, repairs, err := load(spec)
	if err != nil {
		return nil, err
	}
	var m *Mapping
	if len(mapping) > 0 {
		m = new(Mapping)
		dec := json.NewDecoder(strings.NewReader(string(mapping)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(m); err != nil {
			return nil, switchboard.E(switchboard.ErrInvalid, "invalid_mapping", "the entity mapping is not valid: %s", truncate(err.Error(), 200)).WithCause(err)
		}
	}
	c := &compiler{doc: doc, names: map[string]bool{}, findings: repairs, knowledgeTool: m != nil && len(m.Knowledge) > 0}
	c.servers = serverURLs(doc.Servers)
	c.operations()
	title := ""
	if doc.Info != nil {
		title = doc.Info.Title
	}
	var knowledge json.RawMessage
	var notes []string
	if m == nil {
		knowledge, notes = proposeKnowledge(doc, title, c.ops, hasOAuth(doc))
		c.knowledgeTool = knowledge != nil
	}
	entities, chosen := c.group(m)
	if knowledge != nil {
		chosen.Knowledge = knowledge
	}
	problems := make([]string, 0, len(c.findings))
	for _, f := range c.findings {
		if f.left || f.Severity == SeverityError {
			problems = append(problems, f.Path+": "+f.Message)
		}
	}
	api := registry.NewAPI(title, c.servers, entities, problems)
	out := &Result{Spec: api, Doc: doc, Mapping: chosen, knowledgeNotes: notes}
	for _, f := range c.findings {
		out.Findings = append(out.Findings, f.Finding)
	}
	return out, nil
}

// compiler holds the state of one Compile.
type compiler struct {
	doc      *openapi3.T
	servers  []string
	ops      []*compiledOp
	names    map[string]bool // operation names taken
	findings []finding
	// knowledgeTool: the connector is a knowledge source, whose access
	// check is one more tool (the budgets leave room for it).
	knowledgeTool bool
}

// finding is a Finding and whether it left an operation out.
type finding struct {
	Finding
	left bool
}

func (c *compiler) warn(path, format string, args ...any) { c.warnIn("", path, format, args...) }

// warnIn records a warning about a file: "" for the description, "mapping"
// for the mapping.
func (c *compiler) warnIn(file, path, format string, args ...any) {
	c.findings = append(c.findings, finding{Finding: Finding{Severity: SeverityWarning, File: file, Path: path, Message: fmt.Sprintf(format, args...)}})
}

// failIn records an error about a file, as warnIn.
func (c *compiler) failIn(file, path, format string, args ...any) {
	c.findings = append(c.findings, finding{Finding: Finding{Severity: SeverityError, File: file, Path: path, Message: fmt.Sprintf(format, args...)}})
}

// opPath is the JSON path of an operation in the description.
func opPath(path, method string) string {
	return "$.paths['" + strings.ReplaceAll(path, "'", `\'`) + "']." + strings.ToLower(method)
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
	where := opPath(path, method)
	leftOut := func(why any) {
		c.findings = append(c.findings, finding{left: true, Finding: Finding{Severity: SeverityWarning, Path: where,
			Message: fmt.Sprintf("operation %s left out: %v", id, why)}})
	}
	defer func() {
		if r := recover(); r != nil {
			leftOut(r)
		}
	}()
	o, err := c.build(path, method, item, op, id)
	if err != nil {
		leftOut(err)
		return
	}
	o.Name = c.uniqueName(toolSafe(id, 64))
	if o.Name != id {
		c.warn(where+".operationId", "operationId %q is not a valid tool name: called %s (App mode still addresses it by %q)", truncate(id, 120), o.Name, truncate(id, 120))
	}
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
		Deprecated:  op.Deprecated,
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
	o.Security = c.security(op)

	input := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	conv := newConverter()
	conv.omit = omitReadOnly
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
		arg := p.Name
		if _, dup := input.Properties[arg]; dup || reservedArg(arg) {
			// Two parameters of one name in different places, or a name
			// the tool uses itself: the argument is qualified by place.
			arg = p.In + "_" + p.Name
			for i := 2; input.Properties[arg] != nil || reservedArg(arg); i++ {
				arg = fmt.Sprintf("%s_%s_%d", p.In, p.Name, i)
			}
			c.warn(opPath(path, method)+".parameters", "%s parameter %q is passed as argument %q: its name is taken", p.In, truncate(p.Name, 60), truncate(arg, 80))
		}
		sref := p.Schema
		contentType := ""
		if sref == nil {
			for _, ct := range sortedKeys(p.Content) {
				if mt := p.Content[ct]; mt != nil {
					sref, contentType = mt.Schema, ct
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
		if arg == p.Name {
			arg = ""
		}
		o.Params = append(o.Params, registry.Param{
			Name: p.Name, Arg: arg, In: p.In, Required: required, Style: p.Style, Explode: p.Explode, ContentType: contentType, Schema: s,
		})
		argName := cmp.Or(arg, p.Name)
		input.Properties[argName] = s
		if required {
			input.Required = append(input.Required, argName)
		}
	}
	for _, name := range templateParams(path) {
		declared := false
		for _, p := range o.Params {
			declared = declared || (p.In == openapi3.ParameterInPath && p.Name == name)
		}
		if !declared {
			return nil, fmt.Errorf("path parameter {%s} is not declared", name)
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
				if mt != nil && len(mt.Encoding) > 0 {
					o.Body.Encoding = map[string]registry.Encoding{}
					for _, k := range sortedKeys(mt.Encoding) {
						if e := mt.Encoding[k]; e != nil {
							o.Body.Encoding[k] = registry.Encoding{Style: e.Style, Explode: e.Explode, ContentType: e.ContentType}
						}
					}
				}
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
	o.Accept = acceptOf(op)
	out, err := outputSchema(op)
	if err != nil {
		c.warn(opPath(path, method)+".responses", "the answer of %s has no output schema: %v", truncate(id, 120), err)
	} else {
		o.OutputSchema = out
	}
	return o, nil
}

// templateParams lists the {name} parameters of a path template, before
// any "#" or "?" part.
func templateParams(path string) []string {
	path, _, _ = strings.Cut(path, "#")
	path, _, _ = strings.Cut(path, "?")
	var out []string
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(path[i:], '}')
		if j < 0 {
			return out
		}
		out = append(out, path[i+1:i+j])
		path = path[i+j+1:]
	}
}

// reservedArgs are argument names an operation's parameters may not take:
// the request body, and the entity tool's own arguments.
var reservedArgs = []string{"body", "action"}

func reservedArg(name string) bool { return slices.Contains(reservedArgs, name) }

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

// maxAccept bounds the media types an Accept header names.
const maxAccept = 8

// acceptOf is the Accept header of an operation: the media types its
// success (or default) answers declare, JSON ones first, so that vendor
// versioning types (application/vnd.x.v2+json) and downloads
// (application/pdf) are asked for as the vendor expects; "" when that is
// only application/json or nothing is declared.
func acceptOf(op *openapi3.Operation) string {
	if op.Responses == nil {
		return ""
	}
	seen := map[string]bool{}
	var jsonTypes, others []string
	for code, rr := range op.Responses.Map() {
		if !(strings.HasPrefix(code, "2") || code == "default") || rr == nil || rr.Value == nil {
			continue
		}
		for ct := range rr.Value.Content {
			base, _, _ := strings.Cut(ct, ";")
			base = strings.ToLower(strings.TrimSpace(base))
			if base == "" || seen[base] || strings.ContainsAny(base, ",\r\n") {
				continue
			}
			seen[base] = true
			if isJSONType(base) {
				jsonTypes = append(jsonTypes, base)
			} else {
				others = append(others, base)
			}
		}
	}
	slices.Sort(jsonTypes)
	slices.Sort(others)
	all := append(jsonTypes, others...)
	if len(all) > maxAccept {
		all = all[:maxAccept]
	}
	if len(all) == 0 || len(all) == 1 && all[0] == "application/json" {
		return ""
	}
	return strings.Join(all, ", ")
}
