package gateway

import (
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// A Resolve whose load raced with deliveries caches what it loaded when
// the load saw every change delivered meanwhile that concerns it (the
// late notification of a change committed before the load), and not
// when one of them is a change it did not see, one for every instance,
// or when more changes were delivered than it can check.
func TestRaceWithLateNotifications(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	logChange := func() int64 { return dbtest.LogChange(t, db, tenants.ChangesChannel, []byte(`{}`)) }
	position := func() database.ChangePosition { return dbtest.ChangePosition(t, db) }
	created, installed := logChange(), logChange()
	read := position()
	changed := logChange()

	g := New(Config{Tenants: tenants.NewService(tenants.NewStore(db, nil), nil)})
	key := targetKey{"acme", "box"}
	target := &Target{Tenant: &tenants.Tenant{ID: "ten_1", Slug: "acme", Read: read}, Instance: &tenants.Instance{Read: read}}
	instance := func(seq int64) tenants.Change {
		return tenants.Change{Tenant: "ten_1", TenantSlug: "acme", Instance: "box", Seq: seq}
	}
	tenant := tenants.Change{Tenant: "ten_1", TenantSlug: "acme", Seq: created}
	for _, tc := range []struct {
		name      string
		delivered []tenants.Change
		cached    bool
	}{
		{"none", nil, true},
		{"seen", []tenants.Change{tenant, instance(installed)}, true},
		{"another instance's", []tenants.Change{{Tenant: "ten_1", TenantSlug: "acme", Instance: "other", Seq: changed}}, true},
		{"another tenant's", []tenants.Change{{Tenant: "ten_2", TenantSlug: "initech", Seq: changed}}, true},
		{"unseen", []tenants.Change{instance(installed), instance(changed)}, false},
		{"unseen, of the tenant", []tenants.Change{{Tenant: "ten_1", TenantSlug: "acme", Seq: changed}}, false},
		{"every instance", []tenants.Change{{All: true}}, false},
		{"too many", func() []tenants.Change {
			var out []tenants.Change
			for range recentChanges + 1 {
				out = append(out, instance(installed))
			}
			return out
		}(), false},
	} {
		g.mu.Lock()
		gen := g.gen
		g.mu.Unlock()
		for _, c := range tc.delivered {
			g.Invalidate(c)
		}
		g.mu.Lock()
		cached := g.reflectsSinceLocked(gen, key, target)
		g.mu.Unlock()
		if cached != tc.cached {
			t.Errorf("%s: cached = %v, want %v", tc.name, cached, tc.cached)
		}
	}
	// A tenant read before a tenant change it did not see, with an
	// instance loaded after it: the change makes the target stale.
	old := &Target{Tenant: &tenants.Tenant{ID: "ten_1", Slug: "acme"}, Instance: &tenants.Instance{Read: position()}}
	if !old.staleAfter(&tenant, key) {
		t.Error("a target whose tenant was read before a tenant change is not stale after it")
	}
}
