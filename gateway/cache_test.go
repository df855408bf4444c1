package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// The intrusive recency list: a lookup makes a target recent, so the
// least recently used (not the first added) goes first; an evicted target
// drops its fields; the bytes counted follow additions and removals; a
// target past its TTL is not returned.
func TestTargetCacheOrder(t *testing.T) {
	ten := &tenants.Tenant{ID: "ten_1", Slug: "acme"}
	conn := &registry.Connector{}
	target := func(i int) *Target {
		tg := &Target{Tenant: ten, Instance: &tenants.Instance{ID: "in", Slug: fmt.Sprintf("crm-%d", i)}, Connector: conn}
		tg.held.Store(&heldFields{})
		return tg
	}
	key := func(i int) targetKey { return targetKey{"acme", fmt.Sprintf("crm-%d", i)} }
	c := newTargetCache(1, time.Hour) // holds minTargets
	var all []*Target
	for i := range minTargets {
		all = append(all, target(i))
		c.add(all[i])
	}
	if _, ok := c.get(key(0)); !ok {
		t.Fatal("crm-0 not cached")
	}
	all = append(all, target(minTargets))
	c.add(all[minTargets])
	if _, ok := c.peek(key(0)); !ok {
		t.Error("the target just looked up was evicted")
	}
	if _, ok := c.peek(key(1)); ok || all[1].held.Load() != nil {
		t.Error("the least recently used target was not evicted, or kept its fields")
	}
	var sum int64
	for _, i := range []int{0, 2, 3, 4, 5, 6, 7, 8} {
		sum += all[i].size
	}
	if c.len() != minTargets || c.used.Load() != sum {
		t.Errorf("len %d used %d, want %d and %d", c.len(), c.used.Load(), minTargets, sum)
	}
	c.removeKeyIf(key(7), func(targetKey, *Target) bool { return false })
	c.removeKeyIf(key(8), func(targetKey, *Target) bool { return true })
	c.remove(func(k targetKey, _ *Target) bool { return k == key(2) })
	if c.len() != minTargets-2 || all[8].held.Load() != nil || all[2].held.Load() != nil {
		t.Error("removed targets are still cached or hold their fields")
	}
	all[3].expires = time.Now().Add(-time.Second).UnixNano()
	if _, ok := c.get(key(3)); ok || c.len() != minTargets-3 {
		t.Error("a target past its TTL was returned or kept")
	}
	c.remove(func(targetKey, *Target) bool { return true })
	if c.len() != 0 || c.used.Load() != 0 || c.root.next != &c.root || c.root.prev != &c.root {
		t.Error("an emptied cache still holds targets or bytes")
	}
}
