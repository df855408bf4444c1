package knowledge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/webdav"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/server"
)

// davServer is a real WebDAV server (golang.org/x/net/webdav) over a
// temporary directory on loopback. Each user (by their Authorization
// header) is refused (403) the paths listed in deny; an unknown header is
// 401.
type davServer struct {
	*httptest.Server
	dir string

	mu       sync.Mutex
	users    map[string]string   // Authorization value -> user
	deny     map[string][]string // user -> path prefixes refused
	fail     []string            // path prefixes answering 500 to anyone
	requests []string            // "METHOD path" of every request
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func newDAV(t *testing.T) *davServer {
	t.Helper()
	d := &davServer{dir: t.TempDir(), users: map[string]string{}, deny: map[string][]string{}}
	h := &webdav.Handler{Prefix: "/dav", FileSystem: webdav.Dir(d.dir), LockSystem: webdav.NewMemLS()}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.requests = append(d.requests, r.Method+" "+r.URL.Path)
		user, ok := d.users[r.Header.Get("Authorization")]
		deny := d.deny[user]
		fail := d.fail
		d.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="dav"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, "/dav/")
		for _, p := range fail {
			if strings.HasPrefix(rel, p) {
				http.Error(w, "broken disk", http.StatusInternalServerError)
				return
			}
		}
		for _, p := range deny {
			if strings.HasPrefix(rel, p) {
				http.Error(w, "not yours", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *davServer) write(t *testing.T, rel, content string, mod time.Time) {
	t.Helper()
	p := filepath.Join(d.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func (d *davServer) count(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, r := range d.requests {
		if strings.HasPrefix(r, method+" ") {
			n++
		}
	}
	return n
}

// davTree is the tree the WebDAV tests serve.
var davTree = map[string]string{
	"readme.md":                "# Handbook\n",
	"notes/plan.txt":           "ship it",
	"notes/2026/q1.csv":        "a,b\n1,2\n",
	"notes/2026/deep/leaf.txt": "leaf",
	"hr/salaries.txt":          "secret numbers",
	"logo.png":                 "\x89PNG\r\n\x1a\nnot really an image",
}

// webdavEnv is a server with a webdav instance of acme over a fresh DAV
// server, a trusted knowledge-sync caller and two members with their own
// WebDAV credentials: ann sees everything, bob is refused hr/.
type webdavEnv struct {
	*env
	dav            *davServer
	syncToken      string
	ann, bob       string
	annDAV, bobDAV string
}

func startWebDAV(t *testing.T, db *database.DB) *webdavEnv {
	t.Helper()
	return startWebDAVWith(t, db)
}

func startWebDAVWith(t *testing.T, db *database.DB, configure ...func(*server.Config)) *webdavEnv {
	t.Helper()
	e := start(t, db, builtin(t), configure...)
	dav := newDAV(t)
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for p, c := range davTree {
		dav.write(t, p, c, mod)
	}
	w := &webdavEnv{env: e, dav: dav}
	e.api(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/webdav", map[string]any{
		"connector_id": "webdav", "auth_mode": "apiKey", "agents": []string{"bot"},
		"fields": map[string]any{"WEBDAV_URL": dav.URL + "/dav/"},
	})
	w.syncToken = e.caller("kb-sync", "knowledge-sync", true, nil)
	w.ann, w.bob = e.member("ann@acme.test"), e.member("bob@acme.test")
	w.annDAV, w.bobDAV = basic("ann", "ann-pass-0001"), basic("bob", "bob-pass-0002")
	dav.users[w.annDAV], dav.users[w.bobDAV] = "ann", "bob"
	dav.deny["bob"] = []string{"hr"}
	e.setUserField("webdav", w.ann, "WEBDAV_AUTHORIZATION", w.annDAV)
	e.setUserField("webdav", w.bob, "WEBDAV_AUTHORIZATION", w.bobDAV)
	return w
}

// TestWebDAVKnowledgeSync: a sync client written with the official SDK,
// knowing only the Resources contract, walks a real WebDAV server's tree
// through server.New as a trusted knowledge-sync caller reading for a
// member: it reads every document (text inline, the binary as a blob),
// a second run reads nothing, and a document changed on the server is
// the only one read again.
func TestWebDAVKnowledgeSync(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		w := startWebDAV(t, db)
		cs := w.session("webdav", headers{"Authorization": "Bearer " + w.syncToken})
		s := newSyncer(cs, mcp.Meta{"targetUserId": w.ann})

		reads, _ := s.run(t)
		if reads != len(davTree) {
			t.Fatalf("first run read %d documents, want %d: %v", reads, len(davTree), s.docs)
		}
		for p, c := range davTree {
			uri := "webdav://file/" + p
			want := c
			if strings.HasSuffix(p, ".png") {
				want = "blob:" + c
			}
			if s.docs[uri] != want {
				t.Errorf("%s = %q, want %q", uri, s.docs[uri], want)
			}
		}
		gets := w.dav.count("GET")

		if reads, _ := s.run(t); reads != 0 {
			t.Fatalf("second run read %d documents, want 0", reads)
		}
		if n := w.dav.count("GET"); n != gets {
			t.Fatalf("second run fetched %d documents from the server", n-gets)
		}

		w.dav.write(t, "notes/plan.txt", "ship it now", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if reads, _ := s.run(t); reads != 1 || s.docs["webdav://file/notes/plan.txt"] != "ship it now" {
			t.Fatalf("after a change: read %d documents, plan = %q; want 1 and the new text", reads, s.docs["webdav://file/notes/plan.txt"])
		}
	})
}

// TestWebDAVResources checks the contract's answers one by one: the
// profile (without any credential), the templates, a listing's entries
// (uri, name, mimeType, size, _meta.kind and revision), metadataOnly,
// and a missing document.
func TestWebDAVResources(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		w := startWebDAV(t, db)
		ctx := context.Background()

		anon := w.session("webdav", nil)
		prof, err := anon.ReadResource(ctx, &mcp.ReadResourceParams{URI: "webdav://profile/knowledge"})
		if err != nil {
			t.Fatalf("anonymous profile: %v", err)
		}
		var profile map[string]any
		if err := json.Unmarshal([]byte(prof.Contents[0].Text), &profile); err != nil {
			t.Fatal(err)
		}
		list, _ := profile["list"].(map[string]any)
		auth, _ := profile["authentication"].(map[string]any)
		access, _ := profile["access"].(map[string]any)
		if profile["knowledge_compatible"] != true || profile["provider"] != "WebDAV" || list["maximum_page_size"] != 200.0 ||
			list["default_page_size"] != 50.0 || auth["resource_access"] != "per-reader" || access["action"] != "checkAccess" ||
			access["maximum_uris"] != 100.0 || profile["root_uri"] != "webdav://folder/" {
			t.Errorf("profile = %s", prof.Contents[0].Text)
		}
		tpl, err := anon.ListResourceTemplates(ctx, nil)
		if err != nil || len(tpl.ResourceTemplates) != 2 || tpl.ResourceTemplates[0].URITemplate != "webdav://folder/{+path}" ||
			tpl.ResourceTemplates[1].URITemplate != "webdav://file/{+path}" || tpl.ResourceTemplates[1].Meta["kind"] != "file" {
			t.Errorf("templates = %+v, %v", tpl, err)
		}
		if w.dav.count("PROPFIND")+w.dav.count("GET") != 0 {
			t.Error("the profile or the templates reached the upstream")
		}

		cs := w.session("webdav", headers{"Authorization": "Bearer " + w.syncToken})
		meta := mcp.Meta{"targetUserId": w.ann}
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Meta: mcp.Meta{"targetUserId": w.ann, "parentUri": "webdav://folder/notes"}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*mcp.Resource{}
		for _, r := range res.Resources {
			got[r.URI] = r
		}
		dir, plan := got["webdav://folder/notes/2026"], got["webdav://file/notes/plan.txt"]
		if len(res.Resources) != 2 || dir == nil || plan == nil || dir.Meta["kind"] != "folder" || plan.Meta["kind"] != "file" ||
			plan.Name != "plan.txt" || plan.Size != 7 || !strings.HasPrefix(plan.MIMEType, "text/plain") || plan.Meta["revision"] == "" || res.NextCursor != "" {
			b, _ := json.Marshal(res)
			t.Fatalf("listing of notes = %s", b)
		}

		// On the wire, the revision is at the top level of each entry and
		// of a read's result (and in _meta, as the SDK's types see it).
		bearer := headers{"Authorization": "Bearer " + w.syncToken}
		wire := w.rawRPC("webdav", bearer, "resources/list", map[string]any{"_meta": map[string]any{"targetUserId": w.ann, "parentUri": "webdav://folder/notes"}})
		entries, _ := wire["resources"].([]any)
		for _, x := range entries {
			r, _ := x.(map[string]any)
			m, _ := r["_meta"].(map[string]any)
			if rev, _ := r["revision"].(string); rev == "" || rev != m["revision"] || rev != got[r["uri"].(string)].Meta["revision"] {
				t.Errorf("entry on the wire = %v: want revision at the top level, equal to _meta.revision", r)
			}
		}
		if len(entries) != 2 {
			t.Errorf("the wire's listing = %v", wire)
		}
		wire = w.rawRPC("webdav", bearer, "resources/read", map[string]any{"uri": plan.URI, "_meta": map[string]any{"targetUserId": w.ann}})
		if m, _ := wire["_meta"].(map[string]any); wire["revision"] != plan.Meta["revision"] || m["revision"] != plan.Meta["revision"] {
			t.Errorf("read on the wire = %v: want revision %v at the top level and in _meta", wire, plan.Meta["revision"])
		}

		doc, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: plan.URI, Meta: mcp.Meta{"targetUserId": w.ann, "metadataOnly": true}})
		if err != nil || len(doc.Contents) != 1 || doc.Contents[0].Text != "" || doc.Meta["revision"] != plan.Meta["revision"] {
			t.Fatalf("metadataOnly read = %+v, %v", doc, err)
		}
		doc, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: plan.URI, Meta: meta})
		if err != nil || doc.Contents[0].Text != "ship it" || doc.Contents[0].Meta["downloadUrl"] != nil || doc.Meta["revision"] != plan.Meta["revision"] {
			t.Fatalf("read = %+v, %v", doc, err)
		}
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "webdav://file/notes/nothing.txt", Meta: meta})
		if err == nil || !strings.Contains(err.Error(), "Resource not found") {
			t.Fatalf("missing document: %v", err)
		}
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "webdav://file/../etc/passwd", Meta: meta})
		if err == nil || !strings.Contains(err.Error(), "Resource not found") {
			t.Fatalf("a path escaping the root: %v", err)
		}
	})
}
