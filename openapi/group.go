package openapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard/registry"
)

// Mapping is an entity mapping file: it names the entities and, for each,
// which operation each action runs. When a mapping is given, operations it
// does not name are left out of the registry.
//
//	{"entities": {"issues": {"description": "...", "actions": {"list": "issues/list-for-repo"}}}}
type Mapping struct {
	Entities map[string]MappedEntity `json:"entities"`
}

// MappedEntity is one entity of a Mapping: Actions maps an action name to
// an operationId (or an operation's tool-safe name).
type MappedEntity struct {
	Description string            `json:"description,omitempty"`
	Actions     map[string]string `json:"actions"`
}

// group assigns the compiled operations to entities.
func (c *compiler) group(m *Mapping) []*registry.Entity {
	type member struct {
		action string // explicit action name, or "" to derive
		op     *registry.Operation
	}
	groups := map[string][]member{}
	descs := map[string]string{}
	if m != nil {
		byID := map[string]*registry.Operation{}
		for _, co := range c.ops {
			byID[co.op.Name] = co.op
		}
		for _, co := range c.ops {
			byID[co.op.ID] = co.op
		}
		for _, en := range sortedKeys(m.Entities) {
			me := m.Entities[en]
			name := toolSafe(en, 64)
			descs[name] = me.Description
			for _, an := range sortedKeys(me.Actions) {
				op, ok := byID[me.Actions[an]]
				if !ok {
					c.problems = append(c.problems, fmt.Sprintf("mapping: entity %s action %s: operation %q not found", en, an, me.Actions[an]))
					continue
				}
				groups[name] = append(groups[name], member{action: toolSafe(an, 64), op: op})
			}
		}
	} else {
		tagNames := c.tagEntityNames()
		for _, co := range c.ops {
			var name string
			switch {
			case co.entity != "":
				name = snake(co.entity, 64)
			case len(co.tags) > 0:
				name = tagNames[co.tags[0]]
			default:
				name = pathEntity(co.op.Path)
			}
			groups[name] = append(groups[name], member{action: co.action, op: co.op})
		}
		if c.doc.Tags != nil {
			for _, t := range c.doc.Tags {
				if t != nil && t.Description != "" {
					if n := tagNames[t.Name]; n != "" && descs[n] == "" {
						descs[n] = t.Description
					}
				}
			}
		}
	}

	entities := make([]*registry.Entity, 0, len(groups))
	for _, name := range sortedKeys(groups) {
		ms := groups[name]
		// Derive action names: explicit ones first, then the id without the
		// entity's words where unique, else the whole id in snake case.
		names := make([]string, len(ms))
		taken := map[string]bool{}
		for i, mb := range ms {
			if mb.action != "" {
				names[i] = toolSafe(mb.action, 64)
			}
		}
		count := map[string]int{}
		cand := make([]string, len(ms))
		for i, mb := range ms {
			if names[i] == "" {
				cand[i] = actionName(mb.op.ID, name)
				count[cand[i]]++
			}
		}
		for i := range ms {
			if names[i] != "" {
				taken[names[i]] = true
			}
		}
		for i, mb := range ms {
			if names[i] != "" {
				continue
			}
			n := cand[i]
			if n == "" || count[n] > 1 || taken[n] {
				n = snake(mb.op.ID, 64)
			}
			base := n
			for k := 2; taken[n]; k++ {
				suffix := fmt.Sprintf("_%d", k)
				n = truncateName(base, 64-len(suffix)) + suffix
			}
			taken[n] = true
			names[i] = n
		}
		e := &registry.Entity{Name: name}
		for i, mb := range ms {
			e.Actions = append(e.Actions, &registry.Action{Name: names[i], Op: mb.op})
		}
		slices.SortFunc(e.Actions, func(a, b *registry.Action) int { return strings.Compare(a.Name, b.Name) })
		e.Description = entityDescription(name, descs[name], e.Actions)
		e.InputSchema = entitySchema(e.Actions)
		e.Annotations = annotations(e.Actions)
		entities = append(entities, e)
	}
	return entities
}

// tagEntityNames maps each tag used by an operation to its entity name: the
// tag in lower snake case, without a first word that every tag shares (as
// in Twilio's "Api20100401Account").
func (c *compiler) tagEntityNames() map[string]string {
	tags := map[string][]string{}
	for _, co := range c.ops {
		if len(co.tags) > 0 && co.entity == "" {
			tags[co.tags[0]] = words(co.tags[0])
		}
	}
	common := ""
	for _, w := range tags {
		if len(w) < 2 {
			common = ""
			break
		}
		if common == "" {
			common = w[0]
		} else if common != w[0] {
			common = ""
			break
		}
	}
	if len(tags) < 2 {
		common = ""
	}
	out := map[string]string{}
	for t, w := range tags {
		if common != "" {
			w = w[1:]
		}
		if len(w) == 0 {
			out[t] = snake(t, 64)
			continue
		}
		out[t] = toolSafe(strings.Join(w, "_"), 64)
	}
	return out
}

var versionSegment = regexp.MustCompile(`^(v\d+(\.\d+)*|\d[\d.-]*|api)$`)

// pathEntity names an untagged operation's entity after the first path
// segment that is neither a version, a parameter nor "api".
func pathEntity(path string) string {
	path, _, _ = strings.Cut(path, "#")
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || strings.HasPrefix(seg, "{") || versionSegment.MatchString(strings.ToLower(seg)) {
			continue
		}
		seg, _, _ = strings.Cut(seg, ".")
		if n := snake(seg, 64); strings.Trim(n, "_") != "" {
			return n
		}
	}
	return "default"
}

// entityDescription is the entity's description plus one line per action,
// bounded at maxDescription.
func entityDescription(name, desc string, actions []*registry.Action) string {
	var b strings.Builder
	desc = strings.TrimSpace(desc)
	if desc == "" {
		desc = "Operations on " + strings.ReplaceAll(name, "_", " ") + "."
	}
	b.WriteString(truncate(desc, 400))
	b.WriteString("\nActions:")
	for _, a := range actions {
		s := a.Op.Summary
		if s == "" {
			s = oneLine(a.Op.Description)
		}
		if s == "" {
			s = a.Op.Method + " " + a.Op.Path
		}
		b.WriteString("\n- " + a.Name + ": " + truncate(s, 160))
	}
	return truncate(b.String(), maxDescription)
}

// entitySchema is the tool schema: the action enum plus the union of the
// actions' arguments.
func entitySchema(actions []*registry.Action) *jsonschema.Schema {
	enum := make([]any, len(actions))
	names := make([]string, len(actions))
	for i, a := range actions {
		enum[i] = a.Name
		names[i] = a.Name
	}
	props := map[string]*jsonschema.Schema{
		"action": {
			Type:        "string",
			Enum:        enum,
			Description: truncate("The action to perform: "+strings.Join(names, ", ")+".", maxDescription),
		},
	}
	users := map[string][]string{}
	conflict := map[string]bool{}
	first := map[string][]byte{}
	for _, a := range actions {
		if a.Op.InputSchema == nil {
			continue
		}
		for _, pn := range sortedKeys(a.Op.InputSchema.Properties) {
			if pn == "action" {
				continue
			}
			ps := a.Op.InputSchema.Properties[pn]
			users[pn] = append(users[pn], a.Name)
			prev, ok := props[pn]
			if !ok {
				props[pn] = ps
				continue
			}
			if prev == ps || conflict[pn] {
				continue
			}
			if first[pn] == nil {
				first[pn], _ = json.Marshal(prev)
			}
			if b, _ := json.Marshal(ps); string(b) != string(first[pn]) {
				conflict[pn] = true
			}
		}
	}
	for pn := range conflict {
		cp := *props[pn]
		note := "(Differs between actions; taken by: " + strings.Join(users[pn], ", ") + ".)"
		if cp.Description != "" {
			note = truncate(cp.Description, maxDescription-len(note)-1) + " " + note
		}
		cp.Description = truncate(note, maxDescription)
		props[pn] = &cp
	}
	return &jsonschema.Schema{Type: "object", Properties: props, Required: []string{"action"}}
}

// annotations derives behaviour hints from the actions' methods.
func annotations(actions []*registry.Action) registry.Annotations {
	a := registry.Annotations{ReadOnly: true, Idempotent: true}
	for _, ac := range actions {
		switch ac.Op.Method {
		case "GET", "HEAD":
		case "DELETE":
			a.ReadOnly = false
			a.Destructive = true
		case "PUT":
			a.ReadOnly = false
		default:
			a.ReadOnly = false
			a.Idempotent = false
		}
	}
	if len(actions) == 0 {
		a.ReadOnly, a.Idempotent = false, false
	}
	return a
}
