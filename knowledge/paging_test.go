package knowledge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// docsDescription describes a small document store: folders with their
// children (paged by offset and limit, or by an opaque "after" key handed
// out in a Link header), a folder, a file and a file's text.
const docsDescription = `{
  "openapi": "3.0.3",
  "info": {"title": "Docs", "version": "1"},
  "servers": [{"url": "http://127.0.0.1/"}],
  "paths": {
    "/folders/{folder_id}/children": {"get": {
      "operationId": "list_children",
      "parameters": [
        {"name": "folder_id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "after", "in": "query", "schema": {"type": "string"}}
      ],
      "responses": {"200": {"description": "children", "content": {"application/json": {"schema": {"type": "object"}}}}}
    }},
    "/folders/{folder_id}": {"get": {
      "operationId": "get_folder",
      "parameters": [{"name": "folder_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "a folder", "content": {"application/json": {"schema": {"type": "object"}}}}}
    }},
    "/files/{file_id}": {"get": {
      "operationId": "get_file",
      "parameters": [{"name": "file_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "a file", "content": {"application/json": {"schema": {"type": "object"}}}}}
    }},
    "/files/{file_id}/text": {"get": {
      "operationId": "get_file_text",
      "parameters": [{"name": "file_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "the text", "content": {"text/plain": {"schema": {"type": "string"}}}}}
    }}
  }
}`

// docsCatalog is a catalog with the docs connector whose folder level
// pages in the style given (with the paging object given).
func docsCatalog(t *testing.T, paging string) *registry.Catalog {
	t.Helper()
	manifest := `{"id": "docs", "name": "Docs", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization", "format": "Bearer {SECRET:DOCS_TOKEN}", "field": "DOCS_TOKEN"},
  "docs": {"llm_short_description": "Folders and files."},
  "env": [{"name": "DOCS_TOKEN", "label": "Token", "required": true, "secret": true},
          {"name": "DOCS_URL", "label": "API URL", "required": true}],
  "openapi": "openapi.json", "mapping": "mapping.json", "base_url": "{ENV:DOCS_URL}"}`
	mapping := `{
  "entities": {
    "folders": {"description": "Folders.", "actions": {"get": "get_folder", "children": "list_children"}},
    "files": {"description": "Files.", "actions": {"get": "get_file", "text": "get_file_text"}}
  },
  "knowledge": {
    "provider": "Docs", "resource_access": "perimeter-only", "root": "root",
    "page_size": {"default": 100, "maximum": 1000},
    "fields": {"revision": "rev", "type": "kind"},
    "levels": [
      {"name": "folder", "kind": "folder",
       "list": {"operation": "list_children", "parent_parameter": "folder_id", "items": "items", "paging": ` + paging + `},
       "get": {"operation": "get_folder", "id_parameter": "folder_id"}},
      {"name": "file", "kind": "file",
       "get": {"operation": "get_file", "id_parameter": "file_id"},
       "download": {"operation": "get_file_text", "id_parameter": "file_id"}}
    ]
  }
}`
	return registrytest.Load(t, map[string]string{
		"docs/connector.json": manifest, "docs/mapping.json": mapping, "docs/openapi.json": docsDescription,
	})
}

const docsToken = "docs-token-0001"

// docsServer is the store on loopback. Folder "root" holds folder
// "small" (5 files) and a file; folder "archive" (outside the tree, listed
// by its URI) holds docsBig files, made up per page: never held whole. Children page by offset and limit (with a
// total, except in "small", where a short page ends the listing), or,
// with link set, by an opaque "after" key in a Link rel="next" header.
type docsServer struct {
	*httptest.Server
	link bool

	mu       sync.Mutex
	lists    int
	maxLimit int
	asked    []string // folder ids listed
}

const docsBig = 10_000

func newDocsServer(t *testing.T, link bool) *docsServer {
	t.Helper()
	d := &docsServer{link: link}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

func docsFile(folder string, i int) map[string]any {
	id := fmt.Sprintf("%s-%05d", folder, i)
	return map[string]any{"kind": "file", "id": id, "name": id + ".txt", "rev": "r1", "size": 4}
}

func (d *docsServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+docsToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(parts) == 3 && parts[0] == "folders" && parts[2] == "children":
		q := r.URL.Query()
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > 1000 {
			http.Error(w, `{"message":"limit must be 1-1000"}`, http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.lists++
		d.maxLimit = max(d.maxLimit, limit)
		d.asked = append(d.asked, parts[1])
		d.mu.Unlock()
		start := 0
		if d.link {
			if a := q.Get("after"); a != "" {
				n, err := strconv.Atoi(strings.TrimPrefix(a, "k"))
				if err != nil {
					http.Error(w, `{"message":"bad after"}`, http.StatusBadRequest)
					return
				}
				start = n + 1
			}
		} else {
			start, _ = strconv.Atoi(q.Get("offset"))
		}
		var total int
		var items []map[string]any
		switch parts[1] {
		case "root":
			all := []map[string]any{{"kind": "folder", "id": "small", "name": "Small"}, docsFile("root", 0)}
			total = len(all)
			items = all[min(start, total):min(start+limit, total)]
		case "archive", "small":
			total = docsBig
			if parts[1] == "small" {
				total = 5
			}
			for i := start; i < min(start+limit, total); i++ {
				items = append(items, docsFile(parts[1], i))
			}
		default:
			w.WriteHeader(http.StatusNotFound)
			return
		}
		out := map[string]any{"items": items}
		if parts[1] != "small" {
			out["total"] = total
		}
		if d.link && start+len(items) < total {
			// The next page's URL, with a key of the last item and a
			// parameter the operation does not declare.
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?limit=%d&after=k%d&trace=abc>; rel="next", <%s%s>; rel="first"`,
				d.URL, r.URL.Path, limit, start+len(items)-1, d.URL, r.URL.Path))
		}
		json.NewEncoder(w).Encode(out)
	case len(parts) == 2 && parts[0] == "folders":
		json.NewEncoder(w).Encode(map[string]any{"kind": "folder", "id": parts[1], "name": parts[1]})
	case len(parts) == 2 && parts[0] == "files":
		json.NewEncoder(w).Encode(map[string]any{"kind": "file", "id": parts[1], "name": parts[1] + ".txt", "rev": "r1", "size": 4})
	case len(parts) == 3 && parts[0] == "files" && (parts[2] == "text" || parts[2] == "content"):
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "text")
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestPagingStyles: the offset and link-header paging styles of the
// mapping, each against a loopback store that pages that way, through
// server.New and the official SDK client. The sync client walks the whole
// tree: every file once, none twice. The 10,000-file folder is listed in
// pages of at most the profile's maximum, one upstream request of that
// size per page, the store making each page up as it is asked (nothing
// holds the folder whole). Offset: a short page ends a listing whose
// answers give no total. Link: the next page is the Link header's
// rel="next" URL, whose undeclared parameters are dropped, and a forged
// cursor cannot move the listing to another folder.
func TestPagingStyles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		style, paging string
		link          bool
	}{
		{"offset", `{"style": "offset", "limit_parameter": "limit", "offset_parameter": "offset", "total": "total"}`, false},
		{"link", `{"style": "link", "limit_parameter": "limit"}`, true},
	} {
		t.Run(tc.style, func(t *testing.T) {
			t.Parallel()
			db := dbtest.SQLite(t)
			e := start(t, db, docsCatalog(t, tc.paging))
			store := newDocsServer(t, tc.link)
			e.api(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/docs", map[string]any{
				"connector_id": "docs", "auth_mode": "apiKey", "agents": []string{"bot"},
				"fields": map[string]any{"DOCS_TOKEN": docsToken, "DOCS_URL": store.URL},
			})
			cs := e.session("docs", headers{"Authorization": "Bearer " + e.caller("kb-sync", "knowledge-sync", true, nil)})
			ctx := context.Background()

			// The small folder, two a page: 2, 2, 1.
			var sizes []int
			for cursor := ""; ; {
				res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor, Meta: mcp.Meta{"parentUri": "docs://folder/small", "pageSize": 2}})
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(res.Resources))
				if cursor = res.NextCursor; cursor == "" {
					break
				}
			}
			if fmt.Sprint(sizes) != "[2 2 1]" {
				t.Errorf("the small folder's pages = %v, want [2 2 1]", sizes)
			}

			// The big folder at the maximum page size.
			store.mu.Lock()
			store.lists, store.maxLimit = 0, 0
			store.mu.Unlock()
			seen := map[string]bool{}
			pages := 0
			for cursor := ""; ; {
				res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor, Meta: mcp.Meta{"parentUri": "docs://folder/archive", "pageSize": 5000}})
				if err != nil {
					t.Fatalf("page %d: %v", pages+1, err)
				}
				pages++
				for _, r := range res.Resources {
					if seen[r.URI] {
						t.Fatalf("%s listed twice", r.URI)
					}
					seen[r.URI] = true
				}
				if cursor = res.NextCursor; cursor == "" {
					break
				}
			}
			store.mu.Lock()
			lists, maxLimit := store.lists, store.maxLimit
			store.mu.Unlock()
			if len(seen) != docsBig || pages != 10 || lists != 10 || maxLimit != 1000 {
				t.Errorf("the archive: %d files in %d pages, %d upstream requests, largest %d; want %d in 10, 10, 1000",
					len(seen), pages, lists, maxLimit, docsBig)
			}

			// The whole tree, as a sync client walks it, two a page: every
			// file read once.
			s := newSyncer(cs, nil)
			s.pageSz = 2
			if reads, _ := s.run(t); reads != 6 {
				t.Errorf("the sync read %d documents, want 6", reads)
			}
			if s.docs["docs://file/small-00004"] != "text" {
				t.Errorf("small-00004 = %q", s.docs["docs://file/small-00004"])
			}

			if tc.link {
				// A cursor whose upstream part names another folder
				// still lists its own.
				forged, _ := json.Marshal(map[string]any{"v": 1, "p": "docs://folder/small", "c": "folder_id=archive&limit=2", "n": 2})
				store.mu.Lock()
				store.asked = nil
				store.mu.Unlock()
				res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: base64.RawURLEncoding.EncodeToString(forged)})
				store.mu.Lock()
				asked := store.asked
				store.mu.Unlock()
				if err != nil || len(asked) != 1 || asked[0] != "small" || len(res.Resources) != 2 ||
					!strings.HasPrefix(res.Resources[0].URI, "docs://file/small-") {
					t.Errorf("a forged cursor listed %v: %+v, %v", asked, res, err)
				}
			}
		})
	}
}
