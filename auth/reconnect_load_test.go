package auth_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestListenerReconnectUnderLoadKeepsHitRate warms replica B's caller
// cache, then, while B authenticates its warm callers without pause,
// kills B's change listener and has replica A revoke one caller. B's
// listener reconnects and replays what it missed from the change log: the
// revoked caller is refused on B, no Change{All: true} empties the cache
// (not on the first connection either: B marked the log before warming),
// and B looks up almost nothing: its statements during the load are at
// most 1 % of its authentications (a hit rate of at least 99 %). Counted
// in statements, never timed.
func TestListenerReconnectUnderLoadKeepsHitRate(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, a := tenantService(t, replicas[0], "acme")
	storeB := tenants.NewStore(replicas[1], nil)
	b := tenants.NewService(storeB, nil)
	callersB := auth.NewCallers(storeB)
	t.Cleanup(callersB.Wait)
	b.Subscribe(callersB.Invalidate)
	var (
		mu    sync.Mutex
		heard []tenants.Change
	)
	b.Subscribe(func(c tenants.Change) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, c)
	})
	if err := b.MarkChanges(ctx); err != nil {
		t.Fatal(err)
	}
	go b.Listen(ctx, func(error) {})

	const warm = 200
	var (
		ids    []switchboard.CallerID
		tokens []string
	)
	for range warm {
		c, tok, err := a.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindCron, AgentID: "bot"})
		if err != nil {
			t.Fatal(err)
		}
		ids, tokens = append(ids, c.ID), append(tokens, tok.Reveal())
	}
	auth1 := func(i int) error {
		r := request("Bearer " + tokens[i])
		r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1000", 1+i%200)
		_, err := callersB.Authenticate(ctx, r, "acme")
		return err
	}
	for i := range warm {
		if err := auth1(i); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited in vain for %s", what)
			}
		}
	}
	// B's listener is up once it hears the creations.
	waitFor("B to hear the callers' creation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range heard {
			if c.Caller == ids[warm-1] {
				return true
			}
		}
		return false
	})
	for i := range warm { // the last touches of last use are behind
		if err := auth1(i); err != nil {
			t.Fatal(err)
		}
	}

	before := replicas[1].Statements()
	var (
		calls   atomic.Int64
		stop    = make(chan struct{})
		loadErr atomic.Value
		done    sync.WaitGroup
	)
	for w := range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + i%(warm-1) // caller 0 is the one revoked
				if err := auth1(n); err != nil {
					loadErr.Store(err.Error())
				}
				calls.Add(1)
			}
		}()
	}
	var killed bool
	if err := replicas[0].QueryRowContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating B's listener: %v, %v", killed, err)
	}
	if _, err := a.RevokeCaller(ctx, "acme", ids[0]); err != nil {
		t.Fatal(err)
	}
	waitFor("B to refuse the caller revoked while its listener was away", func() bool {
		return switchboard.CodeOf(auth1(0)) == "unauthorized"
	})
	waitFor("some load after the reconnection", func() bool { return calls.Load() >= 5000 })
	close(stop)
	done.Wait()
	if v := loadErr.Load(); v != nil {
		t.Fatalf("a warm caller was refused under load: %v", v)
	}
	statements, n := replicas[1].Statements()-before, calls.Load()
	t.Logf("%d authentications under load, %d statements on B", n, statements)
	if statements*100 > n && !raceEnabled {
		t.Errorf("%d statements for %d authentications: hit rate under 99 %%", statements, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range heard {
		if c.All {
			t.Fatalf("B emptied its caches (Change{All: true}): %+v", heard)
		}
	}
}
