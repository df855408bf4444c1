package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

// boxCatalog is the Box knowledge connector: its manifest and mapping
// from testdata, its description the shared box.json, read here (never
// copied into the repository).
func boxCatalog(t *testing.T) *registry.Catalog {
	t.Helper()
	spec := specstest.Read(t, "box.json")
	files := map[string]string{"box/openapi.json": string(spec)}
	for _, f := range []string{"connector.json", "mapping.json"} {
		b, err := os.ReadFile("testdata/box/" + f)
		if err != nil {
			t.Fatal(err)
		}
		files["box/"+f] = string(b)
	}
	return registrytest.Load(t, files)
}

const (
	boxToken  = "box-service-token-0001"
	bigFolder = "900"
	bigCount  = 10_000
)

type boxItem struct {
	typ, id, name, parent string
	etag                  int
	content               string
}

// boxMock is a stateful Box API on loopback, answering the operations the
// mapping names as box.json describes them: folder items with marker
// paging (usemarker, marker, limit ≤ 1000, next_marker), a folder, a file,
// and a file's content as a 302 to a short-lived download URL. Folder
// bigFolder holds bigCount files made up per page, never held whole.
// Files listed in forbidden answer 403.
type boxMock struct {
	*httptest.Server
	mu        sync.Mutex
	items     map[string]*boxItem
	order     []string
	forbidden map[string]bool
	// revoked: every request is 401, as when the token is revoked.
	revoked   bool
	maxLimit  int
	requests  int
	listCalls int
	contents  int
}

func newBoxMock(t *testing.T) *boxMock {
	t.Helper()
	b := &boxMock{items: map[string]*boxItem{}, forbidden: map[string]bool{}}
	add := func(typ, id, name, parent, content string) {
		b.items[id] = &boxItem{typ: typ, id: id, name: name, parent: parent, etag: 1, content: content}
		b.order = append(b.order, id)
	}
	add("folder", "0", "All Files", "", "")
	add("folder", "100", "Policies", "0", "")
	add("file", "1001", "handbook.pdf", "0", "%PDF handbook")
	add("file", "1002", "travel.docx", "100", "travel policy")
	add("file", "1003", "payroll.xlsx", "100", "payroll")
	b.forbidden["1003"] = true
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

// count is the number of authorized requests Box received.
func (b *boxMock) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

func (b *boxMock) obj(it *boxItem) map[string]any {
	o := map[string]any{"type": it.typ, "id": it.id, "name": it.name, "etag": strconv.Itoa(it.etag),
		"modified_at": "2026-01-02T03:04:05Z"}
	if it.typ == "file" {
		o["size"] = len(it.content)
	}
	return o
}

func bigItem(i int) map[string]any {
	id := fmt.Sprintf("9%06d", i)
	return map[string]any{"type": "file", "id": id, "name": "doc-" + id + ".txt", "etag": "1", "size": 10}
}

func (b *boxMock) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+boxToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	if b.revoked {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/2.0/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(parts) == 3 && parts[0] == "folders" && parts[2] == "items":
		b.listCalls++
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit > b.maxLimit {
			b.maxLimit = limit
		}
		if limit < 1 || limit > 1000 || q.Get("usemarker") != "true" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","code":"bad_request","message":"limit must be 1-1000 with usemarker"}`)
			return
		}
		start, _ := strconv.Atoi(q.Get("marker"))
		var entries []map[string]any
		total := 0
		if parts[1] == bigFolder {
			total = bigCount
			for i := start; i < min(start+limit, bigCount); i++ {
				entries = append(entries, bigItem(i))
			}
		} else {
			var kids []*boxItem
			for _, id := range b.order {
				if it := b.items[id]; it.parent == parts[1] {
					kids = append(kids, it)
				}
			}
			if _, ok := b.items[parts[1]]; !ok {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			total = len(kids)
			for i := start; i < min(start+limit, len(kids)); i++ {
				entries = append(entries, b.obj(kids[i]))
			}
		}
		out := map[string]any{"entries": entries, "limit": limit}
		if start+limit < total {
			out["next_marker"] = strconv.Itoa(start + limit)
		}
		json.NewEncoder(w).Encode(out)
	case len(parts) == 2 && (parts[0] == "folders" || parts[0] == "files"):
		it, ok := b.items[parts[1]]
		if !ok && strings.HasPrefix(parts[1], "9") && len(parts[1]) == 7 {
			n, _ := strconv.Atoi(parts[1][1:])
			json.NewEncoder(w).Encode(bigItem(n))
			return
		}
		if !ok || it.typ != strings.TrimSuffix(parts[0], "s") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if b.forbidden[it.id] {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		json.NewEncoder(w).Encode(b.obj(it))
	case len(parts) == 3 && parts[0] == "files" && parts[2] == "content":
		b.contents++
		if b.forbidden[parts[1]] {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Location", b.URL+"/dl/"+parts[1]+"?expires=60")
		w.WriteHeader(http.StatusFound)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func startBox(t *testing.T, db *database.DB) (*env, *boxMock, *mcp.ClientSession) {
	t.Helper()
	e, box, sync := startBoxToken(t, db, false)
	return e, box, e.session("box", headers{"Authorization": "Bearer " + sync})
}

func startBoxToken(t *testing.T, db *database.DB, big bool) (*env, *boxMock, string) {
	t.Helper()
	e := start(t, db, boxCatalog(t))
	box := newBoxMock(t)
	if big {
		box.items[bigFolder] = &boxItem{typ: "folder", id: bigFolder, name: "Archive", parent: "0"}
		box.order = append(box.order, bigFolder)
	}
	e.api(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/box", map[string]any{
		"connector_id": "box", "auth_mode": "accessToken", "agents": []string{"bot"},
		"fields": map[string]any{"BOX_TOKEN": boxToken, "BOX_API_URL": box.URL + "/2.0"},
	})
	return e, box, e.caller("kb-sync", "knowledge-sync", true, nil)
}

// TestBoxKnowledgeSync: the sync client walks the Box connector (built
// from the shared box.json) against the stateful mock, with the
// instance's credential (perimeter-only, a trusted knowledge-sync caller
// naming nobody): documents are handed out as short-lived download URLs
// (the 302's Location), never inlined; a second run reads nothing; a
// file whose etag changed is read again.
func TestBoxKnowledgeSync(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		_, box, cs := startBox(t, db)
		s := newSyncer(cs, nil)
		s.pageSz = 1 // one entry a page: the cursor is followed

		reads, pages := s.run(t)
		if want := 2; reads != want {
			t.Fatalf("first run read %d documents, want %d (payroll refused)", reads, want)
		}
		if s.docs["box://file/1001"] != "url:"+box.URL+"/dl/1001?expires=60" {
			t.Errorf("handbook = %q, want its download URL", s.docs["box://file/1001"])
		}
		if len(s.refused) != 1 || s.refused[0] != "box://file/1003" {
			t.Errorf("refused = %v, want payroll only", s.refused)
		}
		// root: Policies, handbook and an empty last page; Policies:
		// travel, payroll and an empty last page.
		if pages < 4 || box.maxLimit != 1 {
			t.Errorf("pages = %d, largest upstream page = %d; want one entry a page", pages, box.maxLimit)
		}

		box.mu.Lock()
		contents := box.contents
		box.mu.Unlock()
		if reads, _ := s.run(t); reads != 0 {
			t.Fatalf("second run read %d documents, want 0", reads)
		}
		box.mu.Lock()
		box.items["1002"].etag++
		again := box.contents - contents
		box.mu.Unlock()
		if again != 0 {
			t.Fatalf("the second run asked for %d contents", again)
		}
		if reads, _ := s.run(t); reads != 1 {
			t.Fatalf("after travel.docx changed: read %d documents, want 1", reads)
		}
	})
}

// TestPagingBounds: resources/list clamps the page size to the profile's
// bounds on both sides; a 10,000-file folder is walked in pages of at
// most the maximum, each one upstream request for that page only (the
// mock makes the files up per page: nothing holds the whole folder); the
// cursor pages on any replica (it carries the whole position), and a
// cursor of another listing or a forged one is refused.
func TestPagingBounds(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	e, box, token := startBoxToken(t, db, true)
	cs := e.session("box", headers{"Authorization": "Bearer " + token})
	ctx := context.Background()
	archive := "box://folder/" + bigFolder
	list := func(meta mcp.Meta, cursor string) (*mcp.ListResourcesResult, error) {
		return cs.ListResources(ctx, &mcp.ListResourcesParams{Meta: meta, Cursor: cursor})
	}
	for _, tc := range []struct {
		size any
		want int
	}{{nil, 100}, {0, 1}, {-7, 1}, {3, 3}, {1000, 1000}, {1001, 1000}, {1e9, 1000}} {
		meta := mcp.Meta{"parentUri": archive}
		if tc.size != nil {
			meta["pageSize"] = tc.size
		}
		res, err := list(meta, "")
		if err != nil || len(res.Resources) != tc.want || res.NextCursor == "" {
			t.Errorf("pageSize %v: %d entries, %v; want %d and a cursor", tc.size, len(res.Resources), err, tc.want)
		}
	}
	if box.maxLimit > 1000 {
		t.Errorf("the upstream was asked for %d items at once", box.maxLimit)
	}

	seen := map[string]bool{}
	pages, calls := 0, box.listCalls
	for cursor := ""; ; {
		res, err := list(mcp.Meta{"parentUri": archive, "pageSize": 5000}, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Resources) > 1000 {
			t.Fatalf("a page of %d entries", len(res.Resources))
		}
		for _, r := range res.Resources {
			seen[r.URI] = true
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	box.mu.Lock()
	calls = box.listCalls - calls
	box.mu.Unlock()
	if len(seen) != bigCount || pages != 10 || calls != 10 || box.maxLimit != 1000 {
		t.Errorf("the big folder: %d distinct files in %d pages, %d upstream calls, largest %d; want %d in 10, 10, 1000",
			len(seen), pages, calls, box.maxLimit, bigCount)
	}

	// A second replica (another server on the same database) continues
	// the first one's listing.
	first, err := list(mcp.Meta{"parentUri": archive, "pageSize": 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	other := &env{t: t, srv: servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(operatorToken), ConnectorCatalog: boxCatalog(t)})}
	cs2 := other.session("box", headers{"Authorization": "Bearer " + token})
	second, err := cs2.ListResources(ctx, &mcp.ListResourcesParams{Cursor: first.NextCursor})
	if err != nil || len(second.Resources) != 2 || second.Resources[0].URI != "box://file/9000002" {
		t.Fatalf("the next page on another replica = %+v, %v", second, err)
	}

	if _, err := list(mcp.Meta{"parentUri": "box://folder/100"}, first.NextCursor); err == nil || !strings.Contains(err.Error(), "another listing") {
		t.Errorf("a cursor of another listing: %v", err)
	}
	if _, err := list(nil, "not-a-cursor"); err == nil || !strings.Contains(err.Error(), "invalid_params") {
		t.Errorf("a forged cursor: %v", err)
	}
	if _, err := list(mcp.Meta{"parentUri": "box://file/1001"}, ""); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("listing a file: %v", err)
	}
}
