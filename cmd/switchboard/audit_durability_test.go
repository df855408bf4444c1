package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// auditRig is a built switchboard binary on a private Postgres cluster, an
// installed GitHub instance whose API is a loopback upstream that notes
// which calls reached it, and agents calling it steadily. Each call asks
// for repository r<n> as user u<n>, so that a call that reached the
// upstream (r<n>) is matched with its audit row (actor u<n>).
type auditRig struct {
	pg     *dbtest.PostgresServer
	bin    string
	env    []string
	common []string
	token  string

	mu  sync.Mutex
	hit map[int]bool // n of every call the upstream saw
	// answered counts the calls an agent got a success for.
	answered atomic.Int64
	next     atomic.Int64
	// sqliteDir, when set, is the one data directory of the embedded
	// store (the store lives in it); else the rig runs on Postgres.
	sqliteDir string
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// switchboardBinary builds the command once per test run.
func switchboardBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "switchboard")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var repoPath = regexp.MustCompile(`^/repos/o/r(\d+)$`)

func newAuditRig(t *testing.T) *auditRig { return newAuditRigOn(t, "") }

// newAuditRigOn is newAuditRig on the embedded SQLite store in sqliteDir,
// or on a private Postgres cluster when sqliteDir is empty.
func newAuditRigOn(t *testing.T, sqliteDir string) *auditRig {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and starts server processes and a Postgres cluster")
	}
	r := &auditRig{bin: switchboardBinary(t), hit: map[int]bool{}, sqliteDir: sqliteDir}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	r.env = append(os.Environ(), "SWITCHBOARD_MASTER_KEY="+key, "SWITCHBOARD_ADMIN_TOKEN="+operatorToken)
	migrate := exec.Command(r.bin, "migrate")
	if sqliteDir == "" {
		r.pg = dbtest.StartPostgres(t)
		r.env = append(r.env, "SWITCHBOARD_DATABASE_URL="+r.pg.URL())
	} else {
		migrate.Args = append(migrate.Args, "--data-dir", sqliteDir)
	}
	migrate.Env = r.env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		m := repoPath.FindStringSubmatch(req.URL.Path)
		if m == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		n, _ := strconv.Atoi(m[1])
		r.mu.Lock()
		r.hit[n] = true
		r.mu.Unlock()
		// A little latency, so that calls are in flight at any moment.
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %d, "name": "r%d", "full_name": "o/r%d", "private": false}`, n, n, n)
	}))
	t.Cleanup(up.Close)
	r.common = []string{"--allow-upstream-cidrs", "127.0.0.1/32"}
	setupDir := sqliteDir
	if setupDir == "" {
		setupDir = t.TempDir()
	}
	a := r.start(t, setupDir)
	admin := func(method, path, body string) map[string]any { return operatorRequest(t, a.url, method, path, body) }
	admin("POST", "/v1/tenants", `{"slug": "acme"}`)
	admin("PUT", "/v1/tenants/acme/instances/gh", fmt.Sprintf(`{"connector_id": "github", "auth_mode": "apiKey",
		"agents": ["bot"], "fields": {"GITHUB_TOKEN": "k", "GITHUB_API_URL": %q}}`, up.URL))
	r.token, _ = admin("POST", "/v1/tenants/acme/callers", `{"name": "platform", "kind": "agent-platform", "trusted": true, "user_mode": "header", "external_subjects": ["u*"]}`)["token"].(string)
	a.cmd.Process.Signal(os.Interrupt)
	a.cmd.Wait()
	return r
}

// start starts a `switchboard serve` process with its own data directory
// (and so its own audit spool).
func (r *auditRig) start(t *testing.T, dataDir string, args ...string) *replica {
	t.Helper()
	return startReplica(t, r.bin, r.env, append(append([]string{"--data-dir", dataDir}, r.common...), args...)...)
}

// userHeader names the user of each tools/call after its repository, so
// that the audit row (actor) can be matched with the upstream hit.
type userHeader struct{ token string }

var repoArg = regexp.MustCompile(`"repo":"r(\d+)"`)

func (u userHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("X-Agent-Id", "bot")
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		if m := repoArg.FindSubmatch(body); m != nil {
			req.Header.Set("X-User-Id", "u"+string(m[1]))
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return http.DefaultTransport.RoundTrip(req)
}

// load runs `workers` agents per replica, each an SDK client calling
// tools/call in a loop (reconnecting after a failure), until ctx is done.
func (r *auditRig) load(ctx context.Context, urls func() []string, workers int) (wait func()) {
	var wg sync.WaitGroup
	for i := range len(urls()) * workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs *mcp.ClientSession
			defer func() {
				if cs != nil {
					cs.Close()
				}
			}()
			for ctx.Err() == nil {
				if cs == nil {
					client := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1.0.0"}, nil)
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					var err error
					cs, err = client.Connect(cctx, &mcp.StreamableClientTransport{
						Endpoint:   urls()[i%len(urls())] + "/workspaces/acme/webhooks/gh.mcp",
						HTTPClient: &http.Client{Transport: userHeader{r.token}}, MaxRetries: -1,
					}, nil)
					cancel()
					if err != nil {
						cs = nil
						time.Sleep(20 * time.Millisecond)
						continue
					}
				}
				n := r.next.Add(1)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "repositories",
					Arguments: map[string]any{"action": "get", "owner": "o", "repo": fmt.Sprintf("r%d", n)}})
				cancel()
				if err == nil && !res.IsError {
					r.answered.Add(1)
				}
				if err != nil {
					cs.Close()
					cs = nil
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return wg.Wait
}

// missing returns the calls that reached the upstream and have no audit
// row, waiting up to d for spools to drain.
func (r *auditRig) missing(t *testing.T, d time.Duration) (missing []int, hits, rows int) {
	t.Helper()
	db, err := sql.Open("pgx", r.pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r.mu.Lock()
	hit := make([]int, 0, len(r.hit))
	for n := range r.hit {
		hit = append(hit, n)
	}
	r.mu.Unlock()
	for deadline := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
		audited := map[int]bool{}
		q, err := db.Query(`SELECT actor FROM audit_log WHERE tool = 'repositories'`)
		if err == nil {
			for q.Next() {
				var actor string
				if q.Scan(&actor) == nil {
					n, _ := strconv.Atoi(strings.TrimPrefix(actor, "u"))
					audited[n] = true
				}
			}
			q.Close()
		}
		missing = missing[:0]
		for _, n := range hit {
			if !audited[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing, len(hit), len(audited)
		}
	}
}

// Two replicas under steady load; Postgres stopped for 4 s, then started:
// every call that reached the upstream has its audit row.
func TestAuditSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	r := newAuditRig(t)
	a := r.start(t, t.TempDir())
	b := r.start(t, t.TempDir())
	ctx, stop := context.WithCancel(context.Background())
	wait := r.load(ctx, func() []string { return []string{a.url, b.url} }, 3)
	time.Sleep(time.Second)
	r.pg.Stop()
	outage := time.Now()
	time.Sleep(4 * time.Second)
	atOutageEnd := r.next.Load()
	r.pg.Start()
	t.Logf("Postgres was down %v", time.Since(outage).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	stop()
	wait()
	missing, hits, rows := r.missing(t, 30*time.Second)
	t.Logf("calls %d (%d by the end of the outage), answered %d, upstream hits %d, audited %d, missing %d",
		r.next.Load(), atOutageEnd, r.answered.Load(), hits, rows, len(missing))
	if hits == 0 || r.answered.Load() == 0 {
		t.Fatal("the load reached nothing")
	}
	if len(missing) > 0 {
		t.Fatalf("%d calls reached the upstream without an audit row (e.g. %v)\nA: %.3000s\nB: %.3000s",
			len(missing), missing[:min(len(missing), 10)], a.logs.String(), b.logs.String())
	}
}

// SIGTERM with a 1 ms drain budget under load, then a restart: every call
// that reached the upstream has its audit row. Twice: with the store up
// (rows are written on the way out), and with the store down (rows are
// spooled, and the restarted process drains the spool).
func TestAuditSurvivesAbruptShutdown(t *testing.T) {
	t.Parallel()
	r := newAuditRig(t)
	dirA := t.TempDir()
	a := r.start(t, dirA, "--shutdown-timeout", "1ms")
	b := r.start(t, t.TempDir())
	var mu sync.Mutex
	urls := []string{a.url, b.url}
	current := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return urls
	}
	ctx, stop := context.WithCancel(context.Background())
	wait := r.load(ctx, current, 3)
	var phases []string
	mark := func(what string) { phases = append(phases, fmt.Sprintf("%s at call %d", what, r.next.Load())) }
	term := func() {
		time.Sleep(time.Second)
		mark("SIGTERM")
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = a.cmd.Wait()
		mark("exited")
	}
	restart := func() {
		a = r.start(t, dirA, "--shutdown-timeout", "1ms")
		mark("restarted")
		mu.Lock()
		urls = []string{a.url, b.url}
		mu.Unlock()
	}
	term()
	restart()
	time.Sleep(time.Second) // the new process warms its caches

	r.pg.Stop()
	term()
	spooled, _ := filepath.Glob(filepath.Join(dirA, "audit-spool", "*.jsonl"))
	r.pg.Start()
	restart()
	time.Sleep(time.Second)
	stop()
	wait()
	missing, hits, rows := r.missing(t, 30*time.Second)
	t.Logf("calls %d, answered %d, upstream hits %d, audited %d, missing %d, spool segments after the second SIGTERM %d",
		r.next.Load(), r.answered.Load(), hits, rows, len(missing), len(spooled))
	if len(missing) > 0 {
		t.Fatalf("%d calls reached the upstream without an audit row (e.g. %v); %s\nA: %s\nB: %s",
			len(missing), missing[:min(len(missing), 10)], strings.Join(phases, ", "), a.logs.String(), b.logs.String())
	}
	if len(spooled) == 0 {
		t.Errorf("SIGTERM with the store down left no spool segment in %s\nA: %.3000s", filepath.Join(dirA, "audit-spool"), a.logs.String())
	}
}
