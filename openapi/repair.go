package openapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Repairing references before loading.
//
// kin-openapi refuses a whole description when one local reference is of
// a kind it does not expect at its place (a response that refers to a
// requestBodies component), points below a component (into another
// schema's oneOf/0), or points at nothing; one such reference among
// hundreds of operations would leave none. It has no option to skip what
// it cannot resolve, so repairRefs does it on the raw document first:
//
//   - a reference of the wrong kind, or deeper than a component, is
//     replaced by a copy of its target taken from the raw document, with
//     the fields that are not valid at its place left out;
//   - a reference to nothing breaks what holds it: the operation (or path
//     item) it is in is left out, and a component holding it is removed
//     along with every component and operation that refers to it.
//
// Every repair is a finding naming the JSON path of what was repaired or
// left out. A description that needs none is loaded from its own bytes.

// maxInlined bounds the references inlined in one description (an
// inlined copy may hold more deep references).
const maxInlined = 10000

// canonicalRef matches a reference to a whole component.
var canonicalRef = regexp.MustCompile(`^#/components/([^/]+)/[^/]+$`)

// repair is the state of one repairRefs.
type repair struct {
	root     map[string]any
	findings []finding
	inlined  int
	changed  bool
	// broken lists the JSON-pointer locations (as key lists) of the
	// references to nothing.
	broken [][]string
}

// repairRefs returns spec, or the repaired description in JSON and what
// was done to it.
func repairRefs(spec []byte) ([]byte, []finding, error) {
	var v any
	if err := yaml.Unmarshal(spec, &v); err != nil { // YAML is a superset of JSON
		return spec, nil, nil // the loader says what is wrong
	}
	root, ok := stringKeys(v).(map[string]any)
	if !ok {
		return spec, nil, nil
	}
	r := &repair{root: root}
	r.walk(root, nil)
	if len(r.broken) > 0 {
		r.dropBroken()
	}
	if !r.changed {
		return spec, nil, nil
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, nil, invalidOpenAPI(err)
	}
	return out, r.findings, nil
}

// placeOf is the component kind a reference at path must be of, or ""
// when any kind may be there (or the place is not one checked).
func placeOf(path []string) string {
	n := len(path)
	switch {
	case n == 3 && path[0] == "components":
		return path[1]
	case n >= 2 && path[n-2] == "responses" && (n == 5 && path[0] == "paths"):
		return "responses"
	case n == 4 && path[0] == "paths" && path[3] == "requestBody":
		return "requestBodies"
	case n >= 2 && path[n-2] == "parameters" && path[0] == "paths" && (n == 4 || n == 5):
		return "parameters"
	case n >= 1 && slices.Contains([]string{"schema", "items", "not", "additionalProperties"}, path[n-1]),
		n >= 2 && slices.Contains([]string{"properties", "allOf", "oneOf", "anyOf"}, path[n-2]):
		return "schemas"
	}
	return ""
}

// walk visits every node below v, at path, repairing references.
func (r *repair) walk(v any, path []string) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
			r.reference(x, ref, path)
			if _, still := x["$ref"]; still {
				return
			}
		}
		for _, k := range sortedKeys(x) {
			r.walk(x[k], append(slices.Clip(path), k))
		}
	case []any:
		for i, e := range x {
			r.walk(e, append(slices.Clip(path), "["+strconv.Itoa(i)+"]"))
		}
	}
}

// reference checks the reference node x (whose $ref is ref) at path, and
// inlines or records it.
func (r *repair) reference(x map[string]any, ref string, path []string) {
	target, ok := r.resolve(ref, 0)
	if !ok {
		r.broken = append(r.broken, slices.Clone(path))
		return
	}
	place := placeOf(path)
	m := canonicalRef.FindStringSubmatch(ref)
	if m != nil && (place == "" || place == m[1]) {
		return // kin-openapi resolves it
	}
	if r.inlined >= maxInlined {
		return
	}
	tm, ok := target.(map[string]any)
	if !ok {
		return
	}
	r.inlined++
	r.changed = true
	cp := deepCopy(tm).(map[string]any)
	kind := ""
	if m != nil {
		kind = m[1]
	}
	fitPlace(cp, place, kind)
	delete(x, "$ref")
	for k, e := range cp {
		if _, own := x[k]; !own { // siblings of $ref win
			x[k] = e
		}
	}
	why := "it points inside another component"
	if m != nil {
		why = fmt.Sprintf("it refers to a %s component where a %s is expected", m[1], strings.TrimSuffix(place, "s"))
	}
	r.findings = append(r.findings, finding{Finding: Finding{Severity: SeverityWarning, Path: jsonPath(path),
		Message: fmt.Sprintf("reference %q inlined from the document: %s", truncate(ref, 120), why)}})
}

// fitPlace keeps, of an inlined copy of a kind component, the fields valid
// at place.
func fitPlace(cp map[string]any, place, kind string) {
	switch place {
	case "responses":
		if kind == "responses" {
			return
		}
		for k := range cp {
			if k != "description" && k != "content" && k != "headers" && k != "links" && !strings.HasPrefix(k, "x-") {
				delete(cp, k)
			}
		}
		if _, ok := cp["description"].(string); !ok {
			cp["description"] = ""
		}
	case "requestBodies":
		if kind == "requestBodies" {
			return
		}
		for k := range cp {
			if k != "description" && k != "content" && k != "required" && !strings.HasPrefix(k, "x-") {
				delete(cp, k)
			}
		}
	}
}

// resolve follows a local JSON pointer (and the references it reaches) in
// the raw document.
func (r *repair) resolve(ref string, hops int) (any, bool) {
	if hops > 16 {
		return nil, false
	}
	ptr := strings.TrimPrefix(ref, "#")
	var cur any = r.root
	if ptr != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
			switch c := cur.(type) {
			case map[string]any:
				var ok bool
				if cur, ok = c[seg]; !ok {
					return nil, false
				}
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				cur = c[i]
			default:
				return nil, false
			}
		}
	}
	if m, ok := cur.(map[string]any); ok {
		if next, ok := m["$ref"].(string); ok && strings.HasPrefix(next, "#") {
			return r.resolve(next, hops+1)
		}
	}
	return cur, cur != nil
}

// dropBroken removes what holds a reference to nothing: components (and
// the components that refer to them), then operations and path items.
func (r *repair) dropBroken() {
	r.changed = true
	badComp := map[string]bool{} // "#/components/kind/name"
	var opsHit [][]string        // paths of operations or path items
	for _, p := range r.broken {
		r.findings = append(r.findings, finding{Finding: Finding{Severity: SeverityWarning, Path: jsonPath(p),
			Message: "reference to nothing: what depends on it is left out"}})
		switch {
		case len(p) >= 3 && p[0] == "components":
			badComp["#/components/"+escapePtr(p[1])+"/"+escapePtr(p[2])] = true
		case len(p) >= 3 && p[0] == "paths" && isMethod(p[2]):
			opsHit = append(opsHit, p[:3])
		case len(p) >= 2 && p[0] == "paths":
			opsHit = append(opsHit, p[:2])
		}
	}
	// Components referring to a bad one are bad too, to a fixed point.
	comps, _ := r.root["components"].(map[string]any)
	refsOf := map[string][]string{}
	for kind, list := range comps {
		named, _ := list.(map[string]any)
		for name, c := range named {
			refsOf["#/components/"+escapePtr(kind)+"/"+escapePtr(name)] = refsIn(c)
		}
	}
	for grew := true; grew; {
		grew = false
		for id, refs := range refsOf {
			if !badComp[id] && slices.ContainsFunc(refs, func(s string) bool { return badComp[componentOf(s)] }) {
				badComp[id], grew = true, true
			}
		}
	}
	for id := range badComp {
		seg := strings.Split(strings.TrimPrefix(id, "#/components/"), "/")
		if named, ok := comps[unescapePtr(seg[0])].(map[string]any); ok {
			delete(named, unescapePtr(seg[1]))
		}
	}
	paths, _ := r.root["paths"].(map[string]any)
	for _, p := range sortedKeys(paths) {
		item, _ := paths[p].(map[string]any)
		if item == nil {
			continue
		}
		itemBad := slices.ContainsFunc(opsHit, func(h []string) bool { return len(h) == 2 && h[1] == p }) ||
			slices.ContainsFunc(refsIn(item["parameters"]), func(s string) bool { return badComp[componentOf(s)] })
		for _, m := range sortedKeys(item) {
			if !isMethod(m) {
				continue
			}
			bad := itemBad || slices.ContainsFunc(opsHit, func(h []string) bool { return len(h) == 3 && h[1] == p && h[2] == m }) ||
				slices.ContainsFunc(refsIn(item[m]), func(s string) bool { return badComp[componentOf(s)] })
			if !bad {
				continue
			}
			id := strings.ToLower(m) + " " + p
			if op, ok := item[m].(map[string]any); ok {
				if oid, ok := op["operationId"].(string); ok && oid != "" {
					id = oid
				}
			}
			delete(item, m)
			r.findings = append(r.findings, finding{left: true, Finding: Finding{Severity: SeverityWarning, Path: opPath(p, m),
				Message: fmt.Sprintf("operation %s left out: it depends on a reference to nothing", truncate(id, 120))}})
		}
	}
}

// refsIn lists the local references below v.
func refsIn(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
				out = append(out, ref)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// componentOf is the component a local reference is in ("" if none).
func componentOf(ref string) string {
	seg := strings.SplitN(strings.TrimPrefix(ref, "#/"), "/", 4)
	if len(seg) < 3 || seg[0] != "components" {
		return ""
	}
	return "#/components/" + seg[1] + "/" + seg[2]
}

func isMethod(m string) bool {
	return slices.Contains(methodOrder, strings.ToUpper(m))
}

func escapePtr(s string) string   { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
func unescapePtr(s string) string { return strings.NewReplacer("~1", "/", "~0", "~").Replace(s) }

// jsonPath writes a key list (array indices as "[i]") as a JSON path:
// $.a.b[0]['c/d'].
func jsonPath(keys []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, k := range keys {
		if strings.HasPrefix(k, "[") { // an array index
			b.WriteString(k)
		} else if identifier.MatchString(k) {
			b.WriteString("." + k)
		} else {
			b.WriteString("['" + strings.ReplaceAll(k, "'", `\'`) + "']")
		}
	}
	return b.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}
