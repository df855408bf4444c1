package openapi

import (
	"bytes"
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
	"go.yaml.in/yaml/v4"

	switchboard "github.com/switchboardhq/switchboard"
)

// swagger2 finds a Swagger 2.0 version key anywhere in the document (Slack
// writes it last).
var swagger2 = regexp.MustCompile(`(?m)(?:^|[\s{,])["']?swagger["']?\s*:\s*["']?2\.`)

// refValue finds the values of $ref keys in JSON or YAML text.
var refValue = regexp.MustCompile(`["']?\$ref["']?\s*:\s*["']?([^"'\s,}\]]+)`)

// maxNamed bounds how many offending names an error lists.
const maxNamed = 5

func invalidOpenAPI(err error) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_openapi", "the OpenAPI description cannot be loaded: %s", truncate(err.Error(), 300)).WithCause(err)
}

// load parses an OpenAPI 3.0 or 3.1 description, or a Swagger 2.0 one
// (normalised, then converted to 3.0), in JSON or YAML. External
// references are refused with an error naming them: a connector package is
// compiled from its bytes alone.
//
// A description kin-openapi refuses is loaded again after repairRefs,
// whose findings are returned.
func load(spec []byte) (*openapi3.T, []finding, error) {
	if len(bytes.TrimSpace(spec)) == 0 {
		return nil, nil, invalidOpenAPI(errors.New("the description is empty"))
	}
	if ext := externalRefs(spec); len(ext) > 0 {
		more := ""
		if len(ext) > maxNamed {
			more = fmt.Sprintf(" and %d more", len(ext)-maxNamed)
			ext = ext[:maxNamed]
		}
		return nil, nil, switchboard.E(switchboard.ErrInvalid, "external_reference",
			"the OpenAPI description refers to other documents, which a connector package cannot follow: %s%s; connector generate --spec on the root file bundles local files into one",
			strings.Join(ext, ", "), more)
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	loader.Context = context.Background()
	if swagger2.Match(spec) && !bytes.Contains(spec[:min(len(spec), 4096)], []byte("openapi")) {
		doc, err := loadSwagger2(spec, loader)
		return doc, nil, err
	}
	doc, err := loader.LoadFromData(spec)
	var repairs []finding
	if err != nil {
		fixed, found, rerr := repairRefs(spec)
		if rerr != nil || found == nil {
			return nil, nil, invalidOpenAPI(err)
		}
		loader = openapi3.NewLoader()
		loader.IsExternalRefsAllowed = false
		loader.Context = context.Background()
		if doc, err = loader.LoadFromData(fixed); err != nil {
			return nil, nil, invalidOpenAPI(err)
		}
		repairs = found
	}
	if doc.OpenAPI == "" {
		return nil, nil, invalidOpenAPI(errors.New("no openapi version"))
	}
	return doc, repairs, nil
}

// externalRefs lists, sorted and once each, the $ref values that point
// outside the document.
func externalRefs(spec []byte) []string {
	seen := map[string]bool{}
	for _, m := range refValue.FindAllSubmatchIndex(spec, -1) {
		v := string(spec[m[2]:m[3]])
		if strings.HasPrefix(v, ">") || strings.HasPrefix(v, "|") {
			// A YAML block scalar: the value is on the next line.
			rest := spec[m[3]:]
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				rest = rest[i+1:]
			}
			line, _, _ := bytes.Cut(rest, []byte("\n"))
			v = strings.Trim(strings.TrimSpace(string(line)), `"'`)
		}
		if v == "" || strings.HasPrefix(v, "#") || seen[v] {
			continue
		}
		seen[v] = true
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, fmt.Sprintf("%q", truncate(v, 120)))
	}
	slices.Sort(out)
	return out
}

// loadSwagger2 normalises what kin-openapi's 2.0 model rejects and
// converts the result to OpenAPI 3.0.
func loadSwagger2(spec []byte, loader *openapi3.Loader) (*openapi3.T, error) {
	var v any
	if err := yaml.Unmarshal(spec, &v); err != nil { // YAML is a superset of JSON
		return nil, invalidOpenAPI(err)
	}
	v = normaliseSwagger2(stringKeys(v))
	js, err := json.Marshal(v)
	if err != nil {
		return nil, invalidOpenAPI(err)
	}
	var d2 openapi2.T
	if err := json.Unmarshal(js, &d2); err != nil {
		return nil, invalidOpenAPI(err)
	}
	doc, err := openapi2conv.ToV3WithLoader(&d2, loader, nil)
	if err != nil {
		return nil, invalidOpenAPI(err)
	}
	return doc, nil
}

// stringKeys turns YAML's map[any]any into map[string]any and leaves
// scalars as they are (dates stay the strings they were written as, since
// the YAML decoder keeps unquoted timestamps as strings in an any).
func stringKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
	}
	return v
}

// normaliseSwagger2 rewrites, in place, the constructs Swagger 2.0
// forbids but vendors write: a "type" that is a list (["string", "null"])
// becomes the one non-null type plus x-nullable, or no type when several
// remain; "items" that is a list (draft-4 tuples, [X, {"type": "null"}])
// becomes its one non-null schema, or any.
func normaliseSwagger2(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if list, ok := x["type"].([]any); ok {
			var types []string
			nullable := false
			for _, t := range list {
				s, _ := t.(string)
				if s == "null" {
					nullable = true
				} else if s != "" && !slices.Contains(types, s) {
					types = append(types, s)
				}
			}
			delete(x, "type")
			if len(types) == 1 {
				x["type"] = types[0]
			}
			if nullable {
				x["x-nullable"] = true
			}
		}
		if list, ok := x["items"].([]any); ok {
			// Draft-4 tuple items: keep the one non-null schema, else any.
			var kept []any
			for _, it := range list {
				if m, ok := it.(map[string]any); ok && !(len(m) == 1 && m["type"] == "null") {
					kept = append(kept, m)
				}
			}
			if len(kept) == 1 {
				x["items"] = kept[0]
			} else {
				x["items"] = map[string]any{}
			}
		}
		for _, e := range x {
			normaliseSwagger2(e)
		}
	case []any:
		for _, e := range x {
			normaliseSwagger2(e)
		}
	}
	return v
}
