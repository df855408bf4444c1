package gateway

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// targetCache holds resolved targets, least recently used first out,
// bounded by the bytes they are estimated to hold (Target.cost) and by a
// TTL. hashicorp's LRU keeps the order; it bounds entries by count only,
// so the bytes are counted here: every addition evicts the oldest targets
// until the total is within the budget. A target past its TTL is evicted
// when it is next looked up (the budget bounds the memory of those never
// looked up again; a per-entry timer structure would cost more than they
// do). Additions and removals are made under the Gateway's mu.
type targetCache struct {
	lru    *lru.Cache[targetKey, *Target]
	budget int64
	ttl    time.Duration
	used   atomic.Int64
}

func newTargetCache(budget int64, ttl time.Duration) *targetCache {
	c := &targetCache{budget: budget, ttl: ttl}
	// The count bound is never the one reached: no target costs less
	// than targetFixedCost.
	c.lru, _ = lru.NewWithEvict(int(budget/targetFixedCost)+2*minTargets, func(_ targetKey, t *Target) {
		c.used.Add(-t.size)
		t.evict()
	})
	return c
}

// get returns the target cached under key, unless it is past its TTL
// (then it is evicted).
func (c *targetCache) get(key targetKey) (*Target, bool) {
	t, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	if time.Now().UnixNano() > t.expires {
		c.lru.Remove(key)
		return nil, false
	}
	return t, true
}

// add caches t under key (replacing, and evicting, what was there) and
// evicts the least recently used targets beyond the budget, keeping at
// least minTargets. The key's strings are the target's own, so that the
// cache holds one copy of each.
func (c *targetCache) add(key targetKey, t *Target) {
	c.lru.Remove(key)
	key = targetKey{t.Tenant.Slug, t.Instance.Slug}
	t.size = t.cost(key)
	t.expires = time.Now().Add(c.ttl).UnixNano()
	c.used.Add(t.size)
	c.lru.Add(key, t)
	for c.used.Load() > c.budget && c.lru.Len() > minTargets {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// CacheStats describes the cache of resolved instances.
type CacheStats struct {
	// Instances is how many resolved instances are cached.
	Instances int
	// Bytes is the memory they are estimated to hold (see Target.cost),
	// which the budget bounds.
	Bytes, Budget int64
}

// CacheStats returns the state of the cache of resolved instances.
func (g *Gateway) CacheStats() CacheStats {
	return CacheStats{Instances: g.targets.lru.Len(), Bytes: g.targets.used.Load(), Budget: g.targets.budget}
}

// Estimated sizes, in bytes, of what a cached target holds, from heap
// profiles of BenchmarkWarmInstanceHeap (which reports the estimate
// beside the measured heap per instance): the fixed part is the Target,
// its Instance, the LRU's entry and map slot, the held fields' header; a
// field adds its slot and Secret. The credentials built from the fields
// (their map, base URL and redactor) are held weakly (heldFields) and
// not counted: a call holds them while it runs.
const (
	targetFixedCost = 720
	fieldCost       = 96
)

// cost estimates the bytes t holds once warm: the fixed part and its
// strings, its fields from the sizes of their sealed rows (held until
// the first call opens them, then their values).
func (t *Target) cost(key targetKey) int64 {
	in := t.Instance
	n := targetFixedCost + len(key.tenant) + len(key.instance) + len(in.ID) + len(in.Slug)
	for _, a := range in.Agents {
		n += 16 + len(a)
	}
	for _, f := range t.sealed {
		n += fieldCost + len(f.Name) + len(f.Ciphertext)
	}
	return int64(n)
}

// compact returns in as the cache keeps it: only what the call path
// reads (the instance's identity, connector, auth mode and allowlist),
// with the strings other values already hold shared with them. The
// verification record and timestamps are for the admin API, which reads
// the store.
func compact(in *tenants.Instance, ten *tenants.Tenant, connectorID, version string) *tenants.Instance {
	out := &tenants.Instance{ID: in.ID, TenantID: in.TenantID, Slug: in.Slug, ConnectorID: in.ConnectorID,
		ConnectorVersion: in.ConnectorVersion, AuthMode: intern(in.AuthMode), Agents: in.Agents,
		AuthState: intern(in.AuthState), Revision: in.Revision, ToolsMode: intern(in.ToolsMode)}
	if out.TenantID == ten.ID {
		out.TenantID = ten.ID
	}
	if out.ConnectorID == connectorID {
		out.ConnectorID = connectorID
	}
	if out.ConnectorVersion == version {
		out.ConnectorVersion = version
	}
	return out
}

// interned are the few values of an instance's enumerated columns.
var interned = map[string]string{}

func init() {
	for _, v := range []string{registry.ModeAPIKey, registry.ModeAccessToken, registry.ModeClientCredentials,
		registry.ModeOAuth, registry.ModeOAuthCentral, registry.ModeJWT, tenants.AuthReady, tenants.AuthUnverified,
		tenants.ToolsAuto, tenants.ToolsList, tenants.ToolsMeta} {
		interned[v] = v
	}
}

func intern(s string) string {
	if v, ok := interned[s]; ok {
		return v
	}
	return s
}
