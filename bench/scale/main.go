// Command scale measures Switchboard with many tenants and app instances
// on PostgreSQL (issue 19; issue 13 goal 4).
//
// It loads -tenants N tenants of -instances M GitHub instances each (apiKey
// mode, one caller per tenant) directly into a fresh PostgreSQL database
// with COPY, not through the API, plus one tenant per -page-rows size with
// that many instances and audit rows. Then it starts the real server
// (switchboard serve, built from this tree, which assembles itself through
// server.New) on that database, and a no-op upstream on loopback, and
// measures:
//
//   - the server's resident memory (VmRSS) and live heap (after a forced
//     collection) idle, then after one tools/call to each instance of a
//     working set of -working-set instances spread over the tenants: per
//     warm instance;
//
//   - warm latency at one client over the whole working set against the
//     same calls to one instance, in alternating rounds (p50, p99);
//
//   - statements per warm, cold and refused call, from the server's own
//     count of the statements its pool sends (the driver wrapper behind
//     switchboard_store_statements_total on /metrics; PostgreSQL's
//     pg_stat_statements needs a restart of the shared server to load);
//
//   - the statements a reconnect of the change listener costs (its
//     backend terminated with pg_terminate_backend) and the instance
//     cache's hit rate on the working set after it;
//
//   - list and audit page times (limit 50, first page and a walk of every
//     page at limit 500) at each -page-rows size.
//
//     go run ./bench/scale [-tenants 1000] [-instances 10] [-working-set 5000] [-page-rows 10000,100000]
//
// Only loopback is used.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/bench/rig"
	"github.com/switchboardhq/switchboard/secrets"
)

func main() {
	n := flag.Int("tenants", 1000, "tenants loaded (each with -instances instances and one caller)")
	m := flag.Int("instances", 10, "app instances per tenant")
	ws := flag.Int("working-set", 5000, "instances warmed (one call each), spread over the tenants")
	clients := flag.Int("clients", 8, "concurrent clients while warming")
	latencyN := flag.Int("latency-calls", 2000, "calls per latency round at one client")
	probe := flag.Int("probe", 200, "calls per statement count (warm, cold, refused)")
	pages := flag.String("page-rows", "10000,100000", "comma-separated sizes of the list and audit page tenants (empty: none)")
	budget := flag.Int("cache-budget-mb", 0, "the server's --cache-budget-mb (0: its default)")
	bin := flag.String("bin", "", "switchboard binary (default: go build it)")
	settle := flag.Duration("settle", 3*time.Second, "wait before reading resident memory")
	flag.Parse()
	var pageRows []int
	for _, f := range strings.Split(*pages, ",") {
		if f = strings.TrimSpace(f); f != "" {
			r, err := strconv.Atoi(f)
			if err != nil || r <= 0 {
				fmt.Fprintln(os.Stderr, "scale: -page-rows takes positive integers")
				os.Exit(2)
			}
			pageRows = append(pageRows, r)
		}
	}
	o := options{n: *n, m: *m, ws: min(*ws, *n**m), clients: *clients, latencyN: *latencyN, probe: *probe,
		pageRows: pageRows, budget: *budget, bin: *bin, settle: *settle}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

type options struct {
	n, m, ws, clients, latencyN, probe int
	pageRows                           []int
	budget                             int
	bin                                string
	settle                             time.Duration
}

const adminToken = "bench-operator-token"

func run(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "switchboard-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin, err = rig.ServerBinary(o.bin, dir); err != nil {
		return err
	}
	upAddr, err := rig.LoopbackAddr()
	if err != nil {
		return err
	}
	up := &http.Server{Addr: upAddr, Handler: http.HandlerFunc(upstream)}
	go up.ListenAndServe()
	defer up.Close()
	upstreamURL := "http://" + upAddr

	dbName := fmt.Sprintf("switchboard_scale_%d", os.Getpid())
	dbURL, drop, err := rig.FreshPostgres(dbName)
	if err != nil {
		return err
	}
	defer drop()
	key := make([]byte, 32)
	rand.Read(key)
	ring, err := secrets.NewKeyring(key)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := load(ctx, dbURL, ring, o.n, o.m, o.pageRows, upstreamURL); err != nil {
		return err
	}
	fmt.Printf("loaded %d tenants x %d instances (%d instances, %d callers) and page tenants %v with SQL (COPY) in %s\n",
		o.n, o.m, o.n*o.m, o.n, o.pageRows, time.Since(t0).Round(time.Second))
	stats, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer stats.Close()

	addr, err := rig.LoopbackAddr()
	if err != nil {
		return err
	}
	debugAddr, err := rig.LoopbackAddr()
	if err != nil {
		return err
	}
	args := []string{"serve", "--addr", addr, "--data-dir", filepath.Join(dir, "data"), "--debug-addr", debugAddr,
		"--allow-upstream-cidrs", "127.0.0.1/32", "--log-level", "error"}
	if o.budget > 0 {
		args = append(args, "--cache-budget-mb", strconv.Itoa(o.budget))
	}
	srv := exec.Command(o.bin, args...)
	srv.Env = append(os.Environ(), "SWITCHBOARD_DATABASE_URL="+dbURL, "SWITCHBOARD_ADMIN_TOKEN="+adminToken,
		"SWITCHBOARD_MASTER_KEY="+base64.StdEncoding.EncodeToString(key))
	srv.Stdout, srv.Stderr = io.Discard, os.Stderr
	started := time.Now()
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	base := "http://" + addr
	if err := rig.WaitReady(base, 2*time.Minute); err != nil {
		return err
	}
	s := &server{base: base, debug: "http://" + debugAddr, pid: srv.Process.Pid,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 64}}}
	fmt.Printf("server ready in %s on a database of %d instances; cpus=%d load=%s\n",
		time.Since(started).Round(10*time.Millisecond), o.n*o.m+sum(o.pageRows)+1, runtime.NumCPU(), rig.LoadAverage())

	// The working set: instance k is instance k/warmTenants of tenant
	// k%warmTenants, so that it spans the tenants. Some tenants stay out
	// of it (cold tenants, with their callers), and instances past it in
	// the warm tenants are cold instances.
	coldTenants := min(50, o.n/10)
	warmTenants := o.n - coldTenants
	target := func(k int) (int, int) { return k % warmTenants, k / warmTenants }
	if o.ws > warmTenants*o.m {
		o.ws = warmTenants * o.m
	}

	idle := s.memory(o.settle)
	fmt.Printf("idle: resident %.1f MB, live heap %.1f MB\n", mb(idle.rss), mb(idle.heap))
	tw := time.Now()
	if err := s.parallel(o.ws, o.clients, func(k int) error { i, j := target(k); return s.call(i, j) }); err != nil {
		return fmt.Errorf("warming: %w", err)
	}
	warmTime := time.Since(tw)
	warm := s.memory(o.settle)
	fmt.Printf("warmed %d instances over %d tenants in %s (%.0f calls/s at %d clients)\n", o.ws, min(o.ws, warmTenants),
		warmTime.Round(time.Millisecond), float64(o.ws)/warmTime.Seconds(), o.clients)
	fmt.Printf("warm: resident %.1f MB, live heap %.1f MB\n", mb(warm.rss), mb(warm.heap))
	perRSS := float64(warm.rss-idle.rss) / float64(o.ws)
	perHeap := float64(warm.heap-idle.heap) / float64(o.ws)
	fmt.Printf("%-44s %8.0f B   goal <= 2048 B  %s\n", "resident memory per warm instance", perRSS, mark(perRSS <= 2048))
	fmt.Printf("%-44s %8.0f B\n", "live heap per warm instance", perHeap)
	if o.ws >= 100_000 {
		fmt.Printf("%-44s %8.1f MB  goal <= 512 MB  %s\n", "resident memory with the working set", mb(warm.rss), mark(mb(warm.rss) <= 512))
	}

	// Warm latency: the whole working set against one instance.
	var wideLat, oneLat []time.Duration
	for range 3 {
		oneLat = append(oneLat, s.latencies(o.latencyN/3, func(int) (int, int) { return 0, 0 })...)
		wideLat = append(wideLat, s.latencies(o.latencyN/3, func(c int) (int, int) {
			return target(int(uint64(c)*2654435761) % o.ws)
		})...)
	}
	fmt.Printf("warm latency, one client: working set of %d p50 %s p99 %s; one instance p50 %s p99 %s; p99 ratio %.2f\n",
		o.ws, pct(wideLat, 0.5), pct(wideLat, 0.99), pct(oneLat, 0.5), pct(oneLat, 0.99),
		float64(pct(wideLat, 0.99))/float64(pct(oneLat, 0.99)))

	// Statements per call. The audit rows of the calls are written by
	// the audit writer in batches; its inserts are counted too, once it
	// has written them. A server records a caller's use at most once a
	// minute (tenants.CallerTouchInterval), one UPDATE off the call's
	// path: each probe first calls a warm instance of every tenant it
	// involves, so that these writes fall before the count.
	k := min(o.probe, o.ws)
	warmProbe := func(c int) (int, int) { return target(c * (o.ws / k)) }
	touch := func(n int, pick func(int) (int, int)) error {
		for c := range n {
			i, _ := pick(c)
			if err := s.call(i, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if err := touch(k, warmProbe); err != nil {
		return err
	}
	perWarm, err := s.statementsPer(k, func(c int) error { i, j := warmProbe(c); return s.call(i, j) })
	if err != nil {
		return err
	}
	fmt.Printf("%-44s %8.2f   (audit batch inserts included)\n", "statements per warm call", perWarm)
	// Cold instances: the last instance of tenants whose first is warm,
	// when it is outside the working set.
	var coldOf []int
	for i := 0; i < min(o.ws, warmTenants) && len(coldOf) < o.probe; i++ {
		if o.m > 1 && (o.m-1)*warmTenants+i >= o.ws {
			coldOf = append(coldOf, i)
		}
	}
	if kc := len(coldOf); kc > 0 {
		coldProbe := func(c int) (int, int) { return coldOf[c], o.m - 1 }
		if err := touch(kc, coldProbe); err != nil {
			return err
		}
		per, err := s.statementsPer(kc, func(c int) error { i, j := coldProbe(c); return s.call(i, j) })
		if err != nil {
			return err
		}
		fmt.Printf("%-44s %8.2f   (tenant and caller warm)\n", "statements per cold-instance call", per)
	}
	if coldTenants > 0 {
		per, err := s.statementsPer(coldTenants, func(c int) error { return s.call(warmTenants+c, 0) })
		if err != nil {
			return err
		}
		fmt.Printf("%-44s %8.2f   (tenant, caller and instance cold; the caller's first use recorded)\n", "statements per cold-tenant call", per)
	}

	// Resync: the listener's connection killed under no load; then the
	// working set again.
	if err := s.resync(stats, dbName, o, target); err != nil {
		return err
	}

	// Refusals last: the bad tokens put this client's address over its
	// authentication failure budget.
	per, err := s.statementsPer(k, func(c int) error {
		return s.expect(s.mcpRequest(0, 0, fmt.Sprintf("%sno-such-token-%d", "sbc_", c)), http.StatusUnauthorized)
	})
	if err != nil {
		return err
	}
	fmt.Printf("%-44s %8.2f   (%d distinct bad tokens from one address: %.0f statements in all)\n", "statements per refused call (bad token)", per, k, per*float64(k))
	per, err = s.statementsPer(k, func(c int) error {
		r := s.mcpRequest(0, 0, callerToken(0))
		r.URL.Path = fmt.Sprintf("/workspaces/%s/webhooks/no-such-%d.mcp", tenantSlug(0), c%10)
		return s.expect(r, http.StatusNotFound)
	})
	if err != nil {
		return err
	}
	fmt.Printf("%-44s %8.2f   (%d calls to 10 unknown instances of a warm tenant: %.0f statements in all)\n", "statements per refused call (unknown instance)", per, k, per*float64(k))

	for _, r := range o.pageRows {
		if err := s.pageTimes(r); err != nil {
			return err
		}
	}
	if err := s.pageTenants(); err != nil {
		return err
	}
	return nil
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// upstream answers GitHub's GET /repos/{owner}/{repo}.
func upstream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":1,"full_name":"octo/hello","private":false}`)
}

// server is the running server under measure.
type server struct {
	base, debug string
	pid         int
	client      *http.Client
}

const callBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"get","owner":"octo","repo":"hello"}}}`

func (s *server) mcpRequest(i, j int, token string) *http.Request {
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/workspaces/%s/webhooks/%s.mcp", s.base, tenantSlug(i), instanceSlug(j)),
		strings.NewReader(callBody))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-Id", benchAgent)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	return req
}

// call makes one tools/call to instance j of tenant i and checks that the
// upstream's answer came back.
func (s *server) call(i, j int) error {
	resp, err := s.client.Do(s.mcpRequest(i, j, callerToken(i)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("octo/hello")) || bytes.Contains(b, []byte(`"isError":true`)) {
		return fmt.Errorf("%s/%s: %d %.300s", tenantSlug(i), instanceSlug(j), resp.StatusCode, b)
	}
	return nil
}

func (s *server) expect(req *http.Request, status int) error {
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("%s: %d, want %d: %.300s", req.URL.Path, resp.StatusCode, status, b)
	}
	return nil
}

// parallel runs f(0..n-1) on c clients.
func (s *server) parallel(n, c int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if err := f(k); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func (s *server) latencies(n int, pick func(int) (int, int)) []time.Duration {
	out := make([]time.Duration, 0, n)
	for c := range n {
		i, j := pick(c)
		t := time.Now()
		if err := s.call(i, j); err != nil {
			fmt.Fprintln(os.Stderr, "scale: latency call:", err)
			continue
		}
		out = append(out, time.Since(t))
	}
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)].Round(time.Microsecond)
}

// metrics returns the server's metrics (one sample per line) by name
// with its labels.
func (s *server) metrics() (map[string]float64, error) {
	req, _ := http.NewRequest("GET", s.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

func (s *server) metric(name string) float64 {
	ms, err := s.metrics()
	if err != nil {
		return math.NaN()
	}
	return ms[name]
}

// statements is the server's count of the statements its pool sent, once
// the audit writer has nothing waiting in memory.
func (s *server) statements() (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms, err := s.metrics()
		if err != nil {
			return 0, err
		}
		if ms["switchboard_audit_memory_rows"] == 0 || time.Now().After(deadline) {
			n, ok := ms["switchboard_store_statements_total"]
			if !ok {
				return 0, fmt.Errorf("the server does not count its statements (switchboard_store_statements_total)")
			}
			return int64(n), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statementsPer is the statements per call of k calls f(0..k-1), made one
// at a time.
func (s *server) statementsPer(k int, f func(int) error) (float64, error) {
	before, err := s.statements()
	if err != nil {
		return 0, err
	}
	for c := range k {
		if err := f(c); err != nil {
			return 0, err
		}
	}
	// Let the audit writer take the last rows before counting.
	time.Sleep(300 * time.Millisecond)
	after, err := s.statements()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(k), nil
}

type memory struct{ rss, heap int64 }

// memory returns the server's resident memory (after settle) and its live
// heap after a forced collection (the heap profile's ?gc=1).
func (s *server) memory(settle time.Duration) memory {
	if resp, err := s.client.Get(s.debug + "/debug/pprof/heap?gc=1"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	heap := s.metric("go_memstats_heap_alloc_bytes")
	time.Sleep(settle)
	kb, _ := rig.Memory(s.pid)
	return memory{rss: kb << 10, heap: int64(heap)}
}

// resync terminates the change listener's connection, waits for it to
// listen again, and reports the statements of its replay and the
// instance cache's hit rate over the working set afterwards.
func (s *server) resync(stats *sql.DB, dbName string, o options, target func(int) (int, int)) error {
	listeners := func() ([]int, error) {
		rows, err := stats.Query(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'listen%'`, dbName)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var pids []int
		for rows.Next() {
			var p int
			if err := rows.Scan(&p); err != nil {
				return nil, err
			}
			pids = append(pids, p)
		}
		return pids, rows.Err()
	}
	old, err := listeners()
	if err != nil {
		return err
	}
	if len(old) == 0 {
		return fmt.Errorf("resync: no listening backend found")
	}
	before, err := s.statements()
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, err := stats.Exec(`SELECT pg_terminate_backend($1)`, p); err != nil {
			return err
		}
	}
	t := time.Now()
	for {
		now, err := listeners()
		if err != nil {
			return err
		}
		fresh := 0
		for _, p := range now {
			if !contains(old, p) {
				fresh++
			}
		}
		if fresh >= len(old) {
			break
		}
		if time.Since(t) > time.Minute {
			return fmt.Errorf("resync: the listener did not come back in a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	back := time.Since(t)
	time.Sleep(time.Second) // the replay runs once it listens again
	after, err := s.statements()
	if err != nil {
		return err
	}
	ms0, err := s.metrics()
	if err != nil {
		return err
	}
	k := min(o.ws, 20_000)
	if err := s.parallel(k, o.clients, func(c int) error { i, j := target(c * (o.ws / k)); return s.call(i, j) }); err != nil {
		return err
	}
	ms1, err := s.metrics()
	if err != nil {
		return err
	}
	hitKey := `switchboard_cache_lookups_total{cache="instance",result="hit"}`
	missKey := `switchboard_cache_lookups_total{cache="instance",result="miss"}`
	hits, misses := ms1[hitKey]-ms0[hitKey], ms1[missKey]-ms0[missKey]
	fmt.Printf("resync: listener back in %s; reconnect and replay %d statements; then %d warm calls: instance cache hit rate %.2f %%\n",
		back.Round(time.Millisecond), after-before, k, 100*hits/math.Max(1, hits+misses))
	return nil
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// get fetches an admin API page and returns its next cursor.
func (s *server) get(path string) (string, error) {
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Next string `json:"next_cursor"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %.300s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	return out.Next, nil
}

// firstPage is the median time of the first page of path at limit 50.
func (s *server) firstPage(path string) (time.Duration, error) {
	var ts []time.Duration
	for range 21 {
		t := time.Now()
		if _, err := s.get(path + sep(path) + "limit=50"); err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(t))
	}
	return pct(ts, 0.5), nil
}

// walk reads every page of path at limit 500 and returns the pages and
// their mean time.
func (s *server) walk(path string) (int, time.Duration, error) {
	t := time.Now()
	pages, cursor := 0, ""
	for {
		p := path + sep(path) + "limit=500"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		next, err := s.get(p)
		if err != nil {
			return 0, 0, err
		}
		pages++
		if next == "" {
			return pages, time.Since(t) / time.Duration(pages), nil
		}
		cursor = next
	}
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// pageTimes prints the list and audit page times of the tenant with rows
// instances and audit rows.
func (s *server) pageTimes(rows int) error {
	t := pageTenantSlug(rows)
	for _, c := range []struct{ what, path string }{
		{"instances", "/v1/tenants/" + t + "/instances"},
		{"audit", "/v1/tenants/" + t + "/audit"},
		{"audit by instance", "/v1/tenants/" + t + "/audit?instance=gh-0003"},
	} {
		first, err := s.firstPage(c.path)
		if err != nil {
			return err
		}
		pages, mean, err := s.walk(c.path)
		if err != nil {
			return err
		}
		fmt.Printf("%-18s at %7d rows: first page (50) %8s median; every page at 500: %4d pages, %8s each\n",
			c.what, rows, first, pages, mean.Round(time.Microsecond))
	}
	return nil
}

// pageTenants prints the operator's tenant list page times.
func (s *server) pageTenants() error {
	first, err := s.firstPage("/v1/tenants")
	if err != nil {
		return err
	}
	pages, mean, err := s.walk("/v1/tenants")
	if err != nil {
		return err
	}
	fmt.Printf("%-18s at all tenants: first page (50) %8s median; every page at 500: %4d pages, %8s each\n",
		"tenants", first, pages, mean.Round(time.Microsecond))
	return nil
}
