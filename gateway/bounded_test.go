package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/gateway"
)

// TestInstanceCacheIsBounded resolves more instances than a tiny budget
// holds, on both stores: the least recently used are evicted (resolving
// them costs statements again) and drop their decrypted fields; the
// recently used stay warm (no statement). A short TTL evicts too.
func TestInstanceCacheIsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		const n = 12 // more than the 8 a budget of one byte holds
		s := acmeInstances(t, db, n)
		g := gateway.New(gateway.Config{Tenants: s.svc, Catalog: loadCRM(t), CacheBudget: 1, CacheTTL: time.Hour})
		resolve := func(i int) (*gateway.Target, int64) {
			t.Helper()
			before := db.Statements()
			tg, err := g.Resolve(ctx, "acme", fmt.Sprintf("crm-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			return tg, db.Statements() - before
		}
		first, _ := resolve(0)
		if _, err := g.ModeInput(ctx, first, nil); err != nil || !first.HoldsCredentials() {
			t.Fatalf("credentials not loaded: %v", err)
		}
		for i := 1; i < n; i++ {
			resolve(i)
		}
		if first.HoldsCredentials() {
			t.Error("an evicted instance still holds its decrypted fields")
		}
		if _, cost := resolve(0); cost == 0 {
			t.Error("the least recently used instance was not evicted")
		}
		if _, cost := resolve(n - 1); cost != 0 {
			t.Errorf("a recently used instance cost %d statements", cost)
		}

		short := gateway.New(gateway.Config{Tenants: s.svc, Catalog: loadCRM(t), CacheTTL: 50 * time.Millisecond})
		if _, err := short.Resolve(ctx, "acme", "crm-0"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		before := db.Statements()
		if _, err := short.Resolve(ctx, "acme", "crm-0"); err != nil {
			t.Fatal(err)
		}
		if db.Statements() == before {
			t.Error("an instance past its TTL is still cached")
		}
	})
}

// TestInstanceCacheEvictsBeyondItsBudget resolves three times as many
// instances as a budget of bytes holds, on both stores: the cache's
// estimate stays within the budget, the least recently used instances are
// evicted, and an evicted instance comes back with one query (the
// instance and its sealed fields together; its tenant is held), after
// which its first call opens its fields without another.
func TestInstanceCacheEvictsBeyondItsBudget(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		const n = 30
		s := acmeInstances(t, db, n)
		probe := gateway.New(gateway.Config{Tenants: s.svc, Catalog: loadCRM(t)})
		if _, err := probe.Resolve(ctx, "acme", "crm-0"); err != nil {
			t.Fatal(err)
		}
		one := probe.CacheStats().Bytes
		budget := 10 * one
		g := gateway.New(gateway.Config{Tenants: s.svc, Catalog: loadCRM(t), CacheBudget: budget, CacheTTL: time.Hour})
		for i := range n {
			if _, err := g.Resolve(ctx, "acme", fmt.Sprintf("crm-%d", i)); err != nil {
				t.Fatal(err)
			}
			if st := g.CacheStats(); st.Bytes > budget {
				t.Fatalf("after %d instances the cache holds %d bytes, over its budget of %d", i+1, st.Bytes, budget)
			}
		}
		if st := g.CacheStats(); st.Instances < 9 || st.Instances > 10 {
			t.Errorf("a budget of 10 instances holds %d", st.Instances)
		}
		before := db.Statements()
		back, err := g.Resolve(ctx, "acme", "crm-0")
		if err != nil {
			t.Fatal(err)
		}
		if got := db.Statements() - before; got != 1 {
			t.Errorf("an evicted instance came back with %d statements, want 1", got)
		}
		before = db.Statements()
		if _, err := g.ModeInput(ctx, back, nil); err != nil || !back.HoldsCredentials() {
			t.Fatalf("credentials not loaded: %v", err)
		}
		if got := db.Statements() - before; got != 0 {
			t.Errorf("opening the fields of a resolved instance cost %d statements, want 0", got)
		}
		before = db.Statements()
		if _, err := g.Resolve(ctx, "acme", fmt.Sprintf("crm-%d", n-1)); err != nil {
			t.Fatal(err)
		}
		if got := db.Statements() - before; got != 0 {
			t.Errorf("a recently used instance cost %d statements", got)
		}
	})
}

// TestTenantIsReadOnce resolves two instances of a tenant, on both
// stores: the first costs the tenant and the instance, the second only
// its instance, and both share one tenant value.
func TestTenantIsReadOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		s := acmeInstances(t, db, 2)
		g := gateway.New(gateway.Config{Tenants: s.svc, Catalog: loadCRM(t)})
		var got []*gateway.Target
		for _, want := range []int64{2, 1} {
			before := db.Statements()
			tg, err := g.Resolve(ctx, "acme", fmt.Sprintf("crm-%d", len(got)))
			if err != nil {
				t.Fatal(err)
			}
			if n := db.Statements() - before; n > want {
				t.Errorf("resolving crm-%d cost %d statements, want %d", len(got), n, want)
			}
			got = append(got, tg)
		}
		if got[0].Tenant != got[1].Tenant {
			t.Error("two instances of a tenant hold two copies of it")
		}
	})
}

// acmeInstances returns a server with the tenant acme and n apiKey
// instances crm-0 ... of it.
func acmeInstances(t *testing.T, db *database.DB, n int) *stack {
	t.Helper()
	s := newStack(t, db, loadCRM(t), &clock{})
	up := newUpstream(t, nil)
	s.tenant(t, "acme")
	for i := range n {
		s.install(t, "acme", fmt.Sprintf("crm-%d", i), "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"}, agent)
	}
	return s
}
