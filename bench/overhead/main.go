// Command overhead measures what Switchboard adds to an upstream call.
//
// It builds and starts the real server (switchboard serve, embedded store
// or -postgres, a fresh data directory), starts a no-op upstream on
// loopback, installs a GitHub-connector instance pointed at it (apiKey
// mode, audit on), and then, in alternating rounds within one run, calls
// three contenders with the same load generator:
//
//   - direct: the upstream itself;
//   - forwarder: a naive forwarder (echo, one shared http.Client, no auth,
//     no JSON-RPC) in its own process, which is what any proxy costs;
//   - switchboard: tools/call through the server.
//
// It reports throughput at -clients concurrent clients (median of rounds),
// p50 / p99 latency at one client, each process's CPU per call, and the
// ratios against the goals with a pass/fail mark. With -gate R it
// exits 1 when Switchboard's throughput is below R times the forwarder's
// (CI uses a margin below the goal to absorb noise).
//
// With -oauth the instance authenticates upstream with a cached OAuth
// token (clientCredentials) from a token endpoint in the upstream's
// process instead of an API key.
//
// With -compare-bin and/or -compare-env a second Switchboard server
// (another build, or the same one with other settings such as
// GOMAXPROCS=1) is a fourth contender, switchboard-b, in the same
// alternating rounds: a before/after comparison under the same load.
//
//	go run ./bench/overhead [-rounds 6] [-duration 2s] [-clients 16] [-postgres] [-oauth] [-gate 0.8] [-compare-bin B] [-compare-env K=V,...]
//
// Only loopback is used.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/bench/rig"
	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/registry"
)

func main() {
	rounds := flag.Int("rounds", 6, "alternating rounds of each measurement")
	duration := flag.Duration("duration", 2*time.Second, "length of one throughput round")
	latencyN := flag.Int("latency-calls", 3000, "calls per latency round at one client")
	clients := flag.Int("clients", 16, "concurrent clients for throughput")
	bin := flag.String("bin", "", "switchboard binary (default: go build it)")
	profile := flag.String("server-profile", "", "write a CPU profile of the server, taken during one extra throughput round, to this file")
	profileClients := flag.Int("profile-clients", 0, "clients of the profiled round (default: -clients; 1 profiles the one-client latency path)")
	postgres := flag.Bool("postgres", false, "use a fresh PostgreSQL database (at SWITCHBOARD_TEST_DATABASE_URL or 127.0.0.1:5432) as the store")
	oauth := flag.Bool("oauth", false, "the instance authenticates upstream with a cached OAuth token (clientCredentials against a loopback token endpoint) instead of an API key")
	gate := flag.Float64("gate", 0, "exit 1 when Switchboard's throughput is below this fraction of the forwarder's (0: report only)")
	compareBin := flag.String("compare-bin", "", "a second switchboard binary, measured as a fourth contender (switchboard-b) in the same alternating rounds: a before/after comparison in one run")
	compareEnv := flag.String("compare-env", "", "comma-separated KEY=VALUE settings of switchboard-b's environment (with -compare-bin, or alone to run the same binary with them, e.g. GOMAXPROCS=1)")
	serveUpstream := flag.String("serve-upstream", "", "internal: serve the no-op upstream on this loopback address and nothing else")
	serveForwarder := flag.String("serve-forwarder", "", "internal: serve the naive forwarder on this loopback address")
	forwardTo := flag.String("forward-to", "", "internal: the forwarder's upstream URL")
	flag.Parse()
	if *serveUpstream != "" {
		if err := http.ListenAndServe(*serveUpstream, noop); err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		return
	}
	if *serveForwarder != "" {
		if err := runForwarder(*serveForwarder, *forwardTo); err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		return
	}
	if *profileClients <= 0 {
		*profileClients = *clients
	}
	var compare *variant
	if *compareBin != "" || *compareEnv != "" {
		compare = &variant{bin: *compareBin}
		if *compareEnv != "" {
			compare.env = strings.Split(*compareEnv, ",")
		}
	}
	ok, err := run(*rounds, *duration, *latencyN, *clients, *bin, *profile, *profileClients, *postgres, *oauth, *gate, compare)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "overhead: FAIL: Switchboard's throughput is below %.2f of the forwarder's\n", *gate)
		os.Exit(1)
	}
}

// variant is a second Switchboard server measured beside the first: its
// binary ("" for the same one) and extra environment.
type variant struct {
	bin string
	env []string
}

func run(rounds int, dur time.Duration, latencyN, clients int, bin, profile string, profileClients int, postgres, oauth bool, gate float64, compare *variant) (bool, error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "switchboard")
		build := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return false, fmt.Errorf("building: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	// The upstream and the forwarder run in their own processes (this
	// program, re-executed), so that every contender crosses processes,
	// as in production; only the hop in between differs.
	upAddr, err := rig.LoopbackAddr()
	if err != nil {
		return false, err
	}
	up, err := startSelf(self, "-serve-upstream", upAddr)
	if err != nil {
		return false, err
	}
	defer stop(up)
	upstreamURL := "http://" + upAddr
	if err := waitUp(upstreamURL + "/repos/octo/hello"); err != nil {
		return false, err
	}
	fwdAddr, err := rig.LoopbackAddr()
	if err != nil {
		return false, err
	}
	fwd, err := startSelf(self, "-serve-forwarder", fwdAddr, "-forward-to", upstreamURL)
	if err != nil {
		return false, err
	}
	defer stop(fwd)
	if err := waitUp("http://" + fwdAddr + "/"); err != nil {
		return false, err
	}

	debugAddr := ""
	if profile != "" {
		if debugAddr, err = rig.LoopbackAddr(); err != nil {
			return false, err
		}
	}
	mode := "apiKey"
	catDir := ""
	if oauth {
		// The built-in GitHub connector with the clientCredentials mode
		// added: the server fetches a token from the upstream process's
		// token endpoint once, then calls with the cached token.
		catDir = filepath.Join(dir, "catalog")
		if err := oauthCatalog(catDir); err != nil {
			return false, err
		}
		mode = "clientCredentials (cached OAuth token)"
	}
	store := "sqlite (embedded)"
	if postgres {
		store = "postgres"
	}
	srv, err := startServer(bin, filepath.Join(dir, "data"), nil, serverSetup{upstreamURL: upstreamURL, debugAddr: debugAddr,
		catalog: catDir, postgres: postgres, oauth: oauth})
	defer srv.stop()
	if err != nil {
		return false, err
	}
	base, token := srv.base, srv.token
	mcpURL := base + "/workspaces/bench/webhooks/gh.mcp"
	callBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"get","owner":"octo","repo":"hello"}}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	// Every contender gets the same request (the forwarder and the
	// upstream ignore what they do not need), so that the load generator's
	// own cost is the same for all three.
	post := func(url, token, want string) func() error {
		return func() error {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(callBody))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Agent-Id", "bench-agent")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			return do(client, req, want)
		}
	}
	cs := []*contender{
		{name: "direct", call: post(upstreamURL+"/repos/octo/hello", token, `"full_name"`)},
		{name: "forwarder", call: post("http://"+fwdAddr+"/repos/octo/hello", token, `"full_name"`), pid: fwd.Process.Pid},
		{name: "switchboard", call: post(mcpURL, token, `"full_name"`), pid: srv.cmd.Process.Pid, db: srv.dbName},
	}
	if compare != nil {
		b := compare.bin
		if b == "" {
			b = bin
		}
		srvB, err := startServer(b, filepath.Join(dir, "data-b"), compare.env, serverSetup{upstreamURL: upstreamURL,
			catalog: catDir, postgres: postgres, oauth: oauth})
		defer srvB.stop()
		if err != nil {
			return false, fmt.Errorf("switchboard-b: %w", err)
		}
		cs = append(cs, &contender{name: "switchboard-b", call: post(srvB.base+"/workspaces/bench/webhooks/gh.mcp", srvB.token, `"full_name"`),
			pid: srvB.cmd.Process.Pid, db: srvB.dbName})
		fmt.Printf("switchboard-b: %s %s\n", b, strings.Join(compare.env, " "))
	}
	// Warm up every path (caches, connections), and check the calls work.
	for i := 0; i < 200; i++ {
		for _, c := range cs {
			if err := c.call(); err != nil {
				return false, fmt.Errorf("warm-up %s: %w", c.name, err)
			}
		}
	}

	for r := 0; r < rounds; r++ {
		for _, c := range cs {
			up0, own0 := rig.CPUTime(up.Process.Pid), rig.CPUTime(c.pid)
			var db0 map[int]time.Duration
			if c.db != "" {
				db0 = rig.DatabaseCPU(c.db)
			}
			n, rate := throughput(c.call, clients, dur)
			if c.db != "" {
				c.dbCPU += rig.DatabaseCPUSince(db0, rig.DatabaseCPU(c.db))
			}
			c.thr = append(c.thr, rate)
			c.calls += n
			c.upCPU += rig.CPUTime(up.Process.Pid) - up0
			if c.pid != 0 {
				c.ownCPU += rig.CPUTime(c.pid) - own0
			}
		}
		for _, c := range cs {
			own0 := rig.CPUTime(c.pid)
			lat := latencies(c.call, latencyN)
			c.lat = append(c.lat, lat...)
			c.latCalls += int64(len(lat))
			if c.pid != 0 {
				c.latCPU += rig.CPUTime(c.pid) - own0
			}
		}
	}
	fmt.Printf("rounds=%d duration=%s clients=%d latency_calls=%d cpus=%d store=%s auth=%s\n", rounds, dur, clients, latencyN, runtime.NumCPU(), store, mode)
	fmt.Printf("%-12s %12s %10s %10s %10s %10s %14s %14s\n", "contender", "req/s", "p50", "p99", "added p50", "added p99", "own CPU/call", "upstream CPU/call")
	d := cs[0]
	for _, c := range cs {
		c.summarise(d)
		own := "-"
		if c.pid != 0 {
			own = c.ownPerCall.String()
		}
		fmt.Printf("%-12s %12.0f %10s %10s %10s %10s %14s %14s\n", c.name, c.medianThr, c.p50, c.p99, c.p50-d.p50, c.p99-d.p99, own, c.upPerCall)
	}
	f, s := cs[1], cs[2]
	if oauth {
		// Every call but the first used the cached token.
		n, err := tokenRequests(upstreamURL)
		if err != nil {
			return false, err
		}
		fmt.Printf("token requests to the loopback token endpoint: %s (switchboard servers: %d; switchboard calls: %d)\n", n, len(cs)-2, s.calls+s.latCalls)
	}
	fmt.Printf("throughput forwarder / direct      %6.3f\n", f.medianThr/d.medianThr)
	fmt.Printf("throughput switchboard / direct    %6.3f\n", s.medianThr/d.medianThr)
	thrRatio := s.medianThr / f.medianThr
	goal("throughput switchboard / forwarder", thrRatio, ">=", 0.9)
	goal("added p50 switchboard / forwarder", ratio(s.p50-d.p50, f.p50-d.p50), "<=", 1.25)
	goal("added p99 switchboard / forwarder", ratio(s.p99-d.p99, f.p99-d.p99), "<=", 1.5)
	goal("CPU/call switchboard / upstream", ratio(s.ownPerCall, s.upPerCall), "<=", 1.5)
	fmt.Printf("CPU/call forwarder / upstream      %6.3f  (what a naive proxy costs, for scale)\n", ratio(f.ownPerCall, f.upPerCall))
	if len(cs) > 3 {
		b := cs[3]
		fmt.Printf("switchboard-b: throughput / forwarder %.3f, added p50 / forwarder's %.3f, added p99 / forwarder's %.3f\n",
			b.medianThr/f.medianThr, ratio(b.p50-d.p50, f.p50-d.p50), ratio(b.p99-d.p99, f.p99-d.p99))
	}
	for _, c := range cs {
		if c.db != "" && c.calls > 0 {
			fmt.Printf("PostgreSQL backends' CPU/call in the throughput rounds, %-13s %s (Switchboard's own: %s)\n", c.name,
				(c.dbCPU / time.Duration(c.calls)).Round(100*time.Nanosecond), c.ownPerCall)
		}
	}
	for _, c := range cs[1:] {
		if c.latCalls > 0 {
			fmt.Printf("CPU/call at one client, %-11s %s\n", c.name, (c.latCPU / time.Duration(c.latCalls)).Round(100*time.Nanosecond))
		}
	}
	if profile != "" {
		secs := int(dur.Seconds()) + 1
		done := make(chan error, 1)
		go func() {
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, secs))
			if err != nil {
				done <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(profile, b, 0o644)
			}
			done <- err
		}()
		throughput(s.call, profileClients, time.Duration(secs)*time.Second)
		if err := <-done; err != nil {
			return false, fmt.Errorf("server profile: %w", err)
		}
		fmt.Printf("server CPU profile written to %s (go tool pprof -top %s %s)\n", profile, bin, profile)
	}
	if gate > 0 {
		mark := "PASS"
		if thrRatio < gate {
			mark = "FAIL"
		}
		fmt.Printf("gate: throughput switchboard / forwarder %.3f, must be >= %.2f: %s\n", thrRatio, gate, mark)
	}
	return gate <= 0 || thrRatio >= gate, nil
}

// serverSetup is how a Switchboard server of the run is started and
// provisioned.
type serverSetup struct {
	upstreamURL string
	debugAddr   string // "" for none
	catalog     string // "" for the built-in one
	postgres    bool
	oauth       bool
}

// server is a started Switchboard with the bench tenant, caller and
// GitHub instance: base URL and the caller's token.
type server struct {
	cmd         *exec.Cmd
	base, token string
	drop        func()
	// dbName is the server's PostgreSQL database ("" with SQLite), whose
	// backends' CPU is the store's share of a call.
	dbName string
}

// stop stops the server and drops its database; safe on a partly
// started server.
func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	}
	if s.drop != nil {
		s.drop()
	}
}

// startServer starts bin serve on a fresh data directory (and database,
// with PostgreSQL), extra added to its environment, and provisions it.
func startServer(bin, dataDir string, extra []string, o serverSetup) (*server, error) {
	s := &server{}
	addr, err := rig.LoopbackAddr()
	if err != nil {
		return s, err
	}
	s.base = "http://" + addr
	const adminToken = "bench-operator-token"
	args := []string{"serve", "--addr", addr, "--data-dir", dataDir,
		"--allow-upstream-cidrs", "127.0.0.1/32", "--log-level", "error"}
	if o.debugAddr != "" {
		args = append(args, "--debug-addr", o.debugAddr)
	}
	if o.catalog != "" {
		args = append(args, "--catalog", o.catalog)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_ADMIN_TOKEN="+adminToken)
	if o.postgres {
		s.dbName = fmt.Sprintf("switchboard_bench_%d_%s", os.Getpid(), strings.ReplaceAll(filepath.Base(dataDir), "-", "_"))
		dbURL, drop, err := rig.FreshPostgres(s.dbName)
		if err != nil {
			return s, err
		}
		s.drop = drop
		cmd.Env = append(cmd.Env, "SWITCHBOARD_DATABASE_URL="+dbURL)
		migrate := exec.Command(bin, "migrate", "--data-dir", dataDir)
		migrate.Env, migrate.Stdout, migrate.Stderr = cmd.Env, io.Discard, os.Stderr
		if err := migrate.Run(); err != nil {
			return s, fmt.Errorf("migrating the bench database: %w", err)
		}
	}
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return s, err
	}
	s.cmd = cmd
	if err := rig.WaitReady(s.base, 30*time.Second); err != nil {
		return s, err
	}

	admin := func(method, path string, body any) (map[string]any, error) {
		return rig.Admin(s.base, adminToken, method, path, body)
	}
	if _, err := admin("POST", "/v1/tenants", map[string]any{"slug": "bench", "name": "Bench"}); err != nil {
		return s, err
	}
	caller, err := admin("POST", "/v1/tenants/bench/callers", map[string]any{"name": "bench", "kind": "agent-platform"})
	if err != nil {
		return s, err
	}
	s.token, _ = caller["token"].(string)
	instance := map[string]any{
		"connector_id": "github", "auth_mode": "apiKey", "agents": []string{"bench-agent"},
		"fields": map[string]any{"GITHUB_TOKEN": "bench-upstream-key", "GITHUB_API_URL": o.upstreamURL},
	}
	if o.oauth {
		instance["auth_mode"] = "clientCredentials"
		instance["fields"] = map[string]any{"CLIENT_ID": "bench-client", "CLIENT_SECRET": "bench-client-secret",
			"TOKEN_URL": o.upstreamURL + tokenPath, "GITHUB_API_URL": o.upstreamURL}
	}
	if _, err := admin("PUT", "/v1/tenants/bench/instances/gh", instance); err != nil {
		return s, err
	}
	return s, nil
}

// contender is one way of making the call, and what was measured of it.
type contender struct {
	name string
	call func() error
	// pid is the process between the client and the upstream (0 for
	// direct), whose CPU is measured.
	pid int
	// db is the PostgreSQL database of a Switchboard server ("" for
	// none): its backends' CPU during the throughput rounds is dbCPU.
	db    string
	dbCPU time.Duration

	thr           []float64
	lat           []time.Duration
	calls         int64
	ownCPU, upCPU time.Duration
	// latCalls and latCPU are the one-client rounds' calls and the
	// process's CPU meanwhile.
	latCalls int64
	latCPU   time.Duration

	medianThr             float64
	p50, p99              time.Duration
	ownPerCall, upPerCall time.Duration
}

func (c *contender) summarise(direct *contender) {
	c.medianThr = median(c.thr)
	c.p50, c.p99 = pct(c.lat, 0.50), pct(c.lat, 0.99)
	if c.calls > 0 {
		c.ownPerCall = (c.ownCPU / time.Duration(c.calls)).Round(100 * time.Nanosecond)
		c.upPerCall = (c.upCPU / time.Duration(c.calls)).Round(100 * time.Nanosecond)
	}
}

// goal prints a ratio, its goal and a pass/fail mark.
func goal(what string, v float64, op string, want float64) {
	ok := (op == ">=" && v >= want) || (op == "<=" && v <= want)
	mark := "FAIL"
	if ok {
		mark = "pass"
	}
	fmt.Printf("%-34s %6.3f  goal %s %.2f  %s\n", what, v, op, want, mark)
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// runForwarder is the naive forwarder: echo, one shared http.Client, the
// request's path sent to the upstream as a GET with its Authorization,
// the answer copied back.
func runForwarder(addr, upstream string) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Any("/*", func(c echo.Context) error {
		r := c.Request()
		io.Copy(io.Discard, r.Body)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, upstream+r.URL.Path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return c.String(http.StatusBadGateway, err.Error())
		}
		defer resp.Body.Close()
		return c.Stream(resp.StatusCode, resp.Header.Get("Content-Type"), resp.Body)
	})
	return e.Start(addr)
}

func startSelf(self string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	return cmd, cmd.Start()
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// noop is the upstream: a fixed small JSON document.
var noop = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == tokenPath {
		// The token endpoint of -oauth: a token valid for an hour, so
		// that every measured call uses the cached one.
		tokens.Add(1)
		io.WriteString(w, `{"access_token":"bench-access-token","token_type":"Bearer","expires_in":3600}`)
		return
	}
	if r.URL.Path == tokenPath+"/count" {
		fmt.Fprintf(w, "%d", tokens.Load())
		return
	}
	io.WriteString(w, `{"id":1,"name":"hello","full_name":"octo/hello"}`)
})

// tokenPath is the upstream process's OAuth token endpoint (-oauth).
const tokenPath = "/oauth/token"

// tokens counts the token requests the upstream process answered.
var tokens atomic.Int64

// tokenRequests asks the upstream process how many token requests it
// answered.
func tokenRequests(upstreamURL string) (string, error) {
	resp, err := http.Get(upstreamURL + tokenPath + "/count")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// oauthCatalog writes to dir a catalog of one connector: the built-in
// GitHub connector with the clientCredentials mode added to its auth
// modes (client id, client secret and token URL are instance fields).
func oauthCatalog(dir string) error {
	src := catalog.FS()
	// Every file of the connector's folder, its subfolders (apps/)
	// included.
	err := fs.WalkDir(src, "github", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dir, filepath.FromSlash(name))
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := fs.ReadFile(src, name)
		if err != nil {
			return err
		}
		if name == "github/connector.json" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			au := m["auth"].(map[string]any)
			au["modes"] = append(au["modes"].([]any), "clientCredentials")
			for _, f := range m["env"].([]any) {
				if f := f.(map[string]any); f["name"] == "GITHUB_TOKEN" {
					f["required"] = false // not in clientCredentials mode
				}
			}
			m["env"] = append(m["env"].([]any),
				map[string]any{"name": "CLIENT_ID", "label": "Client id"},
				map[string]any{"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
				map[string]any{"name": "TOKEN_URL", "label": "Token URL"})
			if b, err = json.MarshalIndent(m, "", "  "); err != nil {
				return err
			}
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return err
	}
	idx, err := registry.ReadIndex(src)
	if err != nil {
		return err
	}
	for _, e := range idx.Connectors {
		if e.ID == "github" {
			idx.Connectors = []registry.IndexEntry{e}
			break
		}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, registry.IndexName), b, 0o644); err != nil {
		return err
	}
	return registry.HashCatalog(dir)
}

func waitUp(url string) error {
	for i := 0; i < 300; i++ {
		if resp, err := http.Post(url, "application/json", nil); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("upstream at %s did not start", url)
}

func do(c *http.Client, req *http.Request, want string) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	if want != "" && (!bytes.Contains(b, []byte(want)) || bytes.Contains(b, []byte(`"isError":true`))) {
		return fmt.Errorf("unexpected answer: %.300s", b)
	}
	return nil
}

// throughput runs clients concurrent loops of call for dur and returns
// the calls made and their rate.
func throughput(call func() error, clients int, dur time.Duration) (int64, float64) {
	var n, fails atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := call(); err != nil {
					fails.Add(1)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := fails.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "warning: %d failed calls in a throughput round\n", f)
	}
	return n.Load(), float64(n.Load()) / time.Since(start).Seconds()
}

func latencies(call func() error, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := call(); err != nil {
			continue
		}
		out = append(out, time.Since(t))
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[int(float64(len(s)-1)*p)].Round(time.Microsecond)
}
