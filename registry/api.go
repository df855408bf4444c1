package registry

import (
	"fmt"
	"regexp"
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
func NewAPI(title string, servers []string, entities []*Entity, problems []string) *API {
	a := &API{
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
func (a *API) Entity(name string) (*Entity, bool) {
	e, ok := a.entities[name]
	return e, ok
}

// Operation returns the operation with the given tool-safe Name or
// original operationId.
func (a *API) Operation(idOrName string) (*Operation, bool) {
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
		if err := r.Validate(args); err != nil {
			reasons = append(reasons, schemaReason(err.Error()))
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

var schemaPath = regexp.MustCompile(`validating /properties/([^/:\s]+)`)

// schemaReason reduces a jsonschema validation error to the argument it is
// about, dropping any echoed value.
func schemaReason(msg string) string {
	if m := schemaPath.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("argument %q does not match its schema", unescapePointer(m[1]))
	}
	return "arguments do not match the schema"
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
