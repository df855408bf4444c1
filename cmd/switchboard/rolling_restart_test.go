package main

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// The catalog of the three-replica test: the oauth connector of the
// two-process test, and "notes", an API-key connector whose one operation
// names the call (GET /notes/{n}), so that every call of the load is
// matched with its upstream hit and its audit row.
var threeReplicaCatalog = func() map[string]string {
	files := map[string]string{
		"notes/connector.json": `{
  "id": "notes", "name": "Notes", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"],
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization",
           "format": "Bearer {SECRET:NOTES_TOKEN}", "field": "NOTES_TOKEN"},
  "docs": {"llm_short_description": "Notes."},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "NOTES_TOKEN", "label": "Token", "required": true, "secret": true}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
		"notes/openapi.json": `{"openapi": "3.0.3", "info": {"title": "Notes", "version": "1"},
  "paths": {"/notes/{n}": {"get": {"operationId": "getNote", "x-entity": "note", "x-action": "get", "summary": "One note",
     "parameters": [{"name": "n", "in": "path", "required": true, "schema": {"type": "string"}}],
     "responses": {"200": {"description": "ok"}}}}}}`,
	}
	for k, v := range replicaCatalog {
		files[k] = v
	}
	return files
}()

// front is a loopback load balancer: round robin over the replicas whose
// /readyz answered 200 at its last health check (every 50 ms), as a
// Kubernetes Service or the compose file's nginx does. An error reaching a
// replica is answered 502 by the front itself: an untyped failure.
type front struct {
	*httptest.Server
	mu       sync.Mutex
	backends []string        // every replica, in order
	ready    map[string]bool // by the last health check
	next     int
	checks   chan struct{}
}

func newFront(t *testing.T) *front {
	f := &front{ready: map[string]bool{}, checks: make(chan struct{})}
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(pr.In.Header.Get("X-Front-Backend"))
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "front: %v", err)
		},
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := f.pick()
		if b == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "front: no ready replica")
			return
		}
		r.Header.Set("X-Front-Backend", b)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	go func() {
		check := &http.Client{Timeout: time.Second}
		for {
			select {
			case <-f.checks:
				return
			case <-time.After(50 * time.Millisecond):
			}
			f.mu.Lock()
			list := append([]string(nil), f.backends...)
			f.mu.Unlock()
			for _, b := range list {
				ok := false
				if resp, err := check.Get(b + "/readyz"); err == nil {
					ok = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
				f.mu.Lock()
				f.ready[b] = ok
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(f.checks) })
	return f
}

func (f *front) pick() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range f.backends {
		b := f.backends[f.next%len(f.backends)]
		f.next++
		if f.ready[b] {
			return b
		}
	}
	return ""
}

// replace puts newURL in oldURL's place (or adds it when oldURL is empty);
// the health check puts it in rotation once its /readyz answers 200.
func (f *front) replace(oldURL, newURL string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ready, oldURL)
	for i, b := range f.backends {
		if b == oldURL {
			f.backends[i] = newURL
			return
		}
	}
	f.backends = append(f.backends, newURL)
}

// threeReplicas is three `switchboard serve` processes on one PostgreSQL
// database behind a front, with the test catalog, an authorization server
// (fosite) and the two connectors' upstreams.
type threeReplicas struct {
	bin, dsn string
	env      []string
	common   []string
	front    *front
	replicas []*replica
	dirs     []string
	as       *authztest.Server
	token    string // the agent platform's caller token

	mu   sync.Mutex
	hits map[int]int // GET /notes/{n} at the notes upstream, by n
}

// startThreeReplicas starts them, each with the common flags and extra.
func startThreeReplicas(t *testing.T, extra ...string) *threeReplicas {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the binary and starts three server processes")
	}
	r := &threeReplicas{bin: switchboardBinary(t), dsn: dbtest.PostgresURL(t), hits: map[int]int{}}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	r.env = append(os.Environ(), "SWITCHBOARD_MASTER_KEY="+key, "SWITCHBOARD_ADMIN_TOKEN="+operatorToken, "SWITCHBOARD_DATABASE_URL="+r.dsn)
	migrate := exec.Command(r.bin, "migrate")
	migrate.Env = r.env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	r.as = authztest.New(t, authztest.Options{})
	crm := httptest.NewServer(meUpstream(r.as))
	t.Cleanup(crm.Close)
	notes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/notes/"))
		if err != nil || req.Header.Get("Authorization") != "Bearer notes-key" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		r.mu.Lock()
		r.hits[n]++
		r.mu.Unlock()
		// A little latency, so that calls are in flight at every moment.
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n": %d}`, n)
	}))
	t.Cleanup(notes.Close)

	r.front = newFront(t)
	// Every replica announces the front as its public URL (OAuth redirect
	// URIs are built from it), and drains like the compose file's.
	r.common = []string{"--catalog", registrytest.Write(t, threeReplicaCatalog), "--allow-upstream-cidrs", "127.0.0.1/32",
		"--public-url", r.front.URL, "--shutdown-delay", "1500ms", "--shutdown-timeout", "15s"}
	r.common = append(r.common, extra...)
	for range 3 {
		dir := t.TempDir()
		rep := startReplica(t, r.bin, r.env, append([]string{"--data-dir", dir}, r.common...)...)
		r.dirs = append(r.dirs, dir)
		r.replicas = append(r.replicas, rep)
		r.front.replace("", rep.url)
	}

	r.admin(t, 0, "POST", "/v1/tenants", `{"slug": "acme"}`)
	redirect := r.front.URL + "/workspaces/acme/webhooks/crm/oauth/callback"
	r.as.AddClient(authztest.Client{ID: "crm-app", Secret: "crm-secret", RedirectURIs: []string{redirect}, Scopes: []string{"contacts.read"}})
	r.admin(t, 0, "PUT", "/v1/tenants/acme/instances/crm", fmt.Sprintf(`{"connector_id": "crm", "auth_mode": "oauth", "agents": ["bot"],
		"fields": {"API_URL": %q, "CLIENT_ID": "crm-app", "CLIENT_SECRET": "crm-secret",
		"AUTHORIZE_URL": %q, "TOKEN_URL": %q, "REVOKE_URL": %q}}`, crm.URL, r.as.AuthorizeURL(), r.as.TokenURL(), r.as.RevokeURL()))
	r.admin(t, 1, "PUT", "/v1/tenants/acme/instances/notes", fmt.Sprintf(`{"connector_id": "notes", "auth_mode": "apiKey", "agents": ["bot"],
		"fields": {"API_URL": %q, "NOTES_TOKEN": "notes-key"}}`, notes.URL))
	r.token, _ = r.admin(t, 2, "POST", "/v1/tenants/acme/callers",
		`{"name": "platform", "kind": "agent-platform", "trusted": true, "user_mode": "header", "external_subjects": ["alice", "u*"]}`)["token"].(string)
	return r
}

// admin sends an operator request to replica i.
func (r *threeReplicas) admin(t *testing.T, i int, method, path, body string) map[string]any {
	t.Helper()
	return operatorRequest(t, r.replicas[i].url, method, path, body)
}

// call sends one tools/call to base (a replica or the front) and returns
// the HTTP status and body.
func (r *threeReplicas) call(client *http.Client, base, instance, agent, user, tool, args string) (int, string, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	req, _ := http.NewRequest("POST", base+"/workspaces/acme/webhooks/"+instance+".mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + r.token, "X-Agent-Id": agent, "X-User-Id": user,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"} {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), err
}

func (r *threeReplicas) logs() string {
	var b strings.Builder
	for i, rep := range r.replicas {
		fmt.Fprintf(&b, "--- replica %d:\n%.4000s\n", i, rep.logs.String())
	}
	return b.String()
}

// Three server processes on one PostgreSQL database, behind a loopback
// round-robin front that health-checks /readyz.
func TestThreeReplicas(t *testing.T) {
	t.Parallel()
	r := startThreeReplicas(t)

	// An OAuth flow started on replica 0 (connect: the state and the
	// browser binding are written) and finished on replica 1 (callback:
	// the code is exchanged with the state read from the store); the grant
	// then serves alice's calls on replica 2.
	t.Run("OAuthFlowAcrossReplicas", func(t *testing.T) {
		served := map[string]int{}
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			if strings.HasPrefix(req.URL.String(), r.as.URL) {
				req.Header.Set(authztest.LoginHeader, "alice")
				return http.DefaultTransport.RoundTrip(req)
			}
			req.Header.Set("Authorization", "Bearer "+r.token)
			req.Header.Set("X-User-Id", "alice")
			// The front's address stays in Host (as a proxy keeps it);
			// the step goes to the chosen replica.
			to := r.replicas[0]
			if strings.HasSuffix(req.URL.Path, "/oauth/callback") {
				to = r.replicas[1]
			}
			served[req.URL.Path+" on "+to.url]++
			u, _ := url.Parse(to.url)
			req.URL.Host = u.Host
			return http.DefaultTransport.RoundTrip(req)
		})}
		resp, err := browser.Get(r.front.URL + "/workspaces/acme/webhooks/crm/oauth/connect?redirect=1")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "Connected") {
			t.Fatalf("connect on replica 0, callback on replica 1 = %d %s\n%v\n%s", resp.StatusCode, page, served, r.logs())
		}
		if served["/workspaces/acme/webhooks/crm/oauth/connect on "+r.replicas[0].url] != 1 ||
			served["/workspaces/acme/webhooks/crm/oauth/callback on "+r.replicas[1].url] != 1 {
			t.Fatalf("the flow's steps were served by %v", served)
		}
		if n := r.as.TokenRequests("authorization_code"); n != 1 {
			t.Errorf("code exchanges at the authorization server = %d, want 1", n)
		}
		status, out, err := r.call(http.DefaultClient, r.replicas[2].url, "crm", "bot", "alice", "me", `{"action":"get"}`)
		if err != nil || status != 200 || !strings.Contains(out, `\"user\": \"alice\"`) || strings.Contains(out, `"isError":true`) {
			t.Fatalf("alice's call on replica 2 = %d %s %v", status, out, err)
		}
	})

	// The notes instance's allowlist changed through replica 0's API
	// (PATCH agents ["bot"] → ["bot2"]) is enforced by all three replicas,
	// whose caches all held the instance, within 1 s of the PATCH's
	// answer: bot refused (agent_not_allowed), bot2 served.
	t.Run("AllowlistChangeEverywhereWithin1s", func(t *testing.T) {
		allowed := func(i int, agent string) (bool, string) {
			status, out, err := r.call(http.DefaultClient, r.replicas[i].url, "notes", agent, "u0", "note", `{"action":"get","n":"0"}`)
			switch {
			case err == nil && status == 200 && strings.Contains(out, `\"n\": 0`) && !strings.Contains(out, `"isError":true`):
				return true, out
			case err == nil && strings.Contains(out, "agent_not_allowed"):
				return false, out
			}
			t.Fatalf("replica %d, agent %s: %d %s %v", i, agent, status, out, err)
			return false, ""
		}
		for i := range r.replicas {
			if ok, out := allowed(i, "bot"); !ok {
				t.Fatalf("before the change, replica %d refuses bot: %s", i, out)
			}
			if ok, out := allowed(i, "bot2"); ok {
				t.Fatalf("before the change, replica %d serves bot2: %s", i, out)
			}
		}
		r.admin(t, 0, "PATCH", "/v1/tenants/acme/instances/notes", `{"agents": ["bot2"]}`)
		changed := time.Now()
		var worst time.Duration
		for i := range r.replicas {
			for {
				botOK, _ := allowed(i, "bot")
				bot2OK, _ := allowed(i, "bot2")
				if !botOK && bot2OK {
					worst = max(worst, time.Since(changed))
					break
				}
				if time.Since(changed) > time.Second {
					t.Fatalf("replica %d still enforces the old allowlist 1 s after the change (bot served %v, bot2 served %v)\n%s",
						i, botOK, bot2OK, r.logs())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		t.Logf("the allowlist change was enforced by all three replicas %v after the PATCH answered", worst.Round(time.Millisecond))
		// Back to bot, and every replica has heard it before the next
		// subtest's load starts (CI caught its first calls refused).
		r.admin(t, 0, "PATCH", "/v1/tenants/acme/instances/notes", `{"agents": ["bot"]}`)
		restored := time.Now()
		for i := range r.replicas {
			for {
				if ok, _ := allowed(i, "bot"); ok {
					break
				}
				if time.Since(restored) > 5*time.Second {
					t.Fatalf("replica %d still refuses bot 5 s after the allowlist was restored\n%s", i, r.logs())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})

	// A rolling restart under continuous load through the front: each
	// replica in turn gets SIGTERM (its /readyz answers 503 for the
	// 1.5 s shutdown delay while it still serves, so the front takes it
	// out; then it drains) and is started again (a new address, put in
	// rotation once ready). Eight agents call notes through the front the
	// whole time.
	//
	// What the test requires: every call succeeds. The client retries only
	// a typed retryable refusal (an answer with retryAfterMs, such as
	// shutting_down or store_unavailable), at most 5 times; the front's
	// 502 (a replica unreachable), a transport error or any other error
	// fails the test. With the readiness drain no call needs a retry (the
	// number of retries is logged). And no audit row is lost: the notes
	// upstream saw each call exactly once, and audit_log holds exactly one
	// "ok" row per call (actor u<n>), no more, no fewer.
	t.Run("RollingRestartUnderLoad", func(t *testing.T) {
		const workers = 8
		client := &http.Client{Timeout: 30 * time.Second}
		var (
			next, succeeded, retries atomic.Int64
			mu                       sync.Mutex
			failures                 []string
			stop                     atomic.Bool
			wg                       sync.WaitGroup
		)
		retryable := regexp.MustCompile(`"retryAfterMs":\s*(\d+)`)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					n := int(next.Add(1))
					for attempt := 1; ; attempt++ {
						status, out, err := r.call(client, r.front.URL, "notes", "bot", fmt.Sprintf("u%d", n), "note",
							fmt.Sprintf(`{"action":"get","n":"%d"}`, n))
						if err == nil && status == 200 && strings.Contains(out, fmt.Sprintf(`\"n\": %d`, n)) && !strings.Contains(out, `"isError":true`) {
							succeeded.Add(1)
							break
						}
						if m := retryable.FindStringSubmatch(out); err == nil && m != nil && attempt < 5 {
							retries.Add(1)
							ms, _ := strconv.Atoi(m[1])
							time.Sleep(time.Duration(min(ms, 1000)) * time.Millisecond)
							continue
						}
						mu.Lock()
						failures = append(failures, fmt.Sprintf("call %d attempt %d: %d %.300s %v", n, attempt, status, out, err))
						mu.Unlock()
						break
					}
				}
			}()
		}
		var phases []string
		mark := func(what string) {
			phases = append(phases, fmt.Sprintf("%s at call %d (%d ok)", what, next.Load(), succeeded.Load()))
		}
		time.Sleep(time.Second)
		mark("load running")
		for i := range r.replicas {
			old := r.replicas[i]
			if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			mark(fmt.Sprintf("SIGTERM to replica %d", i))
			_ = old.cmd.Wait()
			if code := old.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("replica %d exited with %d after SIGTERM:\n%.3000s", i, code, old.logs.String())
			}
			mark(fmt.Sprintf("replica %d exited", i))
			r.replicas[i] = startReplica(t, r.bin, r.env, append([]string{"--data-dir", r.dirs[i]}, r.common...)...)
			r.front.replace(old.url, r.replicas[i].url)
			mark(fmt.Sprintf("replica %d restarted", i))
			time.Sleep(500 * time.Millisecond)
		}
		time.Sleep(time.Second)
		stop.Store(true)
		wg.Wait()
		calls := int(next.Load())
		t.Logf("calls %d, succeeded %d, retries %d, failures %d; %s", calls, succeeded.Load(), retries.Load(), len(failures), strings.Join(phases, ", "))
		if len(failures) > 0 {
			t.Fatalf("%d calls failed (e.g. %s)\n%s", len(failures), strings.Join(failures[:min(len(failures), 5)], "\n"), r.logs())
		}
		if calls < 100 {
			t.Fatalf("only %d calls during the rolling restart", calls)
		}

		// Every call reached the upstream once and has exactly one audit
		// row. Rows are written asynchronously (journal, buffer, then the
		// store): wait for them.
		db, err := sql.Open("pgx", r.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var rows, distinct, others int
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			err := db.QueryRow(`SELECT count(*) FILTER (WHERE outcome = 'ok'), count(DISTINCT actor) FILTER (WHERE outcome = 'ok'),
				count(*) FILTER (WHERE outcome <> 'ok') FROM audit_log WHERE instance = 'notes' AND actor LIKE 'u%' AND actor <> 'u0'`).Scan(&rows, &distinct, &others)
			if err != nil {
				t.Fatal(err)
			}
			if rows >= calls || time.Now().After(deadline) {
				break
			}
		}
		r.mu.Lock()
		hitOnce := 0
		for n := 1; n <= calls; n++ {
			if r.hits[n] == 1 {
				hitOnce++
			}
		}
		r.mu.Unlock()
		t.Logf("audit rows: %d ok (%d distinct calls), %d not ok; upstream saw %d of %d calls exactly once", rows, distinct, others, hitOnce, calls)
		if hitOnce != calls {
			t.Errorf("the upstream saw %d of %d calls exactly once", hitOnce, calls)
		}
		if rows != calls || distinct != calls {
			t.Errorf("audit rows = %d ok rows for %d distinct calls, want exactly one per call (%d)\n%s", rows, distinct, calls, r.logs())
		}
	})
}
