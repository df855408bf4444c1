package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/secrets"
)

// teeTransport adds caller headers to every request and copies every
// response body into seen, so the test can search all responses.
type teeTransport struct {
	headers map[string]string
	seen    *logtest.Buffer
}

func (t *teeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, t.seen), resp.Body}
	return resp, nil
}

// upstream is a loopback stand-in for the GitHub API that records what it
// receives.
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	authSet map[string]int
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{authSet: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.authSet[r.Header.Get("Authorization")]++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if r.Method == "GET" && len(parts) == 3 && parts[0] == "repos" {
			fmt.Fprintf(w, `{"id": 42, "name": %q, "full_name": "%s/%s", "private": false}`, parts[2], parts[1], parts[2])
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message": "Not Found"}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) sawAuth(v string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.authSet[v]
}

// stack is a running switchboard serve on an ephemeral loopback port.
type stack struct {
	base  string
	logs  *logtest.Buffer
	seen  *logtest.Buffer // every response body the test received
	admin string
	db    func() *database.DB
	dir   string
}

const operatorToken = "sba_e2e-operator-token"

func startStack(t *testing.T, databaseURL string) *stack {
	t.Helper()
	s := &stack{logs: &logtest.Buffer{}, seen: &logtest.Buffer{}, admin: operatorToken, dir: t.TempDir()}
	cfg := &config{
		Addr: "127.0.0.1:0", DataDir: s.dir, DatabaseURL: secrets.New(databaseURL), Env: envDevelopment,
		LogLevel: "debug", AdminToken: secrets.New(operatorToken), ShutdownTimeout: 5 * time.Second,
		AllowUpstreams: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
	logger := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	a, db, err := newServer(ctx, cfg, logger)
	if err != nil {
		cancel()
		t.Fatalf("newServer: %v", err)
	}
	s.db = func() *database.DB { return db }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		a.Close()
		db.Close()
	})
	s.base = "http://" + ln.Addr().String()
	return s
}

// call sends one HTTP request and returns status and body, recording the body.
func (s *stack) call(t *testing.T, method, path string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s.seen.Write(b)
	return resp.StatusCode, string(b)
}

func (s *stack) adminCall(t *testing.T, method, path, body string, wantStatus int) map[string]any {
	t.Helper()
	status, out := s.call(t, method, path, map[string]string{"Authorization": "Bearer " + s.admin}, body)
	if status != wantStatus {
		t.Fatalf("%s %s = %d %s, want %d", method, path, status, out, wantStatus)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(out), &m)
	return m
}

func (s *stack) mcpClient(t *testing.T, tenant, instance string, headers map[string]string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   s.base + "/workspaces/" + tenant + "/webhooks/" + instance + ".mcp",
		HTTPClient: &http.Client{Transport: &teeTransport{headers: headers, seen: s.seen}},
		MaxRetries: -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Connect(ctx, transport, nil)
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	onBothStores(t, endToEnd)
}

// onBothStores runs fn as parallel subtests on the embedded store and on a
// fresh, migrated Postgres database (its URL; empty for the embedded one).
func onBothStores(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	backends := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "" },
		"postgres": func(t *testing.T) string {
			url := dbtest.PostgresURL(t)
			var out bytes.Buffer
			if err := run(context.Background(), []string{"migrate"}, envMap(map[string]string{"SWITCHBOARD_DATABASE_URL": url}), &out, &out); err != nil {
				t.Fatalf("switchboard migrate: %v\n%s", err, out.String())
			}
			return url
		},
	}
	for name, dsn := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, dsn(t))
		})
	}
}

func endToEnd(t *testing.T, databaseURL string) {
	const (
		canaryA = "canary-key-acme-3c1f9e"
		canaryB = "canary-key-globex-77d0aa"
	)
	up := newUpstream(t)
	s := startStack(t, databaseURL)

	if st, _ := s.call(t, "GET", "/healthz", nil, ""); st != 200 {
		t.Fatalf("/healthz = %d", st)
	}
	if st, body := s.call(t, "GET", "/readyz", nil, ""); st != 200 {
		t.Fatalf("/readyz = %d %s", st, body)
	}

	// Two tenants, each with an instance named "gh" and its own key.
	tokens := map[string]string{}
	for tenant, key := range map[string]string{"acme": canaryA, "globex": canaryB} {
		s.adminCall(t, "POST", "/v1/tenants", fmt.Sprintf(`{"slug": %q, "name": "Tenant %s"}`, tenant, tenant), 201)
		c := s.adminCall(t, "POST", "/v1/tenants/"+tenant+"/callers", `{"name": "agent-factory", "kind": "agent-platform"}`, 201)
		tok, _ := c["token"].(string)
		if !strings.HasPrefix(tok, "sbc_") {
			t.Fatalf("caller token = %q", tok)
		}
		tokens[tenant] = tok
		inst := s.adminCall(t, "PUT", "/v1/tenants/"+tenant+"/instances/gh", fmt.Sprintf(
			`{"connector_id": "github", "auth_mode": "apiKey", "agents": ["triage-bot"],
			  "fields": {"GITHUB_TOKEN": %q, "GITHUB_API_URL": %q}}`, key, up.URL), 201)
		if strings.Contains(fmt.Sprint(inst), key) {
			t.Fatal("install response shows the secret")
		}
	}
	// The same PUT again is an update (200), not a second instance.
	s.adminCall(t, "PUT", "/v1/tenants/acme/instances/gh", fmt.Sprintf(
		`{"connector_id": "github", "auth_mode": "apiKey", "agents": ["triage-bot"], "fields": {"GITHUB_TOKEN": %q, "GITHUB_API_URL": %q}}`, canaryA, up.URL), 200)
	got := s.adminCall(t, "GET", "/v1/tenants/acme/instances/gh", "", 200)
	if !strings.Contains(fmt.Sprint(got), "GITHUB_TOKEN") {
		t.Fatalf("instance view lacks its fields: %v", got)
	}

	// initialize -> tools/list -> tools/call with the official Go SDK client.
	agent := map[string]string{"Authorization": "Bearer " + tokens["acme"], "X-Agent-Id": "triage-bot"}
	cs, err := s.mcpClient(t, "acme", "gh", agent)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	defer cs.Close()
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
		raw, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(raw), `"$ref"`) {
			t.Errorf("tool %s schema has $ref", tool.Name)
		}
	}
	for _, want := range []string{"repositories", "issues", "pull_requests"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s (has %v)", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories",
		Arguments: map[string]any{"action": "get", "owner": "octocat", "repo": "hello-world"}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError {
		t.Fatalf("tools/call isError: %+v", res.Content)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"full_name":"octocat/hello-world"`) {
		t.Fatalf("structuredContent = %s", sc)
	}
	// Every GitHub tool declares its output; the answer conforms to it.
	for _, tool := range tools.Tools {
		if tool.OutputSchema == nil {
			t.Errorf("tool %s has no outputSchema", tool.Name)
		}
		if tool.Name == "repositories" {
			if err := validateOutput(tool.OutputSchema, res.StructuredContent); err != nil {
				t.Errorf("repositories get: structuredContent does not match the outputSchema: %v", err)
			}
		}
	}
	if up.sawAuth("Bearer "+canaryA) != 1 {
		t.Fatalf("upstream did not get acme's API key exactly once: %v", up.authSet)
	}

	// Refusals: no agent id, an agent not on the list, another tenant's
	// caller, unknown tenant or instance. The upstream sees nothing.
	before := up.hits.Load()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"get","owner":"o","repo":"r"}}}`
	mcpHeaders := func(token, agentID string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
		if agentID != "" {
			h["X-Agent-Id"] = agentID
		}
		return h
	}
	refusals := []struct {
		name, path string
		headers    map[string]string
		status     int
		code       string
	}{
		{"missing agent id", "/workspaces/acme/webhooks/gh.mcp", mcpHeaders(tokens["acme"], ""), 403, "missing_agent_id"},
		{"agent not allowed", "/workspaces/acme/webhooks/gh.mcp", mcpHeaders(tokens["acme"], "intruder"), 403, "agent_not_allowed"},
		{"other tenant's caller", "/workspaces/acme/webhooks/gh.mcp", mcpHeaders(tokens["globex"], "triage-bot"), 401, ""},
		{"no credential", "/workspaces/acme/webhooks/gh.mcp", map[string]string{"X-Agent-Id": "triage-bot", "Accept": "application/json, text/event-stream"}, 401, ""},
		{"unknown instance", "/workspaces/acme/webhooks/nope.mcp", mcpHeaders(tokens["acme"], "triage-bot"), 404, ""},
		{"unknown tenant", "/workspaces/nope/webhooks/gh.mcp", mcpHeaders(tokens["acme"], "triage-bot"), 401, ""},
		{"NUL in the tenant", "/workspaces/ac%00me/webhooks/gh.mcp", mcpHeaders(tokens["acme"], "triage-bot"), 400, "invalid_text"},
		{"NUL in the instance", "/workspaces/acme/webhooks/g%00h.mcp", mcpHeaders(tokens["acme"], "triage-bot"), 400, "invalid_text"},
		{"NUL in the query", "/workspaces/acme/webhooks/gh.mcp?x=%00", mcpHeaders(tokens["acme"], "triage-bot"), 400, `query parameter \"x\"`},
		{"NUL in an App-mode path", "/workspaces/acme/apps/gh/ops/get%00Repo", mcpHeaders(tokens["acme"], "triage-bot"), 400, "invalid_text"},
		{"NUL in an OAuth page query", "/workspaces/acme/webhooks/gh/oauth/connect?target_user_id=u%00", nil, 400, "invalid_text"},
	}
	for _, r := range refusals {
		st, body := s.call(t, "POST", r.path, r.headers, call)
		if st != r.status || !strings.Contains(body, r.code) {
			t.Errorf("%s: %d %s, want %d with %q", r.name, st, body, r.status, r.code)
		}
	}
	// A targetUserId with a NUL byte is refused before any store sees it.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories",
		Arguments: map[string]any{"action": "get", "owner": "o", "repo": "r", "targetUserId": "u\x00"}})
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "invalid_text") {
		t.Errorf("tools/call with a NUL in targetUserId: %v %+v", err, res)
	}
	if _, err := s.mcpClient(t, "acme", "gh", map[string]string{"Authorization": "Bearer " + tokens["acme"], "X-Agent-Id": "intruder"}); err == nil {
		t.Error("the SDK client connected as an agent not on the list")
	}
	if n := up.hits.Load() - before; n != 0 {
		t.Fatalf("upstream saw %d requests from refused calls", n)
	}

	// globex's caller reaches globex's instance with globex's key only.
	gcs, err := s.mcpClient(t, "globex", "gh", map[string]string{"Authorization": "Bearer " + tokens["globex"], "X-Agent-Id": "triage-bot"})
	if err != nil {
		t.Fatal(err)
	}
	defer gcs.Close()
	if _, err := gcs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories", Arguments: map[string]any{"action": "get", "owner": "g", "repo": "x"}}); err != nil {
		t.Fatal(err)
	}
	if up.sawAuth("Bearer "+canaryB) != 1 || up.sawAuth("Bearer "+canaryA) != 1 {
		t.Fatalf("keys crossed tenants: %v", up.authSet)
	}

	// Bad input gets a clear error and writes nothing.
	instancesBefore := countRows(t, s.db(), "instances")
	secretsBefore := countRows(t, s.db(), "secrets")
	h := mcpHeaders(tokens["acme"], "triage-bot")
	bad := []struct {
		name, body string
		status     int
		want       string
	}{
		{"malformed JSON", `{"jsonrpc": "2.0", "id": 1, "method": `, 400, ""},
		{"not JSON-RPC", `{"hello": "world"}`, 400, ""},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 200, "-32602"},
		{"unknown action", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"explode"}}}`, 200, "invalid_arguments"},
		{"wrong argument type", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"get","owner":5,"repo":"r"}}}`, 200, "invalid_arguments"},
		{"body over 1 MiB", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`, 413, ""},
	}
	before = up.hits.Load()
	for _, b := range bad {
		st, body := s.call(t, "POST", "/workspaces/acme/webhooks/gh.mcp", h, b.body)
		if st != b.status || !strings.Contains(body, b.want) {
			t.Errorf("%s: %d %.300s, want %d with %q", b.name, st, body, b.status, b.want)
		}
	}
	st, body := s.call(t, "PUT", "/v1/tenants/acme/instances/gh2", map[string]string{"Authorization": "Bearer " + s.admin},
		`{"connector_id": "github", "auth_mode": "apiKey", "agents": ["a"], "fields": {"GITHUB_TOKEN": "`+canaryA+`", "NOT_DECLARED": "x"}}`)
	if st != 400 || !strings.Contains(body, "NOT_DECLARED") {
		t.Errorf("undeclared field: %d %s", st, body)
	}
	if up.hits.Load() != before {
		t.Error("bad input reached the upstream")
	}
	if countRows(t, s.db(), "instances") != instancesBefore || countRows(t, s.db(), "secrets") != secretsBefore {
		t.Error("bad input wrote rows")
	}

	// App mode: the raw upstream JSON.
	st, body = s.call(t, "POST", "/workspaces/acme/apps/gh/ops/getRepo", agent, `{"owner": "octocat", "repo": "spoon-knife"}`)
	if st != 200 || !strings.Contains(body, `"full_name": "octocat/spoon-knife"`) {
		t.Errorf("App mode: %d %s", st, body)
	}

	// The audit log has the calls, with actor and outcome, and no secret.
	// Rows are written in batches in the background: wait for the calls'
	// rows (the tenant's creation row may be there before them).
	var auditRows map[string]any
	var rows []any
	hasCalls := func() bool {
		raw := fmt.Sprint(auditRows)
		return len(rows) > 0 && strings.Contains(raw, "repositories") && strings.Contains(raw, "triage-bot")
	}
	for deadline := time.Now().Add(30 * time.Second); !hasCalls() && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		auditRows = s.adminCall(t, "GET", "/v1/tenants/acme/audit", "", 200)
		rows, _ = auditRows["entries"].([]any)
	}
	if raw := fmt.Sprint(auditRows); len(rows) == 0 || !strings.Contains(raw, "repositories") || !strings.Contains(raw, "triage-bot") {
		t.Errorf("audit rows lack the calls: %.500s", raw)
	}
	// Testing an instance's connection answers {ok, message}.
	tested := s.adminCall(t, "POST", "/v1/tenants/acme/instances/gh/test", `{}`, 200)
	if _, ok := tested["ok"]; !ok {
		t.Errorf("instance test answer = %v", tested)
	}
	// A central OAuth provider's client secret is write-only.
	s.adminCall(t, "PUT", "/v1/providers/example", fmt.Sprintf(`{"name": "Example", "authorize_url": "https://idp.example.test/authorize",
		"token_url": "https://idp.example.test/token", "client_id": "central-client", "client_secret": %q}`, canaryA+"-central"), 201)
	if prov := s.adminCall(t, "GET", "/v1/providers/example", "", 200); strings.Contains(fmt.Sprint(prov), canaryA) {
		t.Errorf("provider view shows its client secret: %v", prov)
	}

	// Canary: the keys appear in no response, no log line, no clear value in
	// the database.
	for _, canary := range []string{canaryA, canaryB} {
		if strings.Contains(s.seen.String(), canary) {
			t.Errorf("a response contains the canary %s", canary)
		}
		if strings.Contains(s.logs.String(), canary) {
			t.Errorf("the logs contain the canary %s", canary)
		}
		if databaseContains(t, s, canary) {
			t.Errorf("the database holds the canary %s in clear", canary)
		}
	}
	if !strings.Contains(s.logs.String(), `"request_id"`) {
		t.Error("log lines carry no request id")
	}
}

func countRows(t *testing.T, db *database.DB, table string) int {
	t.Helper()
	return dbtest.Count(t, db, table, "")
}

// databaseContains searches the store for s in clear: every file of the
// embedded store (database, WAL), or every row of every table on Postgres.
func databaseContains(t *testing.T, st *stack, s string) bool {
	t.Helper()
	db := st.db()
	if db.Dialect == database.SQLite {
		found := false
		filepath.Walk(st.dir, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(path)
				found = found || bytes.Contains(b, []byte(s))
			}
			return nil
		})
		return found
	}
	rows, err := db.QueryContext(context.Background(), `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	for _, table := range tables {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %q x WHERE position($1 in x::text) > 0 OR position($2 in x::text) > 0`, table)
		hex := fmt.Sprintf("%x", s)
		if err := db.QueryRowContext(context.Background(), q, s, hex).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n > 0 {
			return true
		}
	}
	return false
}

// validateOutput validates structured content against a tool's output
// schema as a client would, from their JSON.
func validateOutput(schema, content any) error {
	raw, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return err
	}
	r, err := js.Resolve(nil)
	if err != nil {
		return err
	}
	b, err := json.Marshal(content)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return r.Validate(v)
}
