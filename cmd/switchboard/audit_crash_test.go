package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callAll makes n tools/call through the official SDK from `clients`
// concurrent agents and returns the numbers of the calls that were
// answered with a success. Call i asks for repository r<i> as user u<i>.
func (r *auditRig) callAll(t *testing.T, base string, from, n, clients int) []int {
	t.Helper()
	var mu sync.Mutex
	var answered []int
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := mcp.NewClient(&mcp.Implementation{Name: "crash", Version: "1.0.0"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint:   base + "/workspaces/acme/webhooks/gh.mcp",
				HTTPClient: &http.Client{Transport: userHeader{r.token}}, MaxRetries: -1,
			}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			for i := from + c; i < from+n; i += clients {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "repositories",
					Arguments: map[string]any{"action": "get", "owner": "o", "repo": fmt.Sprintf("r%d", i)}})
				if err != nil || res.IsError {
					t.Errorf("call %d: %v %+v", i, err, res)
					return
				}
				mu.Lock()
				answered = append(answered, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return answered
}

// auditCounts returns how many audit rows of tool "repositories" each
// call number has, through the admin API (so on either store).
func auditCounts(t *testing.T, base string) map[int]int {
	t.Helper()
	counts := map[int]int{}
	cursor := ""
	for {
		u := base + "/v1/tenants/acme/audit?instance=gh&limit=500"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET audit = %d %s", resp.StatusCode, body)
		}
		var page struct {
			Entries []struct {
				Actor string `json:"actor"`
				Tool  string `json:"tool"`
			} `json:"entries"`
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if e.Tool != "repositories" {
				continue
			}
			n, err := strconv.Atoi(strings.TrimPrefix(e.Actor, "u"))
			if err != nil {
				t.Fatalf("audit row of actor %q", e.Actor)
			}
			counts[n]++
		}
		if page.Next == "" || len(page.Entries) == 0 {
			return counts
		}
		cursor = page.Next
	}
}

// The server is killed (SIGKILL) right after answering its last call,
// twice: once with the store up (the newest rows are still waiting for
// the writer's next batch) and once while the store is down (every row of
// the phase waits in memory). Restarted on the same data directory, it
// has exactly one audit row for every answered call: the rows were in
// the journal before the answers left.
func TestAuditSurvivesAProcessCrash(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"postgres", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var r *auditRig
			if store == "sqlite" {
				r = newAuditRigOn(t, dir)
			} else {
				r = newAuditRigOn(t, "")
			}
			a := r.start(t, dir)
			var answered []int
			kill := func(what string) {
				if err := a.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = a.cmd.Wait()
				segs, _ := filepath.Glob(filepath.Join(dir, "audit-spool", "*.wal"))
				t.Logf("%s: killed after %d answered calls; %d journal segments left", what, len(answered), len(segs))
				if len(segs) == 0 {
					t.Errorf("%s: the killed process left no journal segment", what)
				}
			}
			answered = append(answered, r.callAll(t, a.url, 0, 300, 6)...)
			kill("store up")
			a = r.start(t, dir)
			if r.pg != nil {
				// Warm the caches, then take the store away: the calls are
				// answered from the caches and their rows wait in memory.
				answered = append(answered, r.callAll(t, a.url, 1000, 12, 6)...)
				r.pg.Stop()
				answered = append(answered, r.callAll(t, a.url, 2000, 200, 6)...)
				kill("store down")
				r.pg.Start()
				a = r.start(t, dir)
			}
			if t.Failed() {
				return
			}
			var counts map[int]int
			var missing, doubled []int
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				counts = auditCounts(t, a.url)
				missing, doubled = missing[:0], doubled[:0]
				for _, n := range answered {
					switch counts[n] {
					case 0:
						missing = append(missing, n)
					case 1:
					default:
						doubled = append(doubled, n)
					}
				}
				if len(missing) == 0 || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("answered %d, audited %d", len(answered), len(counts))
			if len(missing) > 0 || len(doubled) > 0 {
				t.Fatalf("%d answered calls without an audit row (e.g. %v), %d with more than one (e.g. %v)\n%.4000s",
					len(missing), missing[:min(len(missing), 10)], len(doubled), doubled[:min(len(doubled), 10)], a.logs.String())
			}
			for n, c := range counts {
				if c != 1 {
					t.Fatalf("call %d has %d audit rows", n, c)
				}
			}
		})
	}
}
