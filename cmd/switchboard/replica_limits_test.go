package main

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A tenant's rate limit held across three `switchboard serve` processes on
// one PostgreSQL database behind the round-robin front (the limits' token
// buckets are shared in the database, leased in batches): under a demand
// far above the limit, the calls all three admit over a window stay
// within the bound of docs/operations.md, burst + rate·T + 3 batches (each
// replica counting on its own would admit about three times the rate).
// Then one replica is killed (SIGKILL, holding its lease): the two others
// admit the whole limit between them, within the same bound for two.
func TestRateLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	const rate, burst = 30.0, 10.0
	batch := math.Min(burst, math.Max(1, math.Ceil(rate/10)))
	r := startThreeReplicas(t, "--limit-tenant", fmt.Sprintf("rate=%g/s,burst=%g", rate, burst))

	var next atomic.Int64
	next.Store(1 << 20) // the notes of this test, apart from other tests'
	// load calls notes through the front from 9 agents for d, and returns
	// the calls served and refused with rate_limited; any other answer
	// fails the test.
	load := func(d time.Duration) (served, limited int, took time.Duration) {
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			failures []string
		)
		client := &http.Client{Timeout: 10 * time.Second}
		start := time.Now()
		deadline := start.Add(d)
		for range 9 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					n := next.Add(1)
					status, out, err := r.call(client, r.front.URL, "notes", "bot", "u1", "note", fmt.Sprintf(`{"action":"get","n":"%d"}`, n))
					mu.Lock()
					switch {
					case err == nil && status == 200 && strings.Contains(out, fmt.Sprintf(`\"n\": %d`, n)) && !strings.Contains(out, `"isError":true`):
						served++
					case err == nil && strings.Contains(out, "rate_limited") && strings.Contains(out, "retryAfterMs"):
						limited++
					default:
						failures = append(failures, fmt.Sprintf("%d %.300s %v", status, out, err))
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		took = time.Since(start)
		if len(failures) > 0 {
			t.Fatalf("%d calls failed otherwise than rate_limited, e.g. %s\n%s", len(failures), failures[0], r.logs())
		}
		return served, limited, took
	}
	check := func(what string, replicas float64, served, limited int, took time.Duration) {
		t.Helper()
		secs := took.Seconds()
		upper := burst + rate*secs + replicas*batch
		lower := rate*secs - replicas*batch
		t.Logf("%s: %d served, %d rate_limited in %.2fs: %.1f a second for a limit of %g; bound [%.0f, %.0f]",
			what, served, limited, secs, float64(served)/secs, rate, lower, upper)
		if float64(served) > upper || float64(served) < lower {
			t.Errorf("%s: %d calls served in %.2fs under a tenant limit of %g/s (burst %g), want %.0f..%.0f", what, served, secs, rate, burst, lower, upper)
		}
		if limited == 0 {
			t.Errorf("%s: no call refused: the demand did not reach the limit", what)
		}
	}
	served, limited, took := load(3 * time.Second)
	check("three replicas", 3, served, limited, took)

	// Replica 0 dies holding its lease; once the front has taken it out
	// (its health check every 50 ms), the two others serve the tenant.
	dead := r.replicas[0]
	if err := dead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.cmd.Wait()
	time.Sleep(300 * time.Millisecond)
	served, limited, took = load(3 * time.Second)
	check("two survivors", 2, served, limited, took)
}
