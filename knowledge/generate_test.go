package knowledge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/knowledge"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// treeDescription describes the docs store of paging_test.go with its
// answers' schemas, a bearer token and the root folder named, as a vendor
// would: what the generator reads a file tree from.
const treeDescription = `{
  "openapi": "3.0.3",
  "info": {"title": "Tree Docs", "version": "1"},
  "servers": [{"url": "http://127.0.0.1/"}],
  "security": [{"token": []}],
  "components": {
    "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    "schemas": {
      "Entry": {"type": "object", "properties": {
        "kind": {"type": "string", "enum": ["folder", "file"]}, "id": {"type": "string"}, "name": {"type": "string"},
        "size": {"type": "integer"}, "rev": {"type": "string"}}}
    }
  },
  "paths": {
    "/folders/{folder_id}/children": {"get": {
      "operationId": "list_children", "summary": "List a folder's children",
      "parameters": [
        {"name": "folder_id", "in": "path", "required": true, "description": "The folder. The root folder's id is ` + "`root`" + `.", "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}}
      ],
      "responses": {"200": {"description": "children", "content": {"application/json": {"schema": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Entry"}}, "total": {"type": "integer"}}}}}}}
    }},
    "/folders/{folder_id}": {"get": {
      "operationId": "get_folder", "summary": "Get a folder",
      "parameters": [{"name": "folder_id", "in": "path", "required": true, "description": "The folder. The root folder's id is ` + "`root`" + `.", "schema": {"type": "string"}}],
      "responses": {"200": {"description": "a folder", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Entry"}}}}}
    }},
    "/files/{file_id}": {"get": {
      "operationId": "get_file", "summary": "Get a file",
      "parameters": [{"name": "file_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "a file", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Entry"}}}}}
    }},
    "/files/{file_id}/content": {"get": {
      "operationId": "get_file_content", "summary": "Get a file's text",
      "parameters": [{"name": "file_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "the text", "content": {"text/plain": {"schema": {"type": "string"}}}}}
    }}
  }
}`

// generated generates a package from a description, loads it as a
// catalog (the files as written) and returns its knowledge section's
// JSON, the connector and its knowledge source (nil without a section).
func generated(t *testing.T, spec []byte) (json.RawMessage, *registry.Catalog, *registry.Connector, *knowledge.Source) {
	t.Helper()
	pkg, err := openapi.Generate(spec, nil, openapi.GenerateOptions{SpecName: "openapi.json"})
	if err != nil {
		t.Fatal(err)
	}
	var man registry.Manifest
	if err := json.Unmarshal(pkg.Files[openapi.ManifestFile], &man); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, b := range pkg.Files {
		files[man.ID+"/"+name] = string(b)
	}
	cat := registrytest.Load(t, files)
	conn, ok := cat.Connector(man.ID)
	if !ok {
		t.Fatalf("the generated connector %s is not in its catalog", man.ID)
	}
	sec, err := knowledge.SectionOf(pkg.Files[openapi.MappingFile])
	if err != nil {
		t.Fatal(err)
	}
	src, err := knowledge.Of(conn)
	if err != nil {
		t.Fatalf("the proposed section does not bind: %v\n%s", err, sec)
	}
	return sec, cat, conn, src
}

// TestGeneratorProposesKnowledge: the generator recognises a file tree
// (folders, their children, files, their content) in a description and
// proposes a knowledge section that binds to the generated registry.
// Box's own description (box.json): folders/{id}/items with offset
// paging and a total, entries, fields through the item schemas' oneOf,
// the content's 302 as the download URL, the root named in the folder
// id's description, per-reader (Box has OAuth). A synthetic description
// is then generated, served and synced end to end against the loopback
// store of paging_test.go. A description without a file tree gets none.
func TestGeneratorProposesKnowledge(t *testing.T) {
	t.Parallel()
	t.Run("box", func(t *testing.T) {
		spec := specstest.Read(t, "box.json")
		sec, _, _, src := generated(t, spec)
		if src == nil {
			t.Fatal("no knowledge section proposed for Box")
		}
		var got knowledge.Section
		if err := json.Unmarshal(sec, &got); err != nil {
			t.Fatal(err)
		}
		folder, file := got.Levels[0], got.Levels[1]
		if got.Root != "0" || got.ResourceAccess != knowledge.PerReader || len(got.Levels) != 2 ||
			folder.Kind != "folder" || folder.List.Operation != "get_folders_id_items" || folder.List.ParentParameter != "folder_id" ||
			folder.List.Items != "entries" || folder.List.Paging != (knowledge.Paging{Style: "offset", LimitParameter: "limit", OffsetParameter: "offset", Total: "total_count"}) ||
			folder.Get.Operation != "get_folders_id" || file.Get.Operation != "get_files_id" || file.Get.IDParameter != "file_id" ||
			file.Download == nil || file.Download.Operation != "get_files_id_content" || file.Download.URL != "header:Location" ||
			got.Fields.Type != "type" || got.Fields.Revision != "etag" || got.Fields.Size != "size" {
			t.Errorf("Box's proposed section = %s", sec)
		}
	})

	t.Run("synthetic", func(t *testing.T) {
		_, cat, conn, src := generated(t, []byte(treeDescription))
		if src == nil || src.Root != "root" || src.ResourceAccess != knowledge.PerimeterOnly {
			t.Fatalf("the synthetic tree: %+v", src)
		}
		e := start(t, dbtest.SQLite(t), cat)
		store := newDocsServer(t, false)
		fields := map[string]any{}
		for _, f := range conn.Manifest.Env {
			switch {
			case f.Secret:
				fields[f.Name] = docsToken
			case strings.Contains(strings.ToUpper(f.Name), "URL"):
				fields[f.Name] = store.URL
			}
		}
		e.api(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/docs", map[string]any{
			"connector_id": conn.Manifest.ID, "auth_mode": conn.Manifest.Auth.Modes[0], "agents": []string{"bot"}, "fields": fields,
		})
		cs := e.session("docs", headers{"Authorization": "Bearer " + e.caller("kb-sync", "knowledge-sync", true, nil)})
		s := newSyncer(cs, nil)
		s.pageSz = 2
		if reads, _ := s.run(t); reads != 6 || s.docs["tree-docs://file/small-00004"] != "text" {
			t.Errorf("the sync of the generated connector read %d documents: %v", reads, keys(s.docs))
		}
	})

	t.Run("no tree", func(t *testing.T) {
		for name, spec := range map[string]string{
			"crm": `{"openapi": "3.0.3", "info": {"title": "CRM", "version": "1"}, "paths": {
			  "/contacts": {"get": {"operationId": "list_contacts", "responses": {"200": {"description": "ok"}}}},
			  "/contacts/{id}": {"get": {"operationId": "get_contact", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}}}}`,
			// Folders and files, but no way to list a folder.
			"no children": `{"openapi": "3.0.3", "info": {"title": "Half", "version": "1"}, "paths": {
			  "/folders/{id}": {"get": {"operationId": "get_folder", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}},
			  "/files/{id}": {"get": {"operationId": "get_file", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}}}}`,
		} {
			if sec, _, _, src := generated(t, []byte(spec)); sec != nil || src != nil {
				t.Errorf("%s: a knowledge section was proposed: %s", name, sec)
			}
		}
	})
}
