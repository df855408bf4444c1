package tenants_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestUnparsableNotificationIsSkipped sends a notification that is not a
// change, then a change: the listener reports the first and delivers only
// the second, instead of emptying every cache.
func TestUnparsableNotificationIsSkipped(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	svc := tenants.NewService(tenants.NewStore(db, nil), nil)
	var (
		mu      sync.Mutex
		changes []tenants.Change
		errs    []string
	)
	svc.Subscribe(func(c tenants.Change) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, c)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go svc.Listen(ctx, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err.Error())
	})
	// The listener's first connection delivers Change{All: true}.
	wait := func(n int) []tenants.Change {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got := append([]tenants.Change(nil), changes...)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("changes = %+v, want %d", got, n)
			}
		}
	}
	wait(1)
	for _, payload := range []string{"{not json", `{"seq":1,"tenant_slug":"acme","instance":"crm"}`} {
		if err := db.Notify(ctx, tenants.ChangesChannel, payload); err != nil {
			t.Fatal(err)
		}
	}
	got := wait(2)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || got[1] != (tenants.Change{TenantSlug: "acme", Instance: "crm", Seq: 1}) {
		t.Errorf("changes = %+v, want the first connection's and the parsed one only", changes)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "unparsable") || strings.Contains(errs[0], "not json") {
		t.Errorf("errors = %q, want one report without the payload", errs)
	}
}

// TestReconnectReplaysMissedChanges kills replica B's listener connection
// and makes changes on replica A meanwhile: once B reconnects it has
// heard every change (replayed from the change log) and has not emptied
// its caches (no Change{All: true} besides its first connection's).
func TestReconnectReplaysMissedChanges(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	a := tenants.NewService(tenants.NewStore(replicas[0], nil), nil)
	b := tenants.NewService(tenants.NewStore(replicas[1], nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		changes []tenants.Change
	)
	b.Subscribe(func(c tenants.Change) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, c)
	})
	go b.Listen(ctx, func(error) {})
	heard := func(want func([]tenants.Change) bool) []tenants.Change {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got := append([]tenants.Change(nil), changes...)
			mu.Unlock()
			if want(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("B heard %+v", got)
			}
		}
	}
	heard(func(c []tenants.Change) bool { return len(c) == 1 && c[0].All })
	if _, err := a.CreateTenant(ctx, "acme", ""); err != nil {
		t.Fatal(err)
	}
	heard(func(c []tenants.Change) bool { return len(c) == 2 })

	// Kill B's listener, and change things while it is away.
	var killed bool
	if err := replicas[0].QueryRowContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating B's listener: %v, %v", killed, err)
	}
	var ids []string
	for range 3 {
		c, _, err := a.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "c", Kind: tenants.KindCron})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, string(c.ID))
	}
	got := heard(func(c []tenants.Change) bool {
		seen := 0
		for _, ch := range c {
			for _, id := range ids {
				if string(ch.Caller) == id {
					seen++
				}
			}
		}
		return seen >= len(ids)
	})
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, ch := range changes[1:] {
		if ch.All {
			t.Fatalf("B emptied its caches on reconnecting: %+v", got)
		}
	}
}
