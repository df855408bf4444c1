package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
)

// NewAPI builds an API from compiled entities: it indexes entities by name
// and operations by Name and original ID, and resolves every operation's
// input schema once, so that Validate is cheap and safe for concurrent use.
// Entities are sorted by name and actions by name. An operation whose
// schema cannot be resolved stays in the registry; its Validate reports
// the problem and it is listed in Problems.
func NewAPI(title string, servers []string, entities []*Entity, problems []string) *Spec {
	a := &Spec{
		Title:    title,
		Servers:  servers,
		Entities: slices.Clone(entities),
		Problems: slices.Clone(problems),
		entities: make(map[string]*Entity, len(entities)),
		ops:      map[string]*Operation{},
	}
	slices.SortFunc(a.Entities, func(x, y *Entity) int { return strings.Compare(x.Name, y.Name) })
	for _, e := range a.Entities {
		a.entities[e.Name] = e
		slices.SortFunc(e.Actions, func(x, y *Action) int { return strings.Compare(x.Name, y.Name) })
		for _, ac := range e.Actions {
			op := ac.Op
			if op == nil {
				continue
			}
			if _, seen := a.ops[op.Name]; !seen && op.InputSchema != nil && op.resolved == nil {
				r, err := op.InputSchema.Resolve(nil)
				if err != nil {
					a.Problems = append(a.Problems, fmt.Sprintf("%s: input schema cannot be resolved: %v", op.Name, err))
				} else {
					op.resolved = r
					op.stringsOnly = stringsOnlySchema(op.InputSchema)
				}
			}
			if op.Name != "" {
				a.ops[op.Name] = op
			}
		}
	}
	// Original IDs second, so a Name never loses to another op's ID.
	for _, e := range a.Entities {
		for _, ac := range e.Actions {
			if op := ac.Op; op != nil && op.ID != "" {
				if _, taken := a.ops[op.ID]; !taken {
					a.ops[op.ID] = op
				}
			}
		}
	}
	return a
}

// Entity returns the entity with the given name.
func (a *Spec) Entity(name string) (*Entity, bool) {
	e, ok := a.entities[name]
	return e, ok
}

// Operation returns the operation with the given tool-safe Name or
// original operationId.
func (a *Spec) Operation(idOrName string) (*Operation, bool) {
	op, ok := a.ops[idOrName]
	return op, ok
}

// Action returns the entity's action with the given name.
func (e *Entity) Action(name string) (*Action, bool) {
	i, ok := slices.BinarySearchFunc(e.Actions, name, func(a *Action, n string) int { return strings.Compare(a.Name, n) })
	if ok {
		return e.Actions[i], true
	}
	for _, a := range e.Actions { // not sorted: built without NewAPI
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

// maxArgsMessage bounds the message of an invalid_arguments error.
const maxArgsMessage = 900

// Validate checks args against the operation's input schema. The error is
// a *switchboard.Error of kind ErrInvalid and code "invalid_arguments"
// whose message names what is wrong (never an argument's value) and what
// the operation expects.
func (o *Operation) Validate(args map[string]any) error {
	if err := o.Load(); err != nil {
		return err
	}
	if args == nil {
		args = map[string]any{}
	}
	var reasons []string
	var missing, unknown []string
	if s := o.InputSchema; s != nil {
		for _, r := range s.Required {
			if _, ok := args[r]; !ok {
				missing = append(missing, r)
			}
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
			for k := range args {
				if _, ok := s.Properties[k]; !ok {
					unknown = append(unknown, k)
				}
			}
		}
	}
	if len(missing) > 0 {
		reasons = append(reasons, "missing required "+strings.Join(missing, ", "))
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		reasons = append(reasons, "unknown "+strings.Join(quoteAll(unknown), ", "))
	}
	if len(reasons) == 0 && o.InputSchema != nil {
		r := o.resolved
		if r == nil {
			var err error
			if r, err = o.InputSchema.Resolve(nil); err != nil {
				return switchboard.E(switchboard.ErrInvalid, "invalid_config", "operation %s has an input schema that cannot be used", o.Name).WithCause(err)
			}
		}
		if o.stringsOnly && allStrings(args) {
			return nil // what the validator would say, at a fraction of the cost
		}
		if err := r.Validate(args); err != nil {
			reasons = append(reasons, schemaReason(o.InputSchema, args, err.Error()))
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: %s; expects %s", o.Name, strings.Join(reasons, "; "), o.expects())
	if len(msg) > maxArgsMessage {
		msg = msg[:maxArgsMessage-3] + "..."
	}
	return switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s", msg)
}

func unescapePointer(s string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		if len(s) > 40 {
			s = s[:40]
		}
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// expects describes the operation's arguments: required ones first, with
// their types.
func (o *Operation) expects() string {
	s := o.InputSchema
	if s == nil || len(s.Properties) == 0 {
		return "no arguments"
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if req[a] != req[b] {
			if req[a] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		p := n + " (" + typeName(s.Properties[n])
		if req[n] {
			p += ", required"
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}

func typeName(s *jsonschema.Schema) string {
	switch {
	case s == nil:
		return "any"
	case s.Type != "":
		return s.Type
	case len(s.Types) > 0:
		return strings.Join(s.Types, "|")
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		return "one of several shapes"
	}
	return "any"
}

// DescribeAction is the reserved action of every entity tool that answers
// locally, without calling upstream, with the full parameter schema of the
// action named by the DescribeTarget argument (or, without one, a summary
// of every action). No operation is ever mapped to it.
const DescribeAction = "describe"

// DescribeTarget is the argument of DescribeAction naming the action to
// describe.
const DescribeTarget = "target"

// DescribeTargetHeader is the x-mcp-header name of DescribeTarget: on the
// 2026-07-28 transport its value travels in Mcp-Param-Target too (SEP-2243).
const DescribeTargetHeader = "Target"

// Annotations returns the operation's behaviour hints, from its method.
func (o *Operation) Annotations() Annotations {
	switch o.Method {
	case "GET", "HEAD":
		return Annotations{ReadOnly: true, Idempotent: true}
	case "DELETE":
		return Annotations{Destructive: true, Idempotent: true}
	case "PUT":
		return Annotations{Idempotent: true}
	}
	return Annotations{}
}

// ToolAnnotations are Annotations as MCP tool annotations, in MCP's JSON
// form: a hint equal to MCP's default is left out (destructiveHint and
// openWorldHint default to true), which keeps tools/list small.
type ToolAnnotations struct {
	ReadOnlyHint    bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// MCP returns the annotations as MCP tool annotations. Every tool reaches
// an outside service, so openWorldHint keeps its default, true.
func (a Annotations) MCP() ToolAnnotations {
	t := ToolAnnotations{ReadOnlyHint: a.ReadOnly, IdempotentHint: a.Idempotent}
	if !a.ReadOnly && !a.Destructive {
		f := false
		t.DestructiveHint = &f
	}
	return t
}

// Tool is one entity as an MCP tool, the way tools/list shows it.
type Tool struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	InputSchema *jsonschema.Schema `json:"inputSchema"`
	// OutputSchema is the entity's OutputSchema, when it has one.
	OutputSchema *jsonschema.Schema `json:"outputSchema,omitempty"`
	Annotations  ToolAnnotations    `json:"annotations"`
}

// Tools returns one Tool per entity, in entity order.
func (a *Spec) Tools() []Tool {
	out := make([]Tool, 0, len(a.Entities))
	for _, e := range a.Entities {
		out = append(out, Tool{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema, OutputSchema: e.OutputSchema, Annotations: e.Annotations.MCP()})
	}
	return out
}

// ToolsJSON returns the API's tools as a tools/list result,
// {"tools": [...]}, built on first use and cached. It measures what
// tools/list costs a client (ToolsListSize, checked against the tools
// budget by lint and generate) and compares compilations; it is not what
// the MCP endpoint serves, which is the SDK's own tools/list answer for
// the connector and protocol version, recorded once (mcp/fastpath.go) and
// a few dozen bytes larger per tool. The caller must not modify the
// returned bytes.
func (a *Spec) ToolsJSON() []byte {
	a.toolsOnce.Do(func() {
		b, err := json.Marshal(struct {
			Tools []Tool `json:"tools"`
		}{a.Tools()})
		if err != nil {
			// Schemas that do not marshal were refused by NewAPI's
			// resolution already; an empty list is the safe answer.
			b = []byte(`{"tools":[]}`)
		}
		a.tools = b
	})
	return a.tools
}

// ToolsListSize is the size in bytes of ToolsJSON: about what tools/list
// sends a client, without the SDK's per-tool additions.
func (a *Spec) ToolsListSize() int { return len(a.ToolsJSON()) }

// actionDoc is the DescribeAction answer for one action.
type actionDoc struct {
	Entity      string          `json:"entity"`
	Action      string          `json:"action"`
	OperationID string          `json:"operation_id"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Summary     string          `json:"summary,omitempty"`
	Description string          `json:"description,omitempty"`
	Deprecated  bool            `json:"deprecated,omitempty"`
	Annotations ToolAnnotations `json:"annotations"`
	Usage       string          `json:"usage"`
	// SchemaPath is the JSON pointer inside the input schema that
	// InputSchema shows ("" for the whole schema).
	SchemaPath  string `json:"schemaPath,omitempty"`
	InputSchema any    `json:"inputSchema"`
}

// actionSummary is one line of the DescribeAction answer without target.
type actionSummary struct {
	Action      string          `json:"action"`
	Summary     string          `json:"summary,omitempty"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Required    []string        `json:"required,omitempty"`
	Annotations ToolAnnotations `json:"annotations"`
}

// Describe answers DescribeAction locally. With an action name it returns
// that action's operation, behaviour hints and full input schema (the
// arguments to pass beside "action"); with "" it returns every action's
// summary, method, path and required arguments. An unknown action is an
// ErrInvalid error with code "invalid_arguments" that lists the actions.
// The answer is bounded by MaxDescribeBytes (see DescribeAt).
func (e *Entity) Describe(action string) (json.RawMessage, error) { return e.DescribeAt(action, "") }

// DescribeAt is Describe for the part of an action's input schema at the
// JSON pointer path ("" for all of it). A schema too large for
// MaxDescribeBytes is shown to the depth that fits; each part left out
// names the path that describes it.
func (e *Entity) DescribeAt(action, path string) (json.RawMessage, error) {
	if action == "" && path != "" {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s: describe with %q needs %q, the action whose schema it points into", e.Name, DescribePath, DescribeTarget)
	}
	if action == "" {
		list := make([]actionSummary, 0, len(e.Actions))
		for _, a := range e.Actions {
			if err := a.Op.Load(); err != nil {
				return nil, err
			}
			s := actionSummary{Action: a.Name, Annotations: a.Op.Annotations().MCP(), Method: a.Op.Method, Path: a.Op.Path, Summary: a.Op.Summary}
			if a.Op.InputSchema != nil {
				s.Required = a.Op.InputSchema.Required
			}
			list = append(list, s)
		}
		return json.Marshal(struct {
			Entity  string          `json:"entity"`
			Usage   string          `json:"usage"`
			Actions []actionSummary `json:"actions"`
		}{e.Name, fmt.Sprintf("Call {\"action\": %q, %q: \"<action>\"} for an action's full parameter schema.", DescribeAction, DescribeTarget), list})
	}
	a, ok := e.Action(action)
	if !ok || a.Op == nil {
		names := make([]string, 0, len(e.Actions))
		for _, x := range e.Actions {
			names = append(names, x.Name)
		}
		msg := fmt.Sprintf("%s: unknown action %q; actions: %s", e.Name, truncateString(action, 64), strings.Join(names, ", "))
		if len(msg) > maxArgsMessage {
			msg = msg[:maxArgsMessage-3] + "..."
		}
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s", msg)
	}
	op := a.Op
	if err := op.Load(); err != nil {
		return nil, err
	}
	doc := actionDoc{
		Entity: e.Name, Action: a.Name, OperationID: op.ID, Method: op.Method, Path: op.Path,
		Summary: op.Summary, Description: op.Description, Deprecated: op.Deprecated,
		Annotations: op.Annotations().MCP(),
		Usage:       fmt.Sprintf("Call this tool with {\"action\": %q} plus the arguments below as top-level properties.", a.Name),
		SchemaPath:  path,
	}
	room := MaxDescribeBytes - len(mustJSON(doc)) - len(`,"inputSchema":`)
	schema, err := describeSchema(op, path, room)
	if err != nil {
		return nil, err
	}
	doc.InputSchema = schema
	return json.Marshal(doc)
}

// stringsOnlySchema reports whether s is an object schema whose only
// constraints are properties that are plain strings ({"type": "string"}
// with annotations at most), required properties and, optionally, no
// additional properties. Against such a schema an argument map is valid
// when its required members are present (checked first by Validate), no
// member is unknown (idem) and every member is a string; the schema
// validator, which costs a quarter of a tools/call's allocations, is then
// not needed. Anything else in the schema, or a value that is not a
// string, goes to the validator, whose word (and error text) stands.
func stringsOnlySchema(s *jsonschema.Schema) bool {
	if s == nil || s.Type != "object" {
		return false
	}
	top := withoutAnnotations(s)
	top.Type, top.Properties, top.Required = "", nil, nil
	if ap := top.AdditionalProperties; ap != nil {
		if !reflect.DeepEqual(*ap, jsonschema.Schema{Not: &jsonschema.Schema{}}) {
			return false
		}
		top.AdditionalProperties = nil
	}
	if !reflect.DeepEqual(top, jsonschema.Schema{}) {
		return false
	}
	for _, p := range s.Properties {
		if p == nil || !reflect.DeepEqual(withoutAnnotations(p), jsonschema.Schema{Type: "string"}) {
			return false
		}
	}
	return true
}

// withoutAnnotations is a copy of s without the keywords that do not
// constrain a value.
func withoutAnnotations(s *jsonschema.Schema) jsonschema.Schema {
	c := *s
	c.Title, c.Description, c.Comment, c.Default, c.Deprecated = "", "", "", nil, false
	c.ReadOnly, c.WriteOnly, c.Examples, c.Extra, c.PropertyOrder = false, false, nil, nil, nil
	return c
}

// validStrings reports whether args, distinct names with string values,
// are certainly valid: what Validate and BuildRequest's check of unknown
// arguments would accept without a word, for a loaded operation whose
// schema is strings only (stringsOnlySchema). False says nothing:
// the map's path decides, and words the error.
func (o *Operation) validStrings(args []StringArg) bool {
	s := o.InputSchema
	if !o.stringsOnly || o.resolved == nil || s == nil {
		return false
	}
	for _, a := range args {
		if !o.takesArg(a.Name) {
			return false
		}
		if _, ok := s.Properties[a.Name]; !ok && s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
			return false
		}
	}
required:
	for _, r := range s.Required {
		for _, a := range args {
			if a.Name == r {
				continue required
			}
		}
		return false
	}
	return true
}

// allStrings reports whether every value of args is a string.
func allStrings(args map[string]any) bool {
	for _, v := range args {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}
