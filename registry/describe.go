package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	switchboard "github.com/switchboardhq/switchboard"
)

// DescribePath is the argument of DescribeAction that pages into an
// action's input schema: a JSON pointer ("/properties/body/properties/items")
// whose schema is returned instead of the whole one.
const DescribePath = "path"

// MaxDescribeBytes bounds a describe answer. A schema that does not fit is
// shown to a depth that fits: deeper parts are replaced by a note naming
// the JSON pointer to describe them with.
const MaxDescribeBytes = 16 << 10

// stubKey marks a schema part left out of a describe answer.
const stubKey = "x-describe-path"

// bounded is a schema (as generic JSON) at a JSON pointer inside an
// action's input schema, cut to fit limit bytes.
//
// Written here because it works on the schema's JSON and its pointers,
// which the JSON Schema library does not offer: a part left out is
// replaced by {"description": "...", "x-describe-path": "<pointer>"}.
func bounded(schema any, base string, limit int) any {
	type spot struct {
		depth     int
		ptr       string
		container any // map[string]any or []any
		key       string
		index     int
	}
	var spots []spot
	var walk func(v any, ptr string, depth int)
	child := func(container any, key string, index int, v any, ptr string, depth int) {
		if _, ok := v.(map[string]any); ok {
			spots = append(spots, spot{depth: depth, ptr: ptr, container: container, key: key, index: index})
		}
		walk(v, ptr, depth)
	}
	walk = func(v any, ptr string, depth int) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range sortedMapKeys(m) {
			switch k {
			case "properties", "patternProperties", "$defs":
				sub, _ := m[k].(map[string]any)
				for _, name := range sortedMapKeys(sub) {
					child(sub, name, -1, sub[name], ptr+"/"+k+"/"+escapePointer(name), depth+1)
				}
			case "items", "additionalProperties", "not", "contains":
				child(m, k, -1, m[k], ptr+"/"+k, depth+1)
			case "oneOf", "anyOf", "allOf", "prefixItems":
				list, _ := m[k].([]any)
				for i, e := range list {
					child(list, "", i, e, ptr+"/"+k+"/"+strconv.Itoa(i), depth+1)
				}
			}
		}
	}
	walk(schema, base, 0)
	size := func() int {
		b, _ := json.Marshal(schema)
		return len(b)
	}
	if size() <= limit {
		return schema
	}
	// Deepest parts first, largest first at each depth: the top of the
	// schema stays visible, as far down as the bound allows.
	slices.SortStableFunc(spots, func(a, b spot) int { return b.depth - a.depth })
	for d := 0; d < len(spots); {
		depth := spots[d].depth
		end := d
		for end < len(spots) && spots[end].depth == depth {
			end++
		}
		level := spots[d:end]
		weight := make(map[string]int, len(level))
		for _, s := range level {
			weight[s.ptr] = len(mustJSON(childAt(s.container, s.key, s.index)))
		}
		slices.SortStableFunc(level, func(a, b spot) int { return weight[b.ptr] - weight[a.ptr] })
		for _, s := range level {
			stub := map[string]any{
				"description": fmt.Sprintf("(not shown: %d bytes; call describe with this action as target and path %q)", weight[s.ptr], s.ptr),
				stubKey:       s.ptr,
			}
			if t, ok := childAt(s.container, s.key, s.index).(map[string]any)["type"]; ok {
				stub["type"] = t
			}
			setChild(s.container, s.key, s.index, stub)
			if size() <= limit {
				return schema
			}
		}
		d = end
	}
	return map[string]any{"description": fmt.Sprintf("(not shown: too large; call describe with path %q and deeper pointers)", base), stubKey: base}
}

func childAt(container any, key string, index int) any {
	if m, ok := container.(map[string]any); ok {
		return m[key]
	}
	return container.([]any)[index]
}

func setChild(container any, key string, index int, v any) {
	if m, ok := container.(map[string]any); ok {
		m[key] = v
		return
	}
	container.([]any)[index] = v
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func escapePointer(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// pointerGet resolves a JSON pointer in generic JSON.
func pointerGet(v any, ptr string) (any, bool) {
	if ptr == "" || ptr == "/" {
		return v, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = unescapePointer(seg)
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// describeSchema is the action's input schema at path, bounded so that
// the whole answer stays within MaxDescribeBytes (room is kept for the
// rest of the answer).
func describeSchema(op *Operation, path string, room int) (any, error) {
	raw := mustJSON(op.InputSchema)
	if path == "" && len(raw) <= room {
		return json.RawMessage(raw), nil // as compiled, key order kept
	}
	var whole any
	if err := json.Unmarshal(raw, &whole); err != nil {
		return nil, err
	}
	sub, ok := pointerGet(whole, path)
	if !ok {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s: no schema at path %q of action %s's input schema", op.Name, truncateString(path, 120), op.Name)
	}
	return bounded(sub, path, room), nil
}
