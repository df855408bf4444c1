// Command overhead measures what Switchboard adds to an upstream call.
//
// It builds and starts the real server (switchboard serve, embedded store,
// a fresh data directory), starts a no-op upstream on loopback, installs a
// GitHub-connector instance pointed at it (apiKey mode), and then, in
// alternating rounds within one run, calls the upstream directly and
// through tools/call. It reports the throughput ratio at -clients
// concurrent clients and the added p50 / p99 latency at one client.
//
//	go run ./bench/overhead [-rounds 6] [-duration 2s] [-clients 16]
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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 6, "alternating rounds of each measurement")
	duration := flag.Duration("duration", 2*time.Second, "length of one throughput round")
	latencyN := flag.Int("latency-calls", 3000, "calls per latency round at one client")
	clients := flag.Int("clients", 16, "concurrent clients for throughput")
	bin := flag.String("bin", "", "switchboard binary (default: go build it)")
	profile := flag.String("server-profile", "", "write a CPU profile of the server, taken during one extra throughput round, to this file")
	serveUpstream := flag.String("serve-upstream", "", "internal: serve the no-op upstream on this loopback address and nothing else")
	flag.Parse()
	if *serveUpstream != "" {
		if err := http.ListenAndServe(*serveUpstream, noop); err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*rounds, *duration, *latencyN, *clients, *bin, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

func run(rounds int, dur time.Duration, latencyN, clients int, bin, profile string) error {
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "switchboard")
		build := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building: %w", err)
		}
	}
	// The upstream runs in its own process (this program, re-executed), so
	// that the direct call and the call through Switchboard both cross
	// processes, as they do in production; only Switchboard's own hop
	// differs between them.
	upAddr := "127.0.0.1:"
	if p, err := freePort(); err == nil {
		upAddr += p
	} else {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	up := exec.Command(self, "-serve-upstream", upAddr)
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	defer func() { up.Process.Kill(); up.Wait() }()
	upstream := struct{ URL string }{URL: "http://" + upAddr}
	if err := waitUp(upstream.URL + "/repos/octo/hello"); err != nil {
		return err
	}

	port, err := freePort()
	if err != nil {
		return err
	}
	base := "http://127.0.0.1:" + port
	const adminToken = "bench-operator-token"
	args := []string{"serve", "--addr", "127.0.0.1:" + port, "--data-dir", filepath.Join(dir, "data"),
		"--allow-upstream-cidrs", "127.0.0.1/32", "--log-level", "error"}
	debugAddr := ""
	if profile != "" {
		dport, err := freePort()
		if err != nil {
			return err
		}
		debugAddr = "127.0.0.1:" + dport
		args = append(args, "--debug-addr", debugAddr)
	}
	srv := exec.Command(bin, args...)
	srv.Env = append(os.Environ(), "SWITCHBOARD_ADMIN_TOKEN="+adminToken)
	srv.Stdout, srv.Stderr = io.Discard, os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if err := waitReady(base); err != nil {
		return err
	}

	admin := func(method, path string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out, nil
	}
	if _, err := admin("POST", "/v1/tenants", map[string]any{"slug": "bench", "name": "Bench"}); err != nil {
		return err
	}
	caller, err := admin("POST", "/v1/tenants/bench/callers", map[string]any{"name": "bench", "kind": "agent-platform"})
	if err != nil {
		return err
	}
	token, _ := caller["token"].(string)
	if _, err := admin("PUT", "/v1/tenants/bench/instances/gh", map[string]any{
		"connector_id": "github", "auth_mode": "apiKey", "agents": []string{"bench-agent"},
		"fields": map[string]any{"GITHUB_TOKEN": "bench-upstream-key", "GITHUB_API_URL": upstream.URL},
	}); err != nil {
		return err
	}

	mcpURL := base + "/workspaces/bench/webhooks/gh.mcp"
	callBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repositories","arguments":{"action":"get","owner":"octo","repo":"hello"}}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	direct := func() error {
		req, _ := http.NewRequest("GET", upstream.URL+"/repos/octo/hello", nil)
		req.Header.Set("Authorization", "Bearer bench-upstream-key")
		req.Header.Set("Accept", "application/json")
		return do(client, req, "")
	}
	through := func() error {
		req, _ := http.NewRequest("POST", mcpURL, bytes.NewReader(callBody))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Agent-Id", "bench-agent")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		return do(client, req, `"full_name"`)
	}
	// Warm up both paths (caches, connections), and check the call works.
	for i := 0; i < 200; i++ {
		if err := through(); err != nil {
			return fmt.Errorf("warm-up tools/call: %w", err)
		}
		if err := direct(); err != nil {
			return fmt.Errorf("warm-up direct: %w", err)
		}
	}

	var dThr, sThr []float64
	var dLat, sLat []time.Duration
	for r := 0; r < rounds; r++ {
		dThr = append(dThr, throughput(direct, clients, dur))
		sThr = append(sThr, throughput(through, clients, dur))
		dLat = append(dLat, latencies(direct, latencyN)...)
		sLat = append(sLat, latencies(through, latencyN)...)
	}
	dT, sT := median(dThr), median(sThr)
	dp50, dp99 := pct(dLat, 0.50), pct(dLat, 0.99)
	sp50, sp99 := pct(sLat, 0.50), pct(sLat, 0.99)
	fmt.Printf("rounds=%d duration=%s clients=%d latency_calls=%d cpus=%d\n", rounds, dur, clients, latencyN, runtime.NumCPU())
	fmt.Printf("throughput direct      %10.0f req/s (median of rounds)\n", dT)
	fmt.Printf("throughput switchboard %10.0f req/s\n", sT)
	fmt.Printf("throughput ratio       %10.3f (target >= 0.5)\n", sT/dT)
	fmt.Printf("latency direct      p50 %8s p99 %8s\n", dp50, dp99)
	fmt.Printf("latency switchboard p50 %8s p99 %8s\n", sp50, sp99)
	fmt.Printf("added p50 %s (target <= 50µs), added p99 %s (target <= 250µs)\n", sp50-dp50, sp99-dp99)
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
		throughput(through, clients, time.Duration(secs)*time.Second)
		if err := <-done; err != nil {
			return fmt.Errorf("server profile: %w", err)
		}
		fmt.Printf("server CPU profile written to %s (go tool pprof -top %s %s)\n", profile, bin, profile)
	}
	return nil
}

// noop is the upstream: a fixed small JSON document.
var noop = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":1,"name":"hello","full_name":"octo/hello"}`)
})

func waitUp(url string) error {
	for i := 0; i < 300; i++ {
		if resp, err := http.Get(url); err == nil {
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

func throughput(call func() error, clients int, dur time.Duration) float64 {
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
	return float64(n.Load()) / time.Since(start).Seconds()
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

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

func waitReady(base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server at %s not ready after 30s", base)
}
