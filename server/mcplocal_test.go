package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// npmServers are the stdio MCP servers from npm the mcp_local tests run,
// by package, with the script each runs.
var npmServers = map[string]string{
	"@modelcontextprotocol/server-everything": "dist/index.js",
	"@modelcontextprotocol/server-filesystem": "dist/index.js",
}

// npmVersion is the version of the npm servers installed (as .ci/run
// does).
const npmVersion = "2026.8.31"

var npmOnce sync.Once

// npmServer returns the script of an npm MCP server, installed from the
// npm registry into the user's cache directory on first use (shared by
// every test run). Without node or npm, or when the install fails, the
// test is skipped, and under CI=true it fails.
func npmServer(t *testing.T, pkg string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "switchboard-test", "npm")
	script := filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), filepath.FromSlash(npmServers[pkg]))
	npmOnce.Do(func() {
		missing := false
		for p, s := range npmServers {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(p), filepath.FromSlash(s))); err != nil {
				missing = true
			}
		}
		if !missing {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		pkgs := []string{"install", "--no-audit", "--no-fund", "--prefix", dir}
		for p := range npmServers {
			pkgs = append(pkgs, p+"@"+npmVersion)
		}
		out, err := exec.Command("npm", pkgs...).CombinedOutput()
		if err != nil {
			t.Logf("npm install: %v\n%s", err, out)
		}
	})
	if _, err := os.Stat(script); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm server %s is not installed (%v): CI must install it (npm install --prefix %s %s)", pkg, err, dir, pkg)
		}
		t.Skipf("npm server %s not available: %v", pkg, err)
	}
	requireNode(t)
	return script
}

// requireNode skips t when node is not installed, and fails it under
// CI=true.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed")
		}
		t.Skip("node is not installed")
	}
}

// testServerScript returns the absolute path of the package's own
// mcp_local test server (testdata/mcplocal/server.js), which node runs.
func testServerScript(t *testing.T) string {
	t.Helper()
	requireNode(t)
	script, err := filepath.Abs(filepath.Join("testdata", "mcplocal", "server.js"))
	if err != nil {
		t.Fatal(err)
	}
	return script
}

// localCatalog holds the mcp_local test connectors: the npm servers
// (their script's path is an instance field, as a test shortcut: a
// catalog connector ships its server in its package), a filesystem
// server scoped to each user's own directory, and the package's own test
// server with a per-user secret.
func localCatalog(t *testing.T) map[string]string {
	js, err := os.ReadFile(filepath.Join("testdata", "mcplocal", "server.js"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"everything/connector.json": `{
  "id": "everything", "name": "Everything", "version": "1.0.0", "type": "mcp_local", "scope": "global", "requires": ["NODE"],
  "auth": {"type": "none"},
  "env": [{"name": "SERVER_JS", "label": "Server script", "required": true}],
  "mcp_config": {"command": ["node", "{ENV:SERVER_JS}", "stdio"]}
}`,
		"files/connector.json": `{
  "id": "files", "name": "Files", "version": "1.0.0", "type": "mcp_local", "scope": "global", "requires": ["NODE"],
  "auth": {"type": "none"},
  "env": [
    {"name": "SERVER_JS", "label": "Server script", "required": true},
    {"name": "ROOT", "label": "Your directory", "required": true, "scope": "user"},
    {"name": "NOTE", "label": "Your note", "secret": true, "scope": "user"}
  ],
  "mcp_config": {"command": ["node", "{ENV:SERVER_JS}", "{ENV:ROOT}"], "env": {"USER_NOTE": "{ENV:NOTE}"}}
}`,
		"secrettest/connector.json": `{
  "id": "secrettest", "name": "Secret test", "version": "1.0.0", "type": "mcp_local", "scope": "user", "requires": ["NODE"],
  "auth": {"type": "none"},
  "env": [{"name": "TOKEN", "label": "Your token", "required": true, "secret": true}],
  "mcp_config": {"command": ["node", "server.js"], "env": {"TOKEN": "{ENV:TOKEN}"}}
}`,
		"secrettest/server.js": string(js),
	}
}

// localEnv is a server with tenant acme, a trusted caller that names
// users in a header, and members.
type localEnv struct {
	t      *testing.T
	srv    *servertest.Server
	acme   *tenants.Tenant
	caller string
}

func newLocalEnv(t *testing.T, db *database.DB, cfg mcplocal.Config) *localEnv {
	t.Helper()
	ctx := context.Background()
	srv := servertest.Start(t, server.Config{DB: db, DataDir: t.TempDir(), Local: cfg,
		ConnectorCatalog: registrytest.Load(t, localCatalog(t))})
	acme, err := srv.Tenants().CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := srv.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: "agent-platform", Trusted: true, UserMode: "header"})
	if err != nil {
		t.Fatal(err)
	}
	return &localEnv{t: t, srv: srv, acme: acme, caller: tok.Reveal()}
}

func (e *localEnv) install(slug, connector string, fields map[string]string) {
	e.t.Helper()
	req := tenants.InstallRequest{ConnectorID: connector, Agents: []string{"bot"}, Fields: map[string]*secrets.Secret{}}
	for k, v := range fields {
		s := secrets.New(v)
		req.Fields[k] = &s
	}
	if _, _, err := e.srv.Tenants().Install(context.Background(), "acme", slug, req); err != nil {
		e.t.Fatalf("install %s: %v", slug, err)
	}
}

func (e *localEnv) member(email string, settings map[string]map[string]string) string {
	e.t.Helper()
	ctx := context.Background()
	m, err := e.srv.Members().AddMember(ctx, members.ActorOperator, e.acme.ID, email, members.RoleMember)
	if err != nil {
		e.t.Fatal(err)
	}
	for instance, values := range settings {
		vals := map[string]*secrets.Secret{}
		for k, v := range values {
			s := secrets.New(v)
			vals[k] = &s
		}
		if _, err := e.srv.Tenants().SetUserSettings(ctx, "acme", instance, m.UserID, vals); err != nil {
			e.t.Fatal(err)
		}
	}
	return m.UserID
}

func (e *localEnv) session(instance, agent, user string) *mcp.ClientSession {
	return agentSession(e.t, e.srv.URL+"/workspaces/acme/webhooks/"+instance+".mcp",
		headerTransport{"Authorization": "Bearer " + e.caller, "X-Agent-Id": agent, "X-User-Id": user})
}

// call calls a tool and returns the result's JSON.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	out, _ := json.Marshal(res)
	return res, string(out)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestLocalEverything runs the npm server-everything over stdio as an
// mcp_local instance: its tools are listed and called through the same
// governance as other instances (an agent off the allowlist is refused),
// its process stops when idle and is relaunched, after a crash, only
// after a pause (backoff).
func TestLocalEverything(t *testing.T) {
	t.Parallel()
	script := npmServer(t, "@modelcontextprotocol/server-everything")
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newLocalEnv(t, db, mcplocal.Config{IdleTimeout: 2 * time.Second})
		e.install("everything", "everything", map[string]string{"SERVER_JS": script})
		u := e.member("ann@acme.test", nil)
		cs := e.session("everything", "bot", u)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tools.Tools, func(x *mcp.Tool) bool { return x.Name == "echo" }) {
			t.Fatalf("tools/list = %d tools, no echo", len(tools.Tools))
		}
		if res, out := call(t, cs, "echo", map[string]any{"message": "hello local"}); res.IsError || !strings.Contains(resultText(res), "hello local") {
			t.Fatalf("echo = %s", out)
		}
		// Resources and prompts are forwarded too.
		rl, err := cs.ListResources(context.Background(), nil)
		if err != nil || len(rl.Resources) == 0 {
			t.Fatalf("resources/list: %v", err)
		}
		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: rl.Resources[0].URI})
		if err != nil || len(rr.Contents) == 0 || rr.Contents[0].URI != rl.Resources[0].URI {
			t.Errorf("resources/read %s: %v", rl.Resources[0].URI, err)
		}
		pl, err := cs.ListPrompts(context.Background(), nil)
		if err != nil || len(pl.Prompts) == 0 {
			t.Fatalf("prompts/list: %v", err)
		}
		got := false
		for _, pr := range pl.Prompts {
			if slices.ContainsFunc(pr.Arguments, func(a *mcp.PromptArgument) bool { return a.Required }) {
				continue
			}
			gp, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: pr.Name})
			if err != nil || len(gp.Messages) == 0 {
				t.Errorf("prompts/get %s: %v", pr.Name, err)
			}
			got = true
			break
		}
		if !got {
			t.Error("no prompt without required arguments to get")
		}
		// Governance: an agent off the allowlist never reaches the server.
		client := mcp.NewClient(&mcp.Implementation{Name: "intruder", Version: "1"}, nil)
		_, err = client.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: e.srv.URL + "/workspaces/acme/webhooks/everything.mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + e.caller, "X-Agent-Id": "intruder", "X-User-Id": u}},
		}, nil)
		if err == nil || !strings.Contains(err.Error(), "agent_not_allowed") {
			t.Errorf("an agent off the allowlist: %v", err)
		}

		key := mcplocal.Key{Tenant: string(e.acme.ID), Instance: "everything"}
		pid := e.srv.Local().PID(key)
		if pid == 0 {
			t.Fatal("no running process after a call")
		}
		// A crash: the next launch waits for the backoff.
		syscall.Kill(pid, syscall.SIGKILL)
		waitFor(t, "the crash to be noticed", func() bool { return e.srv.Local().PID(key) == 0 })
		if res, out := call(t, cs, "echo", map[string]any{"message": "again"}); !res.IsError || !strings.Contains(out, "upstream_unavailable") {
			t.Errorf("a call right after the crash = %s, want the backoff's upstream_unavailable", out)
		}
		waitFor(t, "a relaunch after the backoff", func() bool {
			res, _ := call(t, cs, "echo", map[string]any{"message": "again"})
			return !res.IsError
		})
		if p := e.srv.Local().PID(key); p == 0 || p == pid {
			t.Errorf("after the relaunch: pid %d (was %d)", p, pid)
		}
		// Idle: the process stops on its own.
		waitFor(t, "the idle stop", func() bool { return len(e.srv.Local().Running()) == 0 })
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestLocalFilesystemIsolation runs the npm server-filesystem for two
// users, each scoped to their own directory (a user-scope field): each
// process is the user's own, A cannot read B's files, and B's values
// (directory and secret note) never reach A's process.
func TestLocalFilesystemIsolation(t *testing.T) {
	t.Parallel()
	script := npmServer(t, "@modelcontextprotocol/server-filesystem")
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newLocalEnv(t, db, mcplocal.Config{})
		e.install("files", "files", map[string]string{"SERVER_JS": script})
		dirA, dirB := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(dirA, "a.txt"), []byte("ann's file"), 0o644)
		os.WriteFile(filepath.Join(dirB, "b.txt"), []byte("bob's secret file"), 0o644)
		a := e.member("ann@acme.test", map[string]map[string]string{"files": {"ROOT": dirA, "NOTE": "ann-note-1111"}})
		b := e.member("bob@acme.test", map[string]map[string]string{"files": {"ROOT": dirB, "NOTE": "bob-note-2222"}})
		csA, csB := e.session("files", "bot", a), e.session("files", "bot", b)

		if res, out := call(t, csA, "read_text_file", map[string]any{"path": filepath.Join(dirA, "a.txt")}); res.IsError || !strings.Contains(out, "ann's file") {
			t.Fatalf("ann reads her file = %s", out)
		}
		if res, out := call(t, csB, "read_text_file", map[string]any{"path": filepath.Join(dirB, "b.txt")}); res.IsError || !strings.Contains(out, "bob's secret file") {
			t.Fatalf("bob reads his file = %s", out)
		}
		if res, out := call(t, csA, "read_text_file", map[string]any{"path": filepath.Join(dirB, "b.txt")}); !res.IsError || strings.Contains(out, "bob's secret file") {
			t.Errorf("ann reads bob's file = %s", out)
		}
		if res, out := call(t, csA, "list_allowed_directories", nil); strings.Contains(out, dirB) || res.IsError {
			t.Errorf("ann's allowed directories = %s", out)
		}
		pidA := e.srv.Local().PID(mcplocal.Key{Tenant: string(e.acme.ID), Instance: "files", User: a})
		pidB := e.srv.Local().PID(mcplocal.Key{Tenant: string(e.acme.ID), Instance: "files", User: b})
		if pidA == 0 || pidB == 0 || pidA == pidB {
			t.Fatalf("processes: ann %d, bob %d", pidA, pidB)
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pidA))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pidA))
		if !strings.Contains(string(environ), "USER_NOTE=ann-note-1111") {
			t.Errorf("ann's process lacks her note: %q", environ)
		}
		for _, v := range []string{dirB, "bob-note-2222"} {
			if strings.Contains(string(environ), v) || strings.Contains(string(cmdline), v) {
				t.Errorf("bob's value %q reached ann's process", v)
			}
		}
		if strings.Contains(string(cmdline), "ann-note-1111") {
			t.Errorf("a secret is in the command line: %q", cmdline)
		}
	})
}

// TestLocalUserSecret runs the package's own test server (shipped in the
// connector's package, verified against the index at launch) for users
// with their own secret token: each process receives its user's own
// value, and only the declared environment; a package file altered on
// disk is refused at the next launch.
func TestLocalUserSecret(t *testing.T) {
	t.Parallel()
	npmServer(t, "@modelcontextprotocol/server-everything") // node is needed
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newLocalEnv(t, db, mcplocal.Config{})
		e.install("secrettest", "secrettest", nil)
		tokens := map[string]string{}
		for _, name := range []string{"ann", "bob"} {
			tok := name + "-token-" + strings.Repeat("7", 8)
			tokens[e.member(name+"@acme.test", map[string]map[string]string{"secrettest": {"TOKEN": tok}})] = tok
		}
		cwds := map[string]bool{}
		for user, tok := range tokens {
			res, out := call(t, e.session("secrettest", "bot", user), "whoami", nil)
			var who struct {
				Sha string   `json:"token_sha256"`
				Env []string `json:"env"`
				Cwd string   `json:"cwd"`
			}
			if res.IsError || json.Unmarshal([]byte(resultText(res)), &who) != nil {
				t.Fatalf("whoami as %s = %s", user, out)
			}
			sum := sha256.Sum256([]byte(tok))
			if who.Sha != hex.EncodeToString(sum[:]) {
				t.Errorf("%s's process got another token", user)
			}
			if want := []string{"HOME", "MCP_WORK_DIR", "PATH", "PWD", "TMPDIR", "TOKEN"}; !slices.Equal(who.Env, want) {
				t.Errorf("environment names %v, want only %v", who.Env, want)
			}
			cwds[who.Cwd] = true
		}
		if len(cwds) != 2 {
			t.Errorf("working directories %v: want one per process", cwds)
		}

		// Removing a member stops their process (it holds their values).
		var gone string
		for user := range tokens {
			gone = user
			break
		}
		goneKey := mcplocal.Key{Tenant: string(e.acme.ID), Instance: "secrettest", User: gone}
		if e.srv.Local().PID(goneKey) == 0 {
			t.Fatal("no process for the member before the removal")
		}
		if err := e.srv.Members().RemoveMember(context.Background(), members.ActorOperator, e.acme.ID, gone); err != nil {
			t.Fatal(err)
		}
		if e.srv.Local().PID(goneKey) != 0 {
			t.Error("the removed member's process still runs")
		}
		delete(tokens, gone)

		// Tamper with the package on disk: the next launch refuses it.
		e.srv.Local().Stop(func(mcplocal.Key) bool { return true })
		files, _ := filepath.Glob(filepath.Join(e.srv.Local().PackageDir(), "secrettest-*", "server.js"))
		if len(files) != 1 {
			t.Fatalf("package files %v", files)
		}
		os.Chmod(files[0], 0o644)
		os.WriteFile(files[0], []byte("process.exit(0)\n"), 0o644)
		for user := range tokens {
			if res, out := call(t, e.session("secrettest", "bot", user), "whoami", nil); !res.IsError || !strings.Contains(out, "connector_integrity") {
				t.Errorf("launch from an altered package = %s", out)
			}
			break
		}
	})
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestLocalLimits: 50 users call at once within a per-tenant cap of 50
// (one process each), a 51st user's process takes the least recently
// used idle one's place; a server that hangs is killed at the call
// timeout with its process group (a child it started dies too); a
// server that prints 100 MB on stdout is cut and killed; a runtime the
// connector requires but the server lacks refuses the install.
func TestLocalLimits(t *testing.T) {
	t.Parallel()
	npmServer(t, "@modelcontextprotocol/server-everything") // node is needed
	db := dbtest.SQLite(t)
	// 15 s: fifty node processes starting at once on a loaded 2-core CI
	// machine took over 5 s to answer initialize.
	e := newLocalEnv(t, db, mcplocal.Config{PerTenant: 50, CallTimeout: 15 * time.Second})
	e.install("secrettest", "secrettest", nil)
	ctx := context.Background()
	users := make([]string, 51)
	for i := range users {
		users[i] = e.member(fmt.Sprintf("user%d@acme.test", i), map[string]map[string]string{"secrettest": {"TOKEN": fmt.Sprintf("token-%d", i)}})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for _, u := range users[:50] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := e.session("secrettest", "bot", u)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
			if err != nil || res.IsError {
				out, _ := json.Marshal(res)
				errs <- fmt.Sprintf("%v %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a call of the 50: %s", e)
	}
	if n := len(e.srv.Local().Running()); n != 50 {
		t.Errorf("%d processes for 50 users, want 50", n)
	}
	if res, out := call(t, e.session("secrettest", "bot", users[50]), "whoami", nil); res.IsError {
		t.Errorf("the 51st user = %s", out)
	}
	if n := len(e.srv.Local().Running()); n != 50 {
		t.Errorf("%d processes after the 51st user, want the cap 50", n)
	}

	// A hung server: killed at the timeout with the child it started.
	cs := e.session("secrettest", "bot", users[0])
	res, out := call(t, cs, "spawn", nil)
	var child struct{ PID int }
	if res.IsError || json.Unmarshal([]byte(resultText(res)), &child) != nil || child.PID == 0 {
		t.Fatalf("spawn = %s", out)
	}
	key := mcplocal.Key{Tenant: string(e.acme.ID), Instance: "secrettest", User: users[0]}
	server := e.srv.Local().PID(key)
	if !alive(child.PID) || !alive(server) {
		t.Fatalf("before the hang: server %d alive %v, child %d alive %v", server, alive(server), child.PID, alive(child.PID))
	}
	if res, out := call(t, cs, "hang", nil); !res.IsError || !strings.Contains(out, "upstream_unavailable") {
		t.Errorf("a hung call = %s", out)
	}
	waitFor(t, "the hung server and its child to die", func() bool { return !alive(server) && !alive(child.PID) })

	// 100 MB on stdout: the frame is cut, the server killed.
	res, out = call(t, cs, "flood", nil)
	if !res.IsError || !strings.Contains(out, "upstream_unavailable") {
		t.Errorf("a flood = %.300s", out)
	}
	flooder := e.srv.Local().PID(key)
	waitFor(t, "the flooding server to stop", func() bool { return flooder == 0 || !alive(flooder) || e.srv.Local().PID(key) != flooder })

	// A missing runtime refuses the install, naming it.
	e.srv.Tenants().SetLookPath(func(string) (string, error) { return "", exec.ErrNotFound })
	_, _, err := e.srv.Tenants().Install(ctx, "acme", "other", tenants.InstallRequest{ConnectorID: "secrettest", Agents: []string{"bot"}})
	if err == nil || !strings.Contains(err.Error(), "requirement_unmet") || !strings.Contains(err.Error(), "NODE") {
		t.Errorf("install without node: %v", err)
	}
}
