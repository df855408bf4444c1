// Package gateway is the agent call path shared by the MCP endpoint, App
// mode and the OAuth connect pages: resolve the app instance, authenticate
// the caller, validateAgent, buildAppAuth, dispatch the operation upstream
// (through registry, or registry/mcpremote for hosted MCP servers), audit.
// It serves no HTTP itself.
//
// Instances (with their connector) and, once a call has passed
// validateAgent, their decrypted field values are cached in memory and
// dropped on Invalidate, which the server assembly subscribes to
// tenants.Service's changes, so that a warm call costs no database round
// trip.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/egress"
	"github.com/switchboardhq/switchboard/metrics"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/registry/mcpremote"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
	"github.com/switchboardhq/switchboard/tracing"
)

// Config wires a Gateway.
type Config struct {
	Tenants *tenants.Service
	Catalog *registry.Catalog
	// Callers authenticates callers; nil uses auth.NewCallers on the
	// tenants' store. The assembly subscribes it to tenant changes.
	Callers    *auth.Callers
	AppAuth    *auth.AppAuth
	Dispatcher *registry.Dispatcher
	Logger     *slog.Logger
	// Audit receives one entry per call; nil records nothing.
	Audit audit.Recorder
	// RemoteClient reaches the hosted MCP servers of mcp_remote
	// instances: it must be an egress client (dial guard, timeouts, no
	// redirects). Nil uses Dispatcher.Client, else a default egress
	// client that reaches public addresses only.
	RemoteClient *http.Client
	// CacheBudget is the memory, in bytes, the cache of resolved
	// instances (with their decrypted fields) may hold; 0 is
	// DefaultCacheBudget. The least recently used instances go first.
	CacheBudget int64
	// CacheTTL is how long a resolved instance stays cached, used or not;
	// 0 is DefaultCacheTTL.
	CacheTTL time.Duration
	// Metrics receives the calls' counts and step times; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Tracer records the calls' steps as spans; nil (tracing off) records
	// nothing.
	Tracer *tracing.Tracer
	// Local runs the servers of mcp_local instances; nil serves none
	// (connector_unavailable).
	Local *mcplocal.Manager
	// PublicURL is the server's public base URL: consent_required errors
	// link to the console page where a user sets their own values.
	PublicURL string
	// Admission admits calls (limits, upstream waits, fair shares); nil
	// admits every call.
	Admission *admission.Controller
}

// Cache defaults. The budget is counted in the bytes each target is
// estimated to hold (Target.cost); the minTargets most recently used stay
// whatever the budget.
const (
	DefaultCacheBudget = 192 << 20
	DefaultCacheTTL    = 10 * time.Minute
	minTargets         = 8
)

// Gateway resolves, authorizes and dispatches agent calls.
type Gateway struct {
	tenants    *tenants.Service
	store      *tenants.Store
	secrets    *secrets.Store
	catalog    *registry.Catalog
	callers    *auth.Callers
	appAuth    *auth.AppAuth
	dispatcher *registry.Dispatcher
	logger     *slog.Logger
	audit      audit.Recorder
	refusals   audit.RefusalLimit
	remote     *http.Client
	metrics    *metrics.Metrics
	tracer     *tracing.Tracer
	publicURL  string
	local      *mcplocal.Manager
	admission  *admission.Controller

	// mu orders invalidations (gen) against the caching of lookups.
	mu sync.Mutex
	// targets is bounded by the budget and the TTL; an evicted target
	// drops its decrypted fields and its hosted-server connection.
	targets *targetCache
	// names maps each compiled registry's operations to their tool and
	// action names, shared by every instance of the connector version.
	names *lru.Cache[*registry.Spec, map[*registry.Operation][2]string]
	// unknown remembers the instances (and tenants) the store did not
	// have, for UnknownInstanceTTL or until a change creates them.
	unknown *expirable.LRU[targetKey, struct{}]
	// gen increases on every invalidation, so that a Resolve that raced
	// with one does not cache what it read, unless what it read already
	// reflects every change delivered meanwhile: recent holds the last
	// changes delivered, the one of generation n at n % len(recent).
	gen    uint64
	recent [recentChanges]tenants.Change
}

// recentChanges is how many of the last invalidations a Resolve that
// raced with them checks its target against; one that raced with more
// does not cache its target.
const recentChanges = 32

type targetKey struct{ tenant, instance string }

// Bounds of the cache of unknown instances: a request for one is refused
// without a query while it is remembered. Creating the tenant or the
// instance forgets it at once (Invalidate), here and, through the change
// notifications, on the other replicas.
const (
	UnknownInstanceTTL  = 30 * time.Second
	maxUnknownInstances = 10_000
)

// New returns a gateway. It registers nothing on the tenant service: the
// assembly subscribes Invalidate (and the callers' Invalidate) to its
// changes.
func New(cfg Config) *Gateway {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	appAuth := cfg.AppAuth
	if appAuth == nil {
		appAuth = auth.NewAppAuth()
	}
	dispatcher := cfg.Dispatcher
	if dispatcher == nil {
		dispatcher = &registry.Dispatcher{}
	}
	remote := cfg.RemoteClient
	if remote == nil {
		remote = dispatcher.Client
	}
	if remote == nil {
		remote = egress.NewClient(egress.Config{})
	}
	store := cfg.Tenants.Store()
	callers := cfg.Callers
	if callers == nil {
		callers = auth.NewCallers(store)
	}
	budget, ttl := cfg.CacheBudget, cfg.CacheTTL
	if budget <= 0 {
		budget = DefaultCacheBudget
	}
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	names, _ := lru.New[*registry.Spec, map[*registry.Operation][2]string](maxSpecs)
	g := &Gateway{
		tenants:    cfg.Tenants,
		store:      store,
		secrets:    store.Secrets(),
		catalog:    cfg.Catalog,
		callers:    callers,
		appAuth:    appAuth,
		dispatcher: dispatcher,
		logger:     logger,
		audit:      cfg.Audit,
		remote:     remote,
		metrics:    cfg.Metrics,
		tracer:     cfg.Tracer,
		publicURL:  strings.TrimRight(cfg.PublicURL, "/"),
		local:      cfg.Local,
		admission:  cfg.Admission,
		targets:    newTargetCache(budget, ttl),
		names:      names,
		unknown:    expirable.NewLRU[targetKey, struct{}](maxUnknownInstances, nil, UnknownInstanceTTL),
	}
	return g
}

// Logger returns the gateway's logger.
func (g *Gateway) Logger() *slog.Logger { return g.logger }

// Callers returns the gateway's caller authentication.
func (g *Gateway) Callers() *auth.Callers { return g.callers }

// Target is a resolved app instance: its tenant, the instance, and the
// connector it installs. Its field rows are read with the instance, in
// the same query, and opened on first use by Call, after validateAgent;
// the values are then kept with it, and the sealed rows dropped.
type Target struct {
	Tenant    *tenants.Tenant
	Instance  *tenants.Instance
	Connector *registry.Connector

	loadMu sync.Mutex
	// held are the decrypted field values once opened (under loadMu);
	// nil until then, and once evicted.
	held atomic.Pointer[heldFields]
	// sealed are the field rows read with the instance, until opened
	// (under loadMu); nil once opened, or for a target resolved without
	// them.
	sealed []secrets.Sealed
	// size is what the target is counted at in the cache's budget;
	// expires is when it leaves the cache (Unix nanoseconds); prev and
	// next link it in the cache's recency list (under its mu).
	size, expires int64
	prev, next    *Target

	// remote is the connection to the hosted MCP server (mcp_remote),
	// made on first use (remoteConn); closedRemote once evicted.
	remote atomic.Pointer[mcpremote.Conn]

	// users holds, by user id, the credentials of the users who called
	// (the instance's fields with their own user-scope values), for
	// connectors with user-scope fields.
	users usersCache

	// local runs the target's servers (mcp_local), stopped on eviction.
	local *mcplocal.Manager
}

// maxSpecs bounds the shared per-connector name maps: a catalog holds a
// few hundred connector versions, and a reload replaces them.
const maxSpecs = 4096

// evict drops what a target holds once the cache lets it go: its
// decrypted fields (a call in flight keeps its own reference) and its
// hosted-server connection.
func (t *Target) evict() {
	if c := t.release(); c != nil {
		c.Close()
	}
	if t.local != nil {
		tenant, slug := string(t.Instance.TenantID), t.Instance.Slug
		t.local.Stop(func(k mcplocal.Key) bool { return k.Tenant == tenant && k.Instance == slug })
	}
}

// release drops the target's decrypted fields and returns its live
// hosted-server connection, nil when it has none, for the caller to end.
func (t *Target) release() *mcpremote.Conn {
	t.held.Store(nil)
	t.users.clear()
	if c := t.remote.Swap(closedRemote); c != nil && c != closedRemote {
		return c
	}
	return nil
}

// Close ends what the gateway holds open to the servers it proxies, at
// shutdown: every cached instance is evicted, and the client sessions of
// mcp_remote instances are closed before Close returns (their streams,
// such as the listen the SDK's client keeps open to a 2026-07-28 server,
// end with them; a hosted server's own shutdown would wait for them
// otherwise). The local servers of mcp_local instances are stopped. A
// call made afterwards connects again; the server calls Close once it
// has stopped serving.
func (g *Gateway) Close() {
	var wg sync.WaitGroup
	for _, t := range g.targets.drain() {
		if c := t.release(); c != nil {
			wg.Go(c.Shutdown)
		}
	}
	if g.local != nil {
		g.local.Stop(func(mcplocal.Key) bool { return true })
	}
	wg.Wait()
}

// closedRemote is the connection of every evicted target: a call still
// holding one is refused with "call again", as by a connection closed
// under it.
var closedRemote = func() *mcpremote.Conn {
	c := &mcpremote.Conn{}
	c.Close()
	return c
}()

// remoteConn returns t's connection to its hosted MCP server, made on
// first use: most instances are not mcp_remote, and a cached target
// should not carry one.
func (t *Target) remoteConn() *mcpremote.Conn {
	if c := t.remote.Load(); c != nil {
		return c
	}
	t.remote.CompareAndSwap(nil, &mcpremote.Conn{})
	return t.remote.Load()
}

// toolAction returns the entity (tool) and action names of op in t's
// connector, for audit rows. The map is built once per connector version
// and shared by all its instances.
func (g *Gateway) toolAction(t *Target, op *registry.Operation) (string, string) {
	spec := t.Connector.Spec
	names, ok := g.names.Get(spec)
	if !ok {
		names = map[*registry.Operation][2]string{}
		if spec != nil {
			for _, e := range spec.Entities {
				for _, a := range e.Actions {
					if a.Op != nil {
						names[a.Op] = [2]string{e.Name, a.Name}
					}
				}
			}
		}
		g.names.Add(spec, names)
	}
	if n, ok := names[op]; ok {
		return n[0], n[1]
	}
	return "", op.Name
}

// credentials are an instance's decrypted field values and the base URL
// expanded from them.
type credentials struct {
	fields  map[string]secrets.Secret
	baseURL string
	// base is baseURL parsed, nil when it does not parse.
	base *url.URL
	// servers are the URLs of the operation-level servers
	// (registry.ServerURLs).
	servers map[string]string
	// red redacts the secret fields; a call adds the credentials auth
	// puts in play (redactor).
	red *secrets.Redactor
	// last is the redactor of the last call's credentials, reused while
	// they stay the same (a token lives for many calls).
	last atomic.Pointer[callRedactor]
	// static is the applier of a static auth mode (auth.AppAuth.Static)
	// built from these fields, kept for the calls made with them.
	static atomic.Pointer[staticApplier]
}

// staticApplier is an applier and what it was built for.
type staticApplier struct {
	mode     string
	manifest *registry.Manifest
	ap       registry.Applier
}

// callRedactor is a redactor and the credential values it was built for.
type callRedactor struct {
	values []string
	red    *secrets.Redactor
}

// redactor returns the one redactor of a call made with applier a: the
// instance's secret fields and every secret value a puts in the request
// (an access token, a key).
func (c *credentials) redactor(a registry.Applier) *secrets.Redactor {
	h, ok := a.(auth.SecretHolder)
	if !ok {
		return c.red
	}
	held := h.Secrets()
	if c.red.Covers(held...) {
		// The usual case of static credentials (an API key is a field):
		// no second redactor to build or keep.
		return c.red
	}
	if last := c.last.Load(); last != nil && sameValues(last.values, held) {
		return last.red
	}
	values := make([]string, len(held))
	for i, v := range held {
		values[i] = v.Reveal()
	}
	r := &callRedactor{values: values, red: c.red.With(values...)}
	c.last.Store(r)
	return r.red
}

func sameValues(values []string, held []secrets.Secret) bool {
	if len(values) != len(held) {
		return false
	}
	for i, v := range held {
		if values[i] != v.Reveal() {
			return false
		}
	}
	return true
}

// Spec returns the target's compiled registry.
func (t *Target) Spec() *registry.Spec { return t.Connector.Spec }

// errUndecryptable is the answer when a field of the instance does not
// decrypt: the call cannot be made until an admin enters it again.
var errUndecryptable = switchboard.E(switchboard.ErrConflict, "undecryptable",
	"a stored field of this app instance cannot be decrypted; a workspace admin must enter it again")

// errNoInstance is the answer for an unknown tenant or instance alike.
var errNoInstance = switchboard.E(switchboard.ErrNotFound, "not_found", "no such app instance in this workspace")

// Resolve returns the instance instanceSlug of tenant tenantSlug, from the
// cache when warm. An unknown tenant or instance is an ErrNotFound error
// with code "not_found" that does not say which.
func (g *Gateway) Resolve(ctx context.Context, tenantSlug, instanceSlug string) (*Target, error) {
	key := targetKey{tenantSlug, instanceSlug}
	g.mu.Lock()
	gen := g.gen
	g.mu.Unlock()
	if t, ok := g.targets.get(key); ok {
		g.metrics.Lookup(metrics.CacheInstance, true)
		return t, nil
	}
	g.metrics.Lookup(metrics.CacheInstance, false)
	if !switchboard.ValidSlug(tenantSlug) || !switchboard.ValidSlug(instanceSlug) || g.unknown.Contains(key) {
		return nil, errNoInstance
	}
	ten, err := g.store.CachedTenant(ctx, tenantSlug)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, g.notFound(key, gen)
	}
	if err != nil {
		g.metrics.StoreError("gateway")
		return nil, err
	}
	in, sealed, err := g.store.InstanceForCall(ctx, ten.ID, instanceSlug)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, g.notFound(key, gen)
	}
	if err != nil {
		g.metrics.StoreError("gateway")
		return nil, err
	}
	conn, ok := g.catalog.Connector(in.ConnectorID)
	if !ok {
		return nil, switchboard.E(switchboard.ErrUnavailable, "connector_unavailable",
			"the connector %s of this app instance is not in the catalog", in.ConnectorID)
	}
	if conn.Spec == nil && !mcpremote.Is(conn) && !(mcplocal.Is(conn) && g.local != nil) {
		return nil, switchboard.E(switchboard.ErrUnavailable, "connector_unavailable",
			"connectors of type %s are not served yet", conn.Manifest.Type)
	}
	t := &Target{Tenant: ten, Instance: compact(in, ten, conn.Manifest.ID, conn.Manifest.Version), Connector: conn,
		local: g.local, sealed: sealed}
	g.mu.Lock()
	if g.reflectsSinceLocked(gen, key, t) {
		g.targets.add(t)
	}
	g.mu.Unlock()
	return t, nil
}

// reflectsSinceLocked reports whether t, read for key, reflects every
// change delivered since generation gen (none was, or none makes it
// stale), so that it may be cached.
func (g *Gateway) reflectsSinceLocked(gen uint64, key targetKey, t *Target) bool {
	if g.gen-gen > recentChanges {
		return false
	}
	for n := gen + 1; n <= g.gen; n++ {
		if t.staleAfter(&g.recent[n%recentChanges], key) {
			return false
		}
	}
	return true
}

// staleAfter reports whether change ch makes t, cached under key, stale:
// ch concerns it (every instance, its instance, or its tenant) and t was
// read before ch committed. An instance's change is reflected when the
// instance's load saw it (Instance.Read); a tenant's when the tenant's
// read saw it too (Tenant.Read). Change{All: true} has no sequence, and
// is never reflected.
//
// So the late notification of a change t was read after (notifications
// come after their change commits, on every replica, the one that made
// it included) leaves t and the calls using it alone: dropping t would
// close its hosted server's session under a call just made with what is
// current.
func (t *Target) staleAfter(ch *tenants.Change, key targetKey) bool {
	switch {
	case ch.All:
		return true
	case ch.Instance != "":
		return key == targetKey{ch.TenantSlug, ch.Instance} && !t.Instance.Read.Saw(ch.Seq)
	default:
		return (key.tenant == ch.TenantSlug || t.Tenant.ID == ch.Tenant) && !(t.Instance.Read.Saw(ch.Seq) && t.Tenant.Read.Saw(ch.Seq))
	}
}

// notFound remembers key as unknown, unless a change raced with the
// lookup (gen moved), and returns the refusal.
func (g *Gateway) notFound(key targetKey, gen uint64) error {
	g.mu.Lock()
	if g.gen == gen {
		g.unknown.Add(key, struct{}{})
	}
	g.mu.Unlock()
	return errNoInstance
}

// Invalidate drops the cached targets a change makes stale: the changed
// instance, or every instance of the tenant for a tenant-wide change,
// unless they were read after the change committed (Target.staleAfter);
// and forgets the instances remembered as unknown that the change may
// have created. Subscribe it to tenants.Service.
func (g *Gateway) Invalidate(ch tenants.Change) {
	if ch.Caller != "" && ch.Instance == "" && !ch.All {
		return // caller changes are the Callers' business
	}
	if ch.User != "" && ch.Instance != "" && !ch.All {
		// One user's own values changed: only what is held for them goes.
		if t, ok := g.targets.peek(targetKey{ch.TenantSlug, ch.Instance}); ok {
			t.users.forget(ch.User)
		}
		if g.local != nil {
			tenant, user := string(ch.Tenant), ch.User
			g.local.Stop(func(k mcplocal.Key) bool { return k.Tenant == tenant && k.Instance == ch.Instance && k.User == user })
		}
		return
	}
	// Removing a target evicts it (Target.evict).
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.recent[g.gen%recentChanges] = ch
	stale := func(k targetKey, t *Target) bool { return t.staleAfter(&ch, k) }
	if ch.All {
		g.unknown.Purge()
		g.targets.remove(stale)
	} else if ch.Instance != "" {
		key := targetKey{ch.TenantSlug, ch.Instance}
		g.unknown.Remove(key)
		g.targets.removeKeyIf(key, stale)
	} else {
		// A created tenant: every instance slug under it was unknown.
		for _, k := range g.unknown.Keys() {
			if k.tenant == ch.TenantSlug {
				g.unknown.Remove(k)
			}
		}
		g.targets.remove(stale)
	}
}

// Authorize authenticates the request's caller for tenantSlug, resolves the
// instance and runs validateAgent — all before any credential of the
// instance is touched. No agent id is ErrForbidden "missing_agent_id"; an
// agent not on the instance's allowlist is ErrForbidden
// "agent_not_allowed", returned with the principal and the target (so the
// refusal can be audited); callers must check the error first.
func (g *Gateway) Authorize(ctx context.Context, r *http.Request, tenantSlug, instanceSlug string) (*auth.Principal, *Target, error) {
	return g.AuthorizeInto(ctx, r, tenantSlug, instanceSlug, nil)
}

// AuthorizeInto is Authorize with the principal written into *into when
// into is not nil and the credential is an API key
// (auth.Callers.AuthenticateInto): no principal allocated per call.
func (g *Gateway) AuthorizeInto(ctx context.Context, r *http.Request, tenantSlug, instanceSlug string, into *auth.Principal) (*auth.Principal, *Target, error) {
	start := time.Now()
	p, err := g.callers.AuthenticateInto(ctx, r, tenantSlug, into)
	resolved := time.Now()
	g.metrics.Step(metrics.StepAuthenticate, resolved.Sub(start))
	if g.tracer != nil {
		g.tracer.Step(ctx, "authenticate", start, resolved, errorCode(err))
	}
	if err != nil {
		return nil, nil, err
	}
	t, err := g.Resolve(ctx, tenantSlug, instanceSlug)
	g.metrics.Since(metrics.StepResolve, resolved)
	if g.tracer != nil {
		g.tracer.Step(ctx, "resolve", resolved, time.Now(), errorCode(err))
	}
	if err != nil {
		return nil, nil, err
	}
	if err := validateAgent(p, t); err != nil {
		// p and t come with the refusal, for Refused.
		return p, t, err
	}
	return p, t, nil
}

// Authenticate authenticates the request's caller for tenantSlug: the
// principal, with no instance resolved and no allowlist checked.
func (g *Gateway) Authenticate(ctx context.Context, r *http.Request, tenantSlug string) (*auth.Principal, error) {
	return g.callers.Authenticate(ctx, r, tenantSlug)
}

// validateAgent fails closed: the call must name an agent, and the agent
// must be on the instance's allowlist.
func validateAgent(p *auth.Principal, t *Target) error {
	if err := identityText(p); err != nil {
		return err
	}
	if p == nil || p.AgentID == "" {
		return switchboard.E(switchboard.ErrForbidden, "missing_agent_id",
			"the call names no agent: the credential carries none and no %s header was sent", auth.HeaderAgentID)
	}
	if p.Tenant != t.Instance.TenantID || !t.Instance.AllowsAgent(p.AgentID) {
		return switchboard.E(switchboard.ErrForbidden, "agent_not_allowed",
			"the agent is not on this app instance's list of allowed agents")
	}
	return nil
}

// identityText refuses a principal whose agent id, user id or
// targetUserId holds a NUL byte (from a caller JWT's claims or a tool
// argument), before it reaches a store (grants, audit).
func identityText(p *auth.Principal) error {
	if p == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"the agent id", p.AgentID}, {"the user id", p.UserID}, {TargetUserArg, p.TargetUserID}} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return switchboard.E(switchboard.ErrInvalid, "invalid_text", "%s contains a NUL byte", f.name)
		}
	}
	return nil
}

// credentials returns the target's credentials: its decrypted fields,
// opened once and kept, and what is built from them (see heldFields).
// A failed load is not kept, so the next call retries.
func (g *Gateway) credentials(ctx context.Context, t *Target) (*credentials, error) {
	if h := t.held.Load(); h != nil {
		if c := h.built(); c != nil {
			return c, nil
		}
	}
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	h := t.held.Load()
	if h != nil {
		if c := h.built(); c != nil {
			return c, nil
		}
	} else {
		var (
			fields map[string]secrets.Secret
			err    error
		)
		if t.sealed != nil {
			// Read with the instance: no query.
			fields, err = g.secrets.OpenAll(t.Instance.TenantID, t.Instance.SecretOwner(), t.sealed)
		} else {
			fields, err = g.secrets.GetAll(ctx, t.Instance.TenantID, t.Instance.SecretOwner())
		}
		if errors.Is(err, secrets.ErrUndecryptable) {
			// The cause names the row (tenant, owner, field), never a value.
			g.logger.Warn("instance field does not decrypt", "tenant", t.Tenant.Slug, "instance", t.Instance.Slug, "err", err)
			return nil, errUndecryptable.WithCause(err)
		}
		if err != nil {
			g.metrics.StoreError("gateway")
			return nil, err
		}
		h = holdFields(&t.Connector.Manifest, fields)
		t.held.Store(h)
		t.sealed = nil
	}
	c := newCredentials(t.Connector, h.fieldMap())
	h.keep(c)
	return c, nil
}

// heldFields is what a cached target keeps of its credentials: the
// decrypted values, in a slice (a map of a few entries costs five times
// the bytes), and a weak reference to the credentials built from them
// (their field map, base URL and redactor, whose forms of each secret
// are several times its size). A call holds the credentials it uses, and
// so does every call while the instance is busy; once no call has held
// them for a garbage collection, the collector takes them, and the next
// call builds them again from the values (no query, no decryption). A
// warm instance at rest thus costs its values, not their derivatives
// (issue 19: ≤ 2 KB per warm instance).
type heldFields struct {
	fields []heldField
	creds  atomic.Pointer[weak.Pointer[credentials]]
}

type heldField struct {
	name string
	v    secrets.Secret
}

// holdFields returns fields as a target keeps them, their names shared
// with m's when declared there.
func holdFields(m *registry.Manifest, fields map[string]secrets.Secret) *heldFields {
	h := &heldFields{fields: make([]heldField, 0, len(fields))}
	for name, v := range fields {
		if f, ok := m.Field(name); ok {
			name = f.Name
		}
		h.fields = append(h.fields, heldField{name, v})
	}
	return h
}

// fieldMap returns the values by name, as auth and registry take them.
func (h *heldFields) fieldMap() map[string]secrets.Secret {
	out := make(map[string]secrets.Secret, len(h.fields))
	for _, f := range h.fields {
		out[f.name] = f.v
	}
	return out
}

// built returns the credentials last built from h, unless the collector
// took them.
func (h *heldFields) built() *credentials {
	if w := h.creds.Load(); w != nil {
		return w.Value()
	}
	return nil
}

// keep makes c the credentials built from h, weakly held.
func (h *heldFields) keep(c *credentials) {
	w := weak.Make(c)
	h.creds.Store(&w)
}

// ModeInput returns what buildAppAuth and the OAuth flows need for the
// instance t acting as p: its tenant, instance, manifest and decrypted
// field values. p may be nil (a flow's callback has no caller).
func (g *Gateway) ModeInput(ctx context.Context, t *Target, p *auth.Principal) (auth.ModeInput, error) {
	if p != nil {
		if err := g.callers.CheckTarget(ctx, p); err != nil {
			return auth.ModeInput{}, err
		}
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return auth.ModeInput{}, err
	}
	return modeInput(t, c, p), nil
}

// modeInput is the auth.ModeInput of t with the credentials c as p.
func modeInput(t *Target, c *credentials, p *auth.Principal) auth.ModeInput {
	return auth.ModeInput{Tenant: t.Instance.TenantID, Instance: t.Instance, Manifest: &t.Connector.Manifest, Fields: c.fields, Principal: p}
}

// newCredentials returns the credentials of an instance of conn with the
// given field values: the fields and the base URL expanded from them.
func newCredentials(conn *registry.Connector, fields map[string]secrets.Secret) *credentials {
	m := &conn.Manifest
	base := auth.ExpandEnv(m.BaseURL, m, fields)
	if m.BaseURL == "" && conn.Spec != nil && len(conn.Spec.Servers) > 0 {
		base = conn.Spec.Servers[0]
	}
	c := &credentials{fields: fields, baseURL: base, servers: registry.ServerURLs(m, fields), red: registry.NewRedactor(m, fields)}
	if u, err := url.Parse(base); err == nil {
		c.base = u // parsed once, not per call
	}
	return c
}

// Call runs validateAgent again (defence in depth), builds the instance's
// upstream credentials for p (buildAppAuth) and dispatches op with args.
// The credentials are those of p.Subject(): a trusted caller's
// targetUserId, else the caller's own user. An upstream failure is a
// *registry.UpstreamError, returned with the upstream response when there
// was one. When the upstream refuses a token-based credential (401), the
// token is dropped and the call retried once with a new one. Every call
// is audited.
func (g *Gateway) Call(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args map[string]any) (*registry.Response, error) {
	return g.callAudited(ctx, t, p, op, callArgs{m: args}, true)
}

// CallStrings is Call with arguments that are all strings, given as a
// list of distinct names (registry.Call.Strings): the same call, without
// building a map.
func (g *Gateway) CallStrings(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args []registry.StringArg) (*registry.Response, error) {
	return g.CallStringsInto(ctx, t, p, op, args, nil)
}

// CallStringsInto is CallStrings writing the upstream's response into
// into (registry.Dispatcher.DoInto) when it is not nil: a caller that has
// one allocation per request keeps the response there.
func (g *Gateway) CallStringsInto(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args []registry.StringArg, into *registry.Response) (*registry.Response, error) {
	if args == nil {
		args = []registry.StringArg{} // no arguments, not Call's nil map
	}
	return g.callAudited(ctx, t, p, op, callArgs{list: args, into: into}, true)
}

// callArgs are a call's arguments: a map, or a list of strings when m is
// nil and list is not; and where the response goes (nil: a new one).
type callArgs struct {
	m    map[string]any
	list []registry.StringArg
	into *registry.Response
}

// CallResource is Call for an MCP Resource flow (package knowledge): the
// agent allowlist does not apply, because nobody in a Resource flow is an
// agent; the MCP endpoint's resource guard decided who may read (a
// member, or a trusted knowledge-sync caller for a member or the
// instance). Everything else is Call's: targetUserId checked, the
// subject's credentials, egress guard, redaction, audit row.
func (g *Gateway) CallResource(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args map[string]any) (*registry.Response, error) {
	if p == nil {
		return nil, switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the call is not authenticated")
	}
	return g.callAudited(ctx, t, p, op, callArgs{m: args}, false)
}

func (g *Gateway) callAudited(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args callArgs, agent bool) (*registry.Response, error) {
	start := time.Now()
	var record audit.Admission
	if g.audit != nil && p != nil && t != nil {
		// A call whose row could not be kept never reaches the upstream.
		var err error
		if record, err = g.audit.Admit(); err != nil {
			return nil, err
		}
	}
	tk, err := g.admit(ctx, t, p)
	var resp *registry.Response
	if err == nil {
		resp, err = g.call(ctx, t, p, op, args, agent)
		tk.Done()
	}
	g.logRefusal(t, err)
	g.count(ctx, t, start, err)
	if g.tracer != nil && t != nil {
		code := errorCode(err)
		if code == "" {
			code = "ok"
		}
		g.tracer.Outcome(ctx, t.Instance.ConnectorID, code)
	}
	if record.Admitted() {
		tool, action := g.toolAction(t, op)
		e := audit.Entry{Time: start.UTC(), Tenant: t.Instance.TenantID, Instance: t.Instance.Slug, Agent: p.AgentID,
			Actor: p.UserID, Subject: p.Subject(), Tool: tool, Action: action, Outcome: "ok",
			LatencyUs: time.Since(start).Microseconds()}
		if p.Caller != nil {
			e.Caller = string(p.Caller.ID)
		}
		if resp != nil {
			e.Status = resp.Status
		}
		if err != nil {
			e.Outcome = switchboard.CodeOf(err)
			var ue *registry.UpstreamError
			if errors.As(err, &ue) {
				e.Status = ue.Status
			}
		}
		record.Record(e)
	}
	return resp, err
}

// Surface says through which surface (mcp, app) and MCP protocol version
// a call came, for the calls' metrics. Use one value per surface and
// version (the label values must stay few), never one built per request.
type Surface struct{ Name, Protocol string }

type surfaceKey struct{}

// WithSurface returns ctx carrying s, which Call reads.
func WithSurface(ctx context.Context, s *Surface) context.Context {
	return context.WithValue(ctx, surfaceKey{}, s)
}

// SurfaceContext is WithSurface's context kept in memory the caller
// allocated anyway (WithSurfaceIn): no context value allocated per call.
type SurfaceContext struct {
	context.Context
	s *Surface
}

// Value implements context.Context.
func (c *SurfaceContext) Value(key any) any {
	if key == (surfaceKey{}) {
		return c.s
	}
	return c.Context.Value(key)
}

// WithSurfaceIn is WithSurface in *dst, which must live as long as the
// context returned (dst itself) is used.
func WithSurfaceIn(dst *SurfaceContext, ctx context.Context, s *Surface) context.Context {
	*dst = SurfaceContext{Context: ctx, s: s}
	return dst
}

var unknownSurface = &Surface{Name: "other", Protocol: "none"}

// count counts a call in the metrics: its connector, surface, auth mode,
// outcome code and protocol version, and its total time.
func (g *Gateway) count(ctx context.Context, t *Target, start time.Time, err error) {
	if g.metrics == nil || t == nil {
		return
	}
	g.metrics.Since(metrics.StepTotal, start)
	s, _ := ctx.Value(surfaceKey{}).(*Surface)
	if s == nil {
		s = unknownSurface
	}
	code := "ok"
	if err != nil {
		code = switchboard.CodeOf(err)
	}
	g.metrics.Call(t.Instance.ConnectorID, s.Name, t.Instance.AuthMode, code, s.Protocol)
}

// Refused audits a call (tool, or App-mode operation) refused after its
// tenant is known: a bad caller credential, an agent not on the
// allowlist, an unknown tool. The outcome is the refusal's error code. p
// and t may be nil (an unauthenticated caller; then the instance is
// resolved here, and an unknown tenant or instance is not audited). Rows
// are bounded per tenant and caller by a RefusalLimit (10 a minute); the
// refusals beyond are counted and logged.
func (g *Gateway) Refused(ctx context.Context, tenantSlug, instanceSlug string, p *auth.Principal, t *Target, tool string, err error) {
	if g.audit == nil {
		return
	}
	if t == nil {
		var rerr error
		if t, rerr = g.Resolve(ctx, tenantSlug, instanceSlug); rerr != nil {
			return
		}
	}
	e := audit.Entry{Tenant: t.Instance.TenantID, Instance: t.Instance.Slug, Tool: tool, Action: "refused",
		Outcome: switchboard.CodeOf(err)}
	if p != nil {
		e.Agent, e.Actor, e.Subject = p.AgentID, p.UserID, p.Subject()
		if p.Caller != nil {
			e.Caller = string(p.Caller.ID)
		}
	}
	ok, unrecorded := g.refusals.Allow(string(e.Tenant)+"/"+e.Caller, time.Now())
	if unrecorded > 0 {
		g.logger.Warn("refused calls not audited (over the per-caller bound)", "tenant", tenantSlug,
			"caller", e.Caller, "refusals", unrecorded)
	}
	if ok {
		g.audit.Record(e)
	}
}

func (g *Gateway) call(ctx context.Context, t *Target, p *auth.Principal, op *registry.Operation, args callArgs, agent bool) (*registry.Response, error) {
	if agent {
		if err := validateAgent(p, t); err != nil {
			return nil, err
		}
	} else if err := identityText(p); err != nil {
		return nil, err
	} else if p.Tenant != t.Instance.TenantID {
		return nil, switchboard.E(switchboard.ErrForbidden, "forbidden", "the caller belongs to another workspace")
	}
	// A targetUserId must name a member (or an external subject of the
	// caller).
	if err := g.callers.CheckTarget(ctx, p); err != nil {
		return nil, err
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return nil, err
	}
	if c, err = g.userCredentials(ctx, t, c, p); err != nil {
		return nil, err
	}
	if c.baseURL == "" {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the app instance has no base URL: set the connector's URL field")
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		applier, err := g.buildAppAuth(ctx, t, c, p)
		sent := time.Now()
		g.metrics.Step(metrics.StepCredentials, sent.Sub(start))
		if g.tracer != nil {
			g.tracer.Step(ctx, "credentials", start, sent, errorCode(err))
		}
		if err != nil {
			return nil, err
		}
		var header http.Header
		var traced func(status int, code string)
		if g.tracer != nil {
			// The upstream gets the call's traceparent only when its
			// connector allows it (propagate_trace).
			if t.Connector.Manifest.PropagateTrace {
				header = http.Header{}
			}
			traced = g.tracer.Upstream(ctx, header, header != nil)
		}
		resp, err := g.dispatcher.DoInto(ctx, registry.Call{Op: op, BaseURL: c.baseURL, Base: c.base, Servers: c.servers, Args: args.m, Strings: args.list, Credentials: applier, Header: header}, args.into)
		g.metrics.Since(metrics.StepUpstream, sent)
		if resp != nil {
			g.learn(t, p, resp)
		}
		ue := upstreamError(err)
		if traced != nil {
			status := 0
			if resp != nil {
				status = resp.Status
			} else if ue != nil {
				status = ue.Status
			}
			traced(status, errorCode(err))
		}
		switch {
		case resp != nil:
			g.metrics.Upstream(resp.Status)
		case ue != nil && ue.Status != 0:
			g.metrics.Upstream(ue.Status)
		case err != nil:
			if _, refused := egress.Refusal(err); !refused {
				g.metrics.Upstream(0)
			}
		}
		if ue != nil {
			if r, ok := applier.(auth.Rejecter); ok && ue.Status == http.StatusUnauthorized && attempt == 0 {
				r.Reject(ctx)
				continue
			}
		}
		redact(c.redactor(applier), resp, err)
		return resp, err
	}
}

// errorCode is err's code, "" for no error.
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	return switchboard.CodeOf(err)
}

// logRefusal warns when the egress guard refused the upstream of t: the
// operator's log gets the instance, the rule and the resolved address; the
// agent's error names only the rule.
func (g *Gateway) logRefusal(t *Target, err error) {
	re, ok := egress.Refusal(err)
	if !ok || t == nil {
		return
	}
	g.metrics.EgressRefused(re.Rule)
	g.logger.Warn("upstream refused by the egress policy", "tenant", t.Tenant.Slug, "instance", t.Instance.Slug,
		"connector", t.Instance.ConnectorID, "rule", re.Rule, "addr", re.Addr.String())
}

// buildAppAuth resolves the instance's auth mode into the upstream
// credentials of p (p's subject for per-user modes).
func (g *Gateway) buildAppAuth(ctx context.Context, t *Target, c *credentials, p *auth.Principal) (registry.Applier, error) {
	mode, m := t.Instance.AuthMode, &t.Connector.Manifest
	if s := c.static.Load(); s != nil && s.mode == mode && s.manifest == m {
		return s.ap, nil
	}
	ap, err := g.appAuth.Build(ctx, modeInput(t, c, p))
	if err == nil && g.appAuth.Static(mode) {
		c.static.Store(&staticApplier{mode: mode, manifest: m, ap: ap})
	}
	return ap, err
}

// redact removes every secret of the call from what came back: the
// upstream's body and headers (which MCP results and App mode pass on) and
// the message of its error.
func redact(red *secrets.Redactor, resp *registry.Response, err error) {
	if resp != nil {
		resp.Body = red.Bytes(resp.Body)
		red.Header(resp.Header)
	}
	if ue := upstreamError(err); ue != nil {
		ue.Message = red.String(ue.Message)
	}
}

// upstreamError is err's *registry.UpstreamError, nil when it has none.
// A nil err costs no allocation (the target of errors.As escapes).
func upstreamError(err error) *registry.UpstreamError {
	if err == nil {
		return nil
	}
	var ue *registry.UpstreamError
	if errors.As(err, &ue) {
		return ue
	}
	return nil
}
