package openapi

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboardhq/switchboard/registry"
)

// A file tree in a description: GET /folders/{id} (a container),
// GET /folders/{id}/items (its children), GET /files/{id} (a document)
// and, optionally, GET /files/{id}/content (its bytes, or a redirect to
// them). The words each segment may be, most usual first.
var (
	treeFolderWords   = []string{"folders", "directories", "dirs"}
	treeChildrenWords = []string{"items", "children", "entries", "contents", "files"}
	treeFileWords     = []string{"files", "documents", "docs"}
	treeContentWords  = []string{"content", "download", "raw", "data"}

	// Paging parameters and answer fields, most usual first.
	limitParams       = []string{"limit", "page_size", "pageSize", "per_page", "max_results", "maxResults"}
	offsetParams      = []string{"offset", "skip", "start"}
	cursorParams      = []string{"marker", "cursor", "page_token", "pageToken", "continuation_token", "after"}
	nextCursorFields  = []string{"next_marker", "next_cursor", "nextCursor", "next_page_token", "nextPageToken", "cursor"}
	totalFields       = []string{"total_count", "total", "totalCount", "total_results"}
	itemsFields       = []string{"entries", "items", "data", "value", "results", "children", "files"}
	idFields          = []string{"id"}
	nameFields        = []string{"name", "title", "filename", "file_name"}
	sizeFields        = []string{"size", "bytes", "file_size"}
	revisionFields    = []string{"etag", "revision", "version", "rev"}
	modifiedFields    = []string{"modified_at", "modifiedTime", "modified", "updated_at", "updatedAt", "last_modified"}
	typeFields        = []string{"type", "kind"}
	mimeFields        = []string{"mime_type", "mimeType", "content_type", "contentType"}
	downloadURLFields = []string{"download_url", "downloadUrl", "@microsoft.graph.downloadUrl"}
)

// rootIn finds the root container's id in a parameter description that
// names it, such as "The root folder is always represented by the ID `0`".
var rootIn = regexp.MustCompile("(?i)root[^.]*?`([^`\\s]{1,40})`")

// proposeKnowledge proposes a knowledge section (package knowledge's
// Section, as JSON) for a description whose operations hold a file tree:
// a folder's get and children list and a file's get, each GET with the
// id as their one path parameter. It returns nil when there is none, and
// the review notes of a section it proposes (what it could not tell).
func proposeKnowledge(doc *openapi3.T, title string, all []*compiledOp, oauth bool) (json.RawMessage, []string) {
	ops := map[string]*registry.Operation{} // the GETs by path
	for _, c := range all {
		if op := c.op; op != nil && op.Method == "GET" {
			ops[op.Path] = op
		}
	}
	// find returns the GET whose path is prefix + one of words (+ "/{p}"
	// when item), with one path parameter, and that parameter's name.
	find := func(prefix string, words []string, item bool) (*registry.Operation, string) {
		for _, w := range words {
			for path, op := range ops {
				rest, ok := strings.CutPrefix(path, prefix+w)
				if !ok {
					continue
				}
				p := ""
				if item {
					if !strings.HasPrefix(rest, "/{") || !strings.HasSuffix(rest, "}") || strings.Count(rest, "/") != 1 {
						continue
					}
					p = rest[2 : len(rest)-1]
				} else if rest != "" {
					continue
				}
				if pathParams(op) == 1 {
					return op, p
				}
			}
		}
		return nil, ""
	}
	for _, prefix := range treePrefixes(ops) {
		folderGet, folderParam := find(prefix, treeFolderWords, true)
		if folderGet == nil {
			continue
		}
		var list *registry.Operation
		for _, w := range treeChildrenWords {
			if op := ops[folderGet.Path+"/"+w]; op != nil && pathParams(op) == 1 {
				list = op
				break
			}
		}
		fileGet, fileParam := find(prefix, treeFileWords, true)
		if list == nil || fileGet == nil || fileGet == folderGet {
			continue
		}
		return knowledgeSection(doc, title, folderGet, folderParam, list, fileGet, fileParam, ops, oauth)
	}
	return nil, nil
}

// treePrefixes are the path prefixes a tree may sit under: "/" and every
// literal prefix of a path ("/v1/", "/drives/{drive_id}/" is left out:
// a tree is one level deep here).
func treePrefixes(ops map[string]*registry.Operation) []string {
	seen := map[string]bool{"/": true}
	out := []string{"/"}
	for path := range ops {
		segs := strings.Split(strings.Trim(path, "/"), "/")
		for i := 1; i < len(segs); i++ {
			if strings.Contains(segs[i-1], "{") {
				break
			}
			p := "/" + strings.Join(segs[:i], "/") + "/"
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out[1:])
	return out
}

func pathParams(op *registry.Operation) int {
	n := 0
	for _, p := range op.Params {
		if p.In == "path" {
			n++
		}
	}
	return n
}

func knowledgeSection(doc *openapi3.T, title string, folderGet *registry.Operation, folderParam string, list, fileGet *registry.Operation,
	fileParam string, ops map[string]*registry.Operation, oauth bool) (json.RawMessage, []string) {
	var notes []string
	opName := func(op *registry.Operation) string {
		if op.ID != "" {
			return op.ID
		}
		return op.Name
	}
	listAnswer := answerSchema(doc, list)
	items, itemSchema := "", listAnswer
	if listAnswer != nil && listAnswer.Items != nil {
		itemSchema = listAnswer.Items.Value
	} else if f, s := arrayField(listAnswer); f != "" {
		items, itemSchema = f, s
	} else {
		notes = append(notes, "knowledge: the children list's answer has no array of entries the generator could find: set levels[0].list.items")
	}
	paging := map[string]any{"style": "none"}
	limit := queryParam(list, limitParams)
	if limit != "" {
		paging["limit_parameter"] = limit
	}
	answerProps := properties(listAnswer, 3)
	switch off, cur, next := queryParam(list, offsetParams), queryParam(list, cursorParams), first(answerProps, nextCursorFields); {
	case off != "":
		paging["style"], paging["offset_parameter"] = "offset", off
		if t := first(answerProps, totalFields); t != "" {
			paging["total"] = t
		}
	case cur != "" && next != "":
		paging["style"], paging["cursor_parameter"], paging["next_cursor"] = "cursor", cur, next
	case linkHeader(doc, list):
		paging["style"] = "link"
	}
	props := properties(itemSchema, 3)
	for k, v := range properties(answerSchema(doc, fileGet), 3) {
		props[k] = v
	}
	fields := map[string]any{}
	for key, names := range map[string][]string{"id": idFields, "name": nameFields, "size": sizeFields, "revision": revisionFields,
		"modified": modifiedFields, "type": typeFields, "mime_type": mimeFields} {
		if f := first(props, names); f != "" {
			fields[key] = f
		}
	}
	if fields["type"] == nil {
		notes = append(notes, "knowledge: the entries have no type field: every listed entry is taken for a file; set fields.type and each level's match")
	}
	file := map[string]any{"name": "file", "kind": "file", "get": map[string]any{"operation": opName(fileGet), "id_parameter": fileParam}}
	if f := first(props, downloadURLFields); f != "" {
		file["fields"] = map[string]any{"download_url": f}
	}
	for _, w := range treeContentWords {
		if op := ops[fileGet.Path+"/"+w]; op != nil && pathParams(op) == 1 {
			d := map[string]any{"operation": opName(op), "id_parameter": fileParam}
			if redirects(doc, op) {
				d["url"] = "header:Location"
			}
			file["download"] = d
			break
		}
	}
	access := "perimeter-only"
	if oauth {
		access = "per-reader"
	}
	sec := map[string]any{
		"provider":        title,
		"resource_access": access,
		"fields":          fields,
		"levels": []any{
			map[string]any{"name": "folder", "kind": "folder",
				"list": map[string]any{"operation": opName(list), "parent_parameter": folderParam, "items": items, "paging": paging},
				"get":  map[string]any{"operation": opName(folderGet), "id_parameter": folderParam}},
			file,
		},
	}
	if root := rootOf(doc, folderGet, folderParam); root != "" {
		sec["root"] = root
	} else {
		notes = append(notes, "knowledge: set root to the id of the top folder (the description does not name it)")
	}
	b, _ := json.Marshal(sec)
	return b, notes
}

// answerSchema is the JSON schema of op's successful answer, or nil.
func answerSchema(doc *openapi3.T, op *registry.Operation) *openapi3.Schema {
	o := docOp(doc, op)
	if o == nil || o.Responses == nil {
		return nil
	}
	for _, code := range []string{"200", "201", "203", "2XX", "default"} {
		r := o.Responses.Value(code)
		if r == nil || r.Value == nil {
			continue
		}
		for ct, mt := range r.Value.Content {
			if strings.Contains(ct, "json") && mt.Schema != nil {
				return mt.Schema.Value
			}
		}
	}
	return nil
}

func docOp(doc *openapi3.T, op *registry.Operation) *openapi3.Operation {
	if doc == nil || doc.Paths == nil {
		return nil
	}
	item := doc.Paths.Value(op.Path)
	if item == nil {
		return nil
	}
	return item.GetOperation(op.Method)
}

// linkHeader reports whether op's answer declares a Link header.
func linkHeader(doc *openapi3.T, op *registry.Operation) bool {
	o := docOp(doc, op)
	if o == nil || o.Responses == nil {
		return false
	}
	for _, r := range o.Responses.Map() {
		if r.Value == nil {
			continue
		}
		for h := range r.Value.Headers {
			if strings.EqualFold(h, "Link") {
				return true
			}
		}
	}
	return false
}

// redirects reports whether op answers with a redirect (its bytes
// elsewhere, behind a short-lived URL).
func redirects(doc *openapi3.T, op *registry.Operation) bool {
	o := docOp(doc, op)
	if o == nil || o.Responses == nil {
		return false
	}
	for _, code := range []string{"302", "303", "307"} {
		if o.Responses.Value(code) != nil {
			return true
		}
	}
	return false
}

// properties collects the property names of s, through allOf, oneOf and
// anyOf, depth levels deep.
func properties(s *openapi3.Schema, depth int) map[string]*openapi3.Schema {
	out := map[string]*openapi3.Schema{}
	if s == nil || depth == 0 {
		return out
	}
	for k, v := range s.Properties {
		if v != nil {
			out[k] = v.Value
		}
	}
	for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range refs {
			if r == nil {
				continue
			}
			for k, v := range properties(r.Value, depth-1) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// arrayField is the field of an answer holding its entries: the first of
// itemsFields that is an array, else its only array property.
func arrayField(s *openapi3.Schema) (string, *openapi3.Schema) {
	props := properties(s, 3)
	isArray := func(p *openapi3.Schema) bool {
		return p != nil && p.Type != nil && p.Type.Is("array") && p.Items != nil
	}
	for _, f := range itemsFields {
		if p := props[f]; isArray(p) {
			return f, p.Items.Value
		}
	}
	var found []string
	for k, p := range props {
		if isArray(p) {
			found = append(found, k)
		}
	}
	if len(found) == 1 {
		return found[0], props[found[0]].Items.Value
	}
	return "", nil
}

func first(props map[string]*openapi3.Schema, names []string) string {
	for _, n := range names {
		if _, ok := props[n]; ok {
			return n
		}
	}
	return ""
}

// queryParam is the first of names that op takes in its query.
func queryParam(op *registry.Operation, names []string) string {
	for _, n := range names {
		for _, p := range op.Params {
			if p.In == "query" && p.Name == n {
				return n
			}
		}
	}
	return ""
}

// rootOf is the root folder's id when the folder id parameter's
// description names it.
func rootOf(doc *openapi3.T, op *registry.Operation, param string) string {
	o := docOp(doc, op)
	if o == nil {
		return ""
	}
	item := doc.Paths.Value(op.Path)
	params := append(slices.Clone(o.Parameters), item.Parameters...)
	for _, p := range params {
		if p == nil || p.Value == nil || p.Value.Name != param {
			continue
		}
		if m := rootIn.FindStringSubmatch(p.Value.Description); m != nil {
			return m[1]
		}
	}
	return ""
}
