package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// targetCache holds resolved targets, least recently used first out,
// bounded by the bytes they are estimated to hold (Target.cost) and by a
// TTL. The recency list is intrusive (each Target carries its links)
// rather than a container/list or hashicorp LRU element per entry: that
// element was about 96 B of every warm instance, a tenth of what one
// holds. Every addition evicts the oldest targets until the total is
// within the budget. A target past its TTL is evicted when it is next
// looked up (the budget bounds the memory of those never looked up
// again; a per-entry timer structure would cost more than they do).
// Evicted targets drop what they hold (Target.evict) after the lock is
// released: stopping a local server may wait.
type targetCache struct {
	mu     sync.Mutex
	items  map[targetKey]*Target
	root   Target // root.next is the most recently used, root.prev the least
	budget int64
	ttl    time.Duration
	used   atomic.Int64
}

func newTargetCache(budget int64, ttl time.Duration) *targetCache {
	c := &targetCache{budget: budget, ttl: ttl, items: map[targetKey]*Target{}}
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

func (c *targetCache) unlink(t *Target) {
	t.prev.next, t.next.prev = t.next, t.prev
	t.prev, t.next = nil, nil
}

func (c *targetCache) pushFront(t *Target) {
	t.prev, t.next = &c.root, c.root.next
	c.root.next.prev = t
	c.root.next = t
}

// removeLocked takes key out of the cache and returns its target for
// eviction, nil when it was not cached.
func (c *targetCache) removeLocked(key targetKey) *Target {
	t, ok := c.items[key]
	if !ok {
		return nil
	}
	delete(c.items, key)
	c.unlink(t)
	c.used.Add(-t.size)
	return t
}

// get returns the target cached under key, unless it is past its TTL
// (then it is evicted).
func (c *targetCache) get(key targetKey) (*Target, bool) {
	c.mu.Lock()
	t, ok := c.items[key]
	if ok && time.Now().UnixNano() <= t.expires {
		if c.root.next != t {
			c.unlink(t)
			c.pushFront(t)
		}
		c.mu.Unlock()
		return t, true
	}
	if ok {
		c.removeLocked(key)
	}
	c.mu.Unlock()
	if ok {
		t.evict()
	}
	return nil, false
}

// peek returns the target cached under key without making it recent.
func (c *targetCache) peek(key targetKey) (*Target, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.items[key]
	return t, ok
}

// add caches t under its tenant and instance slugs (replacing, and
// evicting, what was there) and evicts the least recently used targets
// beyond the budget, keeping at least minTargets. The key's strings are
// the target's own, so that the cache holds one copy of each.
func (c *targetCache) add(t *Target) {
	key := targetKey{t.Tenant.Slug, t.Instance.Slug}
	t.size = t.cost(key)
	t.expires = time.Now().Add(c.ttl).UnixNano()
	c.mu.Lock()
	var evicted []*Target
	if old := c.removeLocked(key); old != nil {
		evicted = append(evicted, old)
	}
	c.items[key] = t
	c.pushFront(t)
	c.used.Add(t.size)
	for c.used.Load() > c.budget && len(c.items) > minTargets {
		oldest := c.root.prev
		evicted = append(evicted, c.removeLocked(targetKey{oldest.Tenant.Slug, oldest.Instance.Slug}))
	}
	c.mu.Unlock()
	for _, e := range evicted {
		e.evict()
	}
}

// removeKeyIf evicts the target cached under key, if any and match
// reports true for it.
func (c *targetCache) removeKeyIf(key targetKey, match func(targetKey, *Target) bool) {
	c.mu.Lock()
	var t *Target
	if cur, ok := c.items[key]; ok && match(key, cur) {
		t = c.removeLocked(key)
	}
	c.mu.Unlock()
	if t != nil {
		t.evict()
	}
}

// remove evicts the targets whose key and target match.
func (c *targetCache) remove(match func(targetKey, *Target) bool) {
	c.mu.Lock()
	var evicted []*Target
	for k, t := range c.items {
		if match(k, t) {
			evicted = append(evicted, c.removeLocked(k))
		}
	}
	c.mu.Unlock()
	for _, e := range evicted {
		e.evict()
	}
}

// drain takes every target out of the cache and returns them.
func (c *targetCache) drain() []*Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Target, 0, len(c.items))
	for k := range c.items {
		out = append(out, c.removeLocked(k))
	}
	return out
}

// len returns how many targets are cached.
func (c *targetCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
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
	return CacheStats{Instances: g.targets.len(), Bytes: g.targets.used.Load(), Budget: g.targets.budget}
}

// Estimated sizes, in bytes, of what a cached target holds, from heap
// profiles of BenchmarkWarmInstanceHeap (which reports the estimate
// beside the measured heap per instance): the fixed part is the Target,
// its Instance, the LRU's entry and map slot, the held fields' header; a
// field adds its slot and Secret. The credentials built from the fields
// (their map, base URL and redactor) are held weakly (heldFields) and
// not counted: a call holds them while it runs.
const (
	targetFixedCost = 640
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
// reads (the instance's identity, connector, auth mode and allowlist) and
// the change log's position it was read at (Gateway.Invalidate),
// with the strings other values already hold shared with them. The
// verification record and timestamps are for the admin API, which reads
// the store.
func compact(in *tenants.Instance, ten *tenants.Tenant, connectorID, version string) *tenants.Instance {
	out := &tenants.Instance{ID: in.ID, TenantID: in.TenantID, Slug: in.Slug, ConnectorID: in.ConnectorID,
		ConnectorVersion: in.ConnectorVersion, AuthMode: intern(in.AuthMode), Agents: in.Agents,
		AuthState: intern(in.AuthState), Revision: in.Revision, ToolsMode: intern(in.ToolsMode), Read: in.Read}
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
