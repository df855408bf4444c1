package knowledge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

const operatorToken = "knowledge-operator-token-0001"

var (
	builtinOnce sync.Once
	builtinCat  *registry.Catalog
	builtinErr  error
)

// builtin is the built-in catalog, compiled once for the package's tests.
func builtin(t *testing.T) *registry.Catalog {
	t.Helper()
	builtinOnce.Do(func() { builtinCat, builtinErr = registry.LoadCatalog(catalog.FS(), openapi.Compile) })
	if builtinErr != nil {
		t.Fatal(builtinErr)
	}
	return builtinCat
}

// env is a server built by server.New with one tenant, acme.
type env struct {
	t   *testing.T
	srv *servertest.Server
}

func start(t *testing.T, db *database.DB, cat *registry.Catalog, configure ...func(*server.Config)) *env {
	t.Helper()
	cfg := server.Config{DB: db, AdminToken: secrets.New(operatorToken), ConnectorCatalog: cat}
	for _, f := range configure {
		f(&cfg)
	}
	srv := servertest.Start(t, cfg)
	e := &env{t: t, srv: srv}
	e.api(http.StatusCreated, http.MethodPost, "/v1/tenants", map[string]any{"slug": "acme", "name": "Acme"})
	return e
}

// api sends an admin API request as the operator and returns the JSON
// answer, failing unless the status is want.
func (e *env) api(want int, method, path string, body any) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// caller creates a caller of kind and trust and returns its token.
func (e *env) caller(name, kind string, trusted bool, extra map[string]any) string {
	e.t.Helper()
	body := map[string]any{"name": name, "kind": kind, "trusted": trusted}
	for k, v := range extra {
		body[k] = v
	}
	return e.api(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/callers", body)["token"].(string)
}

// member adds a member of acme and returns their user id.
func (e *env) member(email string) string {
	e.t.Helper()
	ctx := context.Background()
	ten, err := e.srv.Tenants().Tenant(ctx, "acme")
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := e.srv.Members().AddMember(ctx, "test", ten.ID, email, members.RoleMember)
	if err != nil {
		e.t.Fatal(err)
	}
	return m.UserID
}

// setUserField sets a member's own value of a user-scope field.
func (e *env) setUserField(instance, user, field, value string) {
	e.t.Helper()
	v := secrets.New(value)
	if _, err := e.srv.Tenants().SetUserSettings(context.Background(), "acme", instance, user, map[string]*secrets.Secret{field: &v}); err != nil {
		e.t.Fatal(err)
	}
}

type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// session connects the official SDK client to the instance's endpoint
// with the given headers (none: anonymous).
func (e *env) session(instance string, h headers) *mcp.ClientSession {
	e.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "knowledge-sync", Version: "1.0.0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.srv.URL + "/workspaces/acme/webhooks/" + instance + ".mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: h},
	}, nil)
	if err != nil {
		e.t.Fatalf("initialize: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// syncer is a knowledge-base sync client that knows nothing but the MCP
// Resources contract: it walks the tree from the profile's root, reads
// every document whose revision it has not seen, and remembers what it
// read.
type syncer struct {
	cs     *mcp.ClientSession
	meta   mcp.Meta // sent with every request (targetUserId)
	pageSz int
	seen   map[string]string // uri -> revision
	docs   map[string]string // uri -> text (or "blob:<n>" / "url:<u>")
	// refused are the folders and documents the reader may not list or
	// read.
	refused []string
}

func newSyncer(cs *mcp.ClientSession, meta mcp.Meta) *syncer {
	return &syncer{cs: cs, meta: meta, seen: map[string]string{}, docs: map[string]string{}}
}

func (s *syncer) withMeta(extra mcp.Meta) mcp.Meta {
	m := mcp.Meta{}
	for k, v := range s.meta {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// run walks the whole tree and returns the number of documents read and
// of listing pages fetched.
func (s *syncer) run(t *testing.T) (reads, pages int) {
	t.Helper()
	ctx := context.Background()
	prof, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: profileURI(t, s.cs)})
	if err != nil {
		t.Fatalf("profile: %v", err)
	}
	var profile struct {
		Root string `json:"root_uri"`
	}
	if err := json.Unmarshal([]byte(prof.Contents[0].Text), &profile); err != nil {
		t.Fatal(err)
	}
	queue := []string{profile.Root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		cursor := ""
		for {
			meta := mcp.Meta{"parentUri": parent}
			if s.pageSz != 0 {
				meta["pageSize"] = s.pageSz
			}
			res, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor, Meta: s.withMeta(meta)})
			if err != nil && strings.Contains(err.Error(), "forbidden") {
				s.refused = append(s.refused, parent) // not this reader's: skipped
				break
			}
			if err != nil {
				t.Fatalf("resources/list %s: %v", parent, err)
			}
			pages++
			for _, r := range res.Resources {
				switch r.Meta["kind"] {
				case "folder":
					queue = append(queue, r.URI)
				case "file":
					rev, _ := r.Meta["revision"].(string)
					if rev == "" {
						t.Fatalf("%s has no revision", r.URI)
					}
					if s.seen[r.URI] == rev {
						continue
					}
					doc, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI, Meta: s.withMeta(nil)})
					if err != nil && strings.Contains(err.Error(), "forbidden") {
						s.refused = append(s.refused, r.URI)
						continue
					}
					if err != nil {
						t.Fatalf("resources/read %s: %v", r.URI, err)
					}
					reads++
					c := doc.Contents[0]
					switch {
					case c.Text != "":
						s.docs[r.URI] = c.Text
					case len(c.Blob) > 0:
						s.docs[r.URI] = "blob:" + string(c.Blob)
					case c.Meta["downloadUrl"] != nil:
						s.docs[r.URI] = "url:" + c.Meta["downloadUrl"].(string)
					default:
						s.docs[r.URI] = ""
					}
					s.seen[r.URI] = rev
				default:
					t.Fatalf("%s: _meta.kind = %v", r.URI, r.Meta["kind"])
				}
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
	return reads, pages
}

// profileURI finds the profile among the templates' scheme.
func profileURI(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil || len(res.ResourceTemplates) == 0 {
		t.Fatalf("resources/templates/list = %v, %v", res, err)
	}
	scheme, _, _ := strings.Cut(res.ResourceTemplates[0].URITemplate, "://")
	return scheme + "://profile/knowledge"
}

// rawRPC sends one JSON-RPC request to the instance's endpoint with the
// given headers and returns its result as JSON: what the wire carries,
// beyond the fields the SDK's types know.
func (e *env) rawRPC(instance string, h headers, method string, params any) map[string]any {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/workspaces/acme/webhooks/"+instance+".mcp", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: h}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil || out.Result == nil {
		e.t.Fatalf("%s answered %d %s", method, resp.StatusCode, raw)
	}
	return out.Result
}
