package openapi

import (
	"cmp"
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
	// Knowledge, when set, declares the connector a knowledge source: its
	// document hierarchy served as MCP Resources. The compiler keeps it as
	// is; package knowledge reads and checks it.
	Knowledge json.RawMessage `json:"knowledge,omitempty"`
}

// MappedEntity is one entity of a Mapping: Actions maps an action name to
// an operation's tool-safe name or its operationId (the name is tried
// first).
type MappedEntity struct {
	Description string            `json:"description,omitempty"`
	Actions     map[string]string `json:"actions"`
}

// Grouping and context budgets.
const (
	// MaxEntities is the number of entity tools default grouping aims at:
	// above it, entities sharing a first word are merged, then the
	// smallest go into one "other" entity.
	MaxEntities = 40
	// ToolsBudget is the size in bytes of the tools/list document the
	// compiler aims at; schemas and descriptions are shortened, in steps,
	// until the document fits.
	ToolsBudget = 32 << 10
)

// group is one entity being formed.
type group struct {
	name    string
	desc    string
	members []member
}

// member is an operation in a group.
type member struct {
	action string // explicit action name, or "" to derive
	op     *registry.Operation
}

// group assigns the compiled operations to entities and returns them with
// the mapping that describes the grouping.
func (c *compiler) group(m *Mapping) ([]*registry.Entity, *Mapping) {
	var groups []*group
	if m != nil {
		groups = c.mappedGroups(m)
	} else {
		groups = c.defaultGroups()
		maxEntities := MaxEntities
		if c.knowledgeTool {
			maxEntities-- // the knowledge tool is one of the tools
		}
		if len(groups) > maxEntities {
			groups = mergeFamilies(groups, maxEntities)
		}
		if len(groups) > maxEntities {
			groups = mergeSmallest(groups, maxEntities)
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.name, b.name) })

	chosen := &Mapping{Entities: map[string]MappedEntity{}}
	if m != nil {
		chosen.Knowledge = m.Knowledge
	}
	ids := c.idCounts()
	entities := make([]*registry.Entity, 0, len(groups))
	for _, g := range groups {
		names := c.actionNames(g)
		e := &registry.Entity{Name: g.name}
		me := MappedEntity{Description: g.desc, Actions: map[string]string{}}
		for i, mb := range g.members {
			e.Actions = append(e.Actions, &registry.Action{Name: names[i], Op: mb.op})
			ref := mb.op.ID
			if ids[ref] != 1 {
				ref = mb.op.Name
			}
			me.Actions[names[i]] = ref
		}
		slices.SortFunc(e.Actions, func(a, b *registry.Action) int { return strings.Compare(a.Name, b.Name) })
		e.Annotations = annotations(e.Actions)
		entities = append(entities, e)
		chosen.Entities[g.name] = me
	}
	budget := listBudget
	if c.knowledgeTool {
		budget -= knowledgeToolReserve
	}
	fitBudget(entities, groups, budget)
	return entities, chosen
}

// idCounts counts how many operations each operationId or name refers to,
// so that the mapping written out names an operation unambiguously.
func (c *compiler) idCounts() map[string]int {
	n := map[string]int{}
	for _, co := range c.ops {
		n[co.op.ID]++
		if co.op.Name != co.op.ID {
			n[co.op.Name] += 2 // a name never stands for an id
		}
	}
	return n
}

// mappedGroups builds the groups a mapping names.
func (c *compiler) mappedGroups(m *Mapping) []*group {
	byName := map[string]*registry.Operation{}
	byID := map[string]*registry.Operation{}
	for _, co := range c.ops {
		byName[co.op.Name] = co.op
		if _, dup := byID[co.op.ID]; !dup {
			byID[co.op.ID] = co.op
		}
	}
	index := map[string]*group{}
	var groups []*group
	for _, en := range sortedKeys(m.Entities) {
		me := m.Entities[en]
		name := toolSafe(en, 64)
		where := "$.entities['" + en + "']"
		if name != en {
			c.warnIn("mapping", where, "entity name %q is not a valid tool name: called %s", truncate(en, 80), name)
		}
		g := index[name]
		if g == nil {
			g = &group{name: name, desc: me.Description}
			index[name] = g
			groups = append(groups, g)
		}
		for _, an := range sortedKeys(me.Actions) {
			ref := me.Actions[an]
			op, ok := byName[ref]
			if !ok {
				op, ok = byID[ref]
			}
			if !ok {
				c.failIn("mapping", where+".actions['"+an+"']", "operation %q not found in the description", truncate(ref, 120))
				continue
			}
			action := toolSafe(an, 64)
			if action == registry.DescribeAction {
				c.warnIn("mapping", where+".actions['"+an+"']", "action name %q is reserved for the describe action", an)
				action = ""
			}
			g.members = append(g.members, member{action: action, op: op})
		}
	}
	return groups
}

// defaultGroups groups operations by x-entity, else their first tag
// unless it holds more than coarseTag operations, else the resource of
// their path (resourceName).
func (c *compiler) defaultGroups() []*group {
	tagNames := c.tagEntityNames()
	index := map[string]*group{}
	var groups []*group
	perTag := map[string]int{}
	for _, co := range c.ops {
		if co.entity == "" && len(co.tags) > 0 {
			perTag[co.tags[0]]++
		}
	}
	resources := map[string]string{} // singular -> the name used
	for _, co := range c.ops {
		name := pathEntity(co.op.Path)
		key := singular(name)
		if cur, ok := resources[key]; !ok || len(name) > len(cur) || len(name) == len(cur) && name < cur {
			resources[key] = name
		}
	}
	for _, co := range c.ops {
		var name string
		switch {
		case co.entity != "":
			name = snake(co.entity, 64)
		case len(co.tags) > 0 && perTag[co.tags[0]] <= coarseTag:
			// A coarser tag is not one tool: its operations are grouped
			// by resource, as untagged ones are.
			name = tagNames[co.tags[0]]
		default:
			name = resourceName(co.op.Path, resources)
		}
		g := index[name]
		if g == nil {
			g = &group{name: name}
			index[name] = g
			groups = append(groups, g)
		}
		action := co.action
		if action == registry.DescribeAction {
			action = ""
		}
		g.members = append(g.members, member{action: action, op: co.op})
	}
	for _, t := range c.doc.Tags {
		if t != nil && t.Description != "" {
			if g := index[tagNames[t.Name]]; g != nil && g.desc == "" {
				g.desc = t.Description
			}
		}
	}
	return groups
}

// family is the key entities merge under: the singular of their name's
// first word ("payment_intents" -> "payment").
func family(name string) string {
	first, _, _ := strings.Cut(name, "_")
	return singular(first)
}

// mergeFamilies merges groups whose names share a first word, the
// families that save the most tools first, until at most max remain.
func mergeFamilies(groups []*group, max int) []*group {
	fam := map[string][]*group{}
	for _, g := range groups {
		fam[family(g.name)] = append(fam[family(g.name)], g)
	}
	keys := sortedKeys(fam)
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(len(fam[b]), len(fam[a])) })
	merged := map[*group]bool{}
	var out []*group
	count := len(groups)
	for _, k := range keys {
		members := fam[k]
		if count <= max || len(members) < 2 {
			break
		}
		var parts []string
		g := &group{name: k}
		for _, x := range members {
			merged[x] = true
			parts = append(parts, strings.ReplaceAll(x.name, "_", " "))
			g.members = append(g.members, x.members...)
		}
		g.desc = "Operations on " + strings.Join(parts, ", ") + "."
		out = append(out, g)
		count -= len(members) - 1
	}
	for _, g := range groups {
		if !merged[g] {
			out = append(out, g)
		}
	}
	return uniqueGroupNames(out)
}

// mergeSmallest moves the smallest groups into one "other" group until at
// most max remain.
func mergeSmallest(groups []*group, max int) []*group {
	sorted := slices.Clone(groups)
	slices.SortStableFunc(sorted, func(a, b *group) int {
		return cmp.Or(cmp.Compare(len(a.members), len(b.members)), strings.Compare(a.name, b.name))
	})
	n := len(groups) - max + 1 // groups to fold into "other"
	other := &group{name: "other"}
	folded := map[*group]bool{}
	var parts []string
	for _, g := range sorted[:n] {
		folded[g] = true
		parts = append(parts, strings.ReplaceAll(g.name, "_", " "))
		other.members = append(other.members, g.members...)
	}
	slices.Sort(parts)
	other.desc = "Other operations: " + strings.Join(parts, ", ") + "."
	out := []*group{other}
	for _, g := range groups {
		if !folded[g] {
			out = append(out, g)
		}
	}
	return uniqueGroupNames(out)
}

// uniqueGroupNames merges groups that ended up with the same name.
func uniqueGroupNames(groups []*group) []*group {
	index := map[string]*group{}
	var out []*group
	for _, g := range groups {
		if prev := index[g.name]; prev != nil {
			prev.members = append(prev.members, g.members...)
			if prev.desc == "" {
				prev.desc = g.desc
			}
			continue
		}
		index[g.name] = g
		out = append(out, g)
	}
	return out
}

// actionNames derives the group's action names: explicit ones first, then
// the id without the entity's words where unique, else the whole id in
// snake case; never DescribeAction.
func (c *compiler) actionNames(g *group) []string {
	ms := g.members
	names := make([]string, len(ms))
	taken := map[string]bool{registry.DescribeAction: true}
	for i, mb := range ms {
		if mb.action != "" {
			n := toolSafe(mb.action, 64)
			for k := 2; taken[n]; k++ {
				suffix := fmt.Sprintf("_%d", k)
				n = truncateName(toolSafe(mb.action, 64), 64-len(suffix)) + suffix
			}
			names[i] = n
			taken[n] = true
		}
	}
	count := map[string]int{}
	cand := make([]string, len(ms))
	for i, mb := range ms {
		if names[i] == "" {
			cand[i] = actionName(mb.op.ID, g.name)
			count[cand[i]]++
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
	return names
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

// coarseTag is the number of operations above which a tag is too coarse
// to be one entity: its operations are grouped by the resource in their
// path instead.
const coarseTag = 25

// resourceName is the entity of an operation grouped by its path: the
// first segment that is neither a version, a parameter nor "api", with
// singular and plural forms merged under the longer one, which resources
// holds by singular ("/users", "/user/{id}" -> users).
func resourceName(path string, resources map[string]string) string {
	name := pathEntity(path)
	if n, ok := resources[singular(name)]; ok {
		return n
	}
	return name
}

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

// level is one step of shortening tools/list to fit ToolsBudget.
type level struct {
	desc    int // bound of the entity's own description
	summary int // bound of each action's summary line; 0 leaves them out
	union   int // largest union-of-parameters schema shown; 0 shows none
}

var levels = []level{
	{desc: 400, summary: 160, union: 4096},
	{desc: 300, summary: 100, union: 2048},
	{desc: 200, summary: 60, union: 1024},
	{desc: 160, summary: 0, union: 1024},
	{desc: 120, summary: 0, union: 0},
	{desc: 60, summary: 0, union: 0},
	{desc: 24, summary: 0, union: 0},
}

// fitBudget sets each entity's description, input schema and Compact
// flag at the richest level whose tools/list fits budget (the last level
// otherwise).
func fitBudget(entities []*registry.Entity, groups []*group, budget int) {
	descs := map[string]string{}
	for _, g := range groups {
		descs[g.name] = g.desc
	}
	unions := make([]*jsonschema.Schema, len(entities))
	sizes := make([]int, len(entities))
	for i, e := range entities {
		unions[i] = unionSchema(e.Actions)
		b, err := json.Marshal(unions[i])
		if err != nil {
			sizes[i] = 1 << 30
			continue
		}
		sizes[i] = len(b)
	}
	for li, lv := range levels {
		total := len(`{"tools":[]}`) - 1
		for i, e := range entities {
			e.Description = entityDescription(e.Name, descs[e.Name], e.Actions, lv)
			if lv.union > 0 && sizes[i] <= lv.union {
				e.InputSchema, e.Compact = unions[i], false
			} else {
				e.InputSchema, e.Compact = compactSchema(e.Actions), true
			}
			e.OutputSchema = nil
			total += e.MCPToolSize()
		}
		if total <= budget || li == len(levels)-1 {
			fitOutputs(entities, total, budget)
			return
		}
	}
}

// outputTiers are the sizes an entity's output schema may take, richest
// first; 0 is the permissive schema, -1 the same without its description.
var outputTiers = []int{8192, 4096, 2048, 1024, 512, 0, -1}

// envelopeReserve is the room left for the JSON-RPC envelope around the
// SDK's tools/list result and the _meta a 2026-07-28 answer carries (about
// 190 bytes together): the budget is what a client reads off the wire,
// which TestVendorFidelityThroughMCP and TestToolsListWireBudget measure
// for every protocol version.
const envelopeReserve = 320

// ToolsListBound is an upper bound of the bytes a client receives for the
// API's tools/list, in any protocol version: the SDK's result for its
// tools plus envelopeReserve. Compilation keeps it within ToolsBudget.
func ToolsListBound(api *registry.Spec) int {
	return registry.MCPToolsListSize(api.Entities) + envelopeReserve
}

// listBudget is the size the SDK's tools/list result may take.
const listBudget = ToolsBudget - envelopeReserve

// knowledgeToolReserve is the room a knowledge source's own tool (the
// access check, package mcp's knowledgeTool: about 700 bytes as the SDK
// lists it) takes in tools/list; the entities of a connector whose
// mapping has a knowledge section fit in the rest.
const knowledgeToolReserve = 1024

// fitOutputs gives the entities whose answers are known the richest output
// schemas (one tier for all) that keep tools/list, of total bytes
// without them, within budget; none when even the smallest does not fit.
// Output schemas never take room from the input schemas.
func fitOutputs(entities []*registry.Entity, total, budget int) {
	const member = len(`,"outputSchema":`)
	for _, tier := range outputTiers {
		n := total
		schemas := make([]*jsonschema.Schema, len(entities))
		for i, e := range entities {
			if tier < 0 {
				schemas[i] = registry.EntityOutputSchema(e.Actions, 0)
				if schemas[i] != nil {
					schemas[i] = &jsonschema.Schema{Type: "object"}
				}
			} else {
				schemas[i] = registry.EntityOutputSchema(e.Actions, tier)
			}
			if schemas[i] != nil {
				b, _ := json.Marshal(schemas[i])
				n += member + len(b)
			}
		}
		if n <= budget {
			for i, e := range entities {
				e.OutputSchema = schemas[i]
			}
			return
		}
	}
	for _, e := range entities {
		e.OutputSchema = nil
	}
}

// describeHint tells the agent how to reach an action's parameters.
const describeHint = `action "describe" with "target": <action> returns that action's parameters.`

// entityDescription is the entity's description, then, at levels that keep
// them, one line per action.
func entityDescription(name, desc string, actions []*registry.Action, lv level) string {
	var b strings.Builder
	desc = strings.TrimSpace(desc)
	if desc == "" {
		desc = "Operations on " + strings.ReplaceAll(name, "_", " ") + "."
	}
	b.WriteString(truncate(desc, lv.desc))
	if lv.summary > 0 {
		b.WriteString("\nActions:")
		for _, a := range actions {
			s := a.Op.Summary
			if s == "" {
				s = oneLine(a.Op.Description)
			}
			if s == "" {
				s = a.Op.Method + " " + a.Op.Path
			}
			b.WriteString("\n- " + a.Name + ": " + truncate(s, lv.summary))
		}
	}
	return truncate(b.String(), maxDescription)
}

// actionProperty is the "action" argument: the actions plus describe.
func actionProperty(actions []*registry.Action) *jsonschema.Schema {
	enum := make([]any, 0, len(actions)+1)
	for _, a := range actions {
		enum = append(enum, a.Name)
	}
	enum = append(enum, registry.DescribeAction)
	return &jsonschema.Schema{Type: "string", Enum: enum, Description: "The action to perform; its arguments go beside it. " + describeHint}
}

// targetProperty is the argument of the describe action. It is mirrored
// into the Mcp-Param-Target header on the 2026-07-28 transport (SEP-2243,
// x-mcp-header), so intermediaries see which action's schema is asked for
// without reading the body. It is the one parameter annotated: an optional
// argument of a local action, so a client that calls without listing tools
// first (and so cannot mirror) is refused only for describe, never for an
// upstream call.
func targetProperty() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: `With action "describe": the action to describe.`,
		Extra: map[string]any{"x-mcp-header": registry.DescribeTargetHeader}}
}

// compactSchema is the tool schema that leaves the actions' parameters to
// the describe action.
func compactSchema(actions []*registry.Action) *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"action":                actionProperty(actions),
			registry.DescribeTarget: targetProperty(),
		},
		Required: []string{"action"},
	}
}

// unionSchema is the tool schema that shows the action enum plus the union
// of the actions' arguments.
func unionSchema(actions []*registry.Action) *jsonschema.Schema {
	props := map[string]*jsonschema.Schema{"action": actionProperty(actions)}
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
		note := truncate("(Differs between actions; taken by: "+strings.Join(users[pn], ", "), 300) + ".)"
		if cp.Description != "" {
			note = truncate(cp.Description, maxDescription-len(note)-1) + " " + note
		}
		cp.Description = truncate(note, maxDescription)
		props[pn] = &cp
	}
	if _, taken := props[registry.DescribeTarget]; !taken {
		props[registry.DescribeTarget] = targetProperty()
	}
	return &jsonschema.Schema{Type: "object", Properties: props, Required: []string{"action"}}
}

// annotations are the entity's hints: read-only or idempotent when every
// action is, destructive when any action is.
func annotations(actions []*registry.Action) registry.Annotations {
	if len(actions) == 0 {
		return registry.Annotations{}
	}
	a := registry.Annotations{ReadOnly: true, Idempotent: true}
	for _, ac := range actions {
		h := ac.Op.Annotations()
		a.ReadOnly = a.ReadOnly && h.ReadOnly
		a.Idempotent = a.Idempotent && h.Idempotent
		a.Destructive = a.Destructive || h.Destructive
	}
	return a
}
