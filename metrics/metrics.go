// Package metrics is Switchboard's Prometheus instrumentation: one
// registry per server holding the call path's counters and histograms,
// the token machinery's outcomes, the caches' hits and misses, the audit
// backlog, store errors, egress refusals, the catalog's state and the
// process's own metrics.
//
// No label carries a tenant, an instance, a user or an agent: their number
// is unbounded (cardinality), and per-tenant usage is read from the audit
// store instead. Labels are connector ids (bounded by the catalog), auth
// modes, surfaces, error codes and protocol versions.
//
// The call path's series are resolved once per label combination and kept
// (Call, Step): observing one costs no allocation. A nil *Metrics records
// nothing, so packages built without one (tests, tools) need no checks.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric's name.
const Namespace = "switchboard"

// Step is a step of a call, timed by the call_step_seconds histogram.
type Step int

// The steps of a call: authenticating the caller, resolving the app
// instance, building the upstream credentials (tokens), the upstream
// request, admission (waiting for a concurrency slot or a rate token), and
// the whole call.
const (
	StepAuthenticate Step = iota
	StepResolve
	StepCredentials
	StepUpstream
	StepAdmission
	StepTotal
	numSteps
)

var stepNames = [numSteps]string{"authenticate", "resolve", "credentials", "upstream", "admission", "total"}

func (s Step) String() string { return stepNames[s] }

// Cache names a cache whose hits and misses are counted.
type Cache int

// The counted caches: resolved app instances (gateway), authenticated
// callers (auth), and access tokens in memory (auth OAuth).
const (
	CacheInstance Cache = iota
	CacheCaller
	CacheToken
	numCaches
)

var cacheNames = [numCaches]string{"instance", "caller", "token"}

// Metrics holds a server's metrics. Its methods are safe for concurrent
// use, and do nothing on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	calls    *prometheus.CounterVec
	callsMu  sync.RWMutex
	callKids map[callKey]prometheus.Counter

	steps    [numSteps]prometheus.Observer
	upstream [7]prometheus.Counter // 1xx..5xx, other status, transport error
	cache    [numCaches][2]prometheus.Counter

	tokens       *prometheus.CounterVec
	storeErrors  *prometheus.CounterVec
	dialRefusals *prometheus.CounterVec
	admission    *prometheus.CounterVec
}

type callKey struct{ connector, surface, mode, code, protocol string }

// New returns the metrics of one server, with the Go runtime's and the
// process's collectors registered.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg, callKids: map[callKey]prometheus.Counter{}}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "calls_total",
		Help: "Agent calls that reached the gateway, by connector, surface (mcp, app), auth mode, outcome code (ok or the error code) and MCP protocol version."},
		[]string{"connector", "surface", "mode", "code", "protocol"})
	steps := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "call_step_seconds",
		Help:    "Time spent in each step of a call (authenticate, resolve, credentials, upstream, admission) and in the whole call (total).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"step"})
	for i := range numSteps {
		m.steps[i] = steps.WithLabelValues(stepNames[i])
	}
	upstream := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "upstream_responses_total",
		Help: "Upstream answers by status class (1xx..5xx, other), and requests that got no answer (error)."}, []string{"class"})
	for i, c := range []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other", "error"} {
		m.upstream[i] = upstream.WithLabelValues(c)
	}
	cache := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "cache_lookups_total",
		Help: "Lookups in the call path's caches (instance, caller, token) by result (hit, miss)."}, []string{"cache", "result"})
	for i := range numCaches {
		m.cache[i][0] = cache.WithLabelValues(cacheNames[i], "miss")
		m.cache[i][1] = cache.WithLabelValues(cacheNames[i], "hit")
	}
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "token_requests_total",
		Help: "Requests to OAuth token endpoints by auth mode, kind (code: an authorization code exchanged, fetch: a new token without a refresh token, refresh) and outcome (ok, or the token error code)."},
		[]string{"mode", "kind", "outcome"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "store_errors_total",
		Help: "Failed reads and writes of the store (database), by component."}, []string{"component"})
	m.dialRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "egress_refusals_total",
		Help: "Upstream connections the egress guard refused, by rule."}, []string{"rule"})
	m.admission = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "admission_refusals_total",
		Help: "Calls refused by call admission, by scope (tenant, instance, user, connector, client, upstream) and reason (concurrency, rate, upstream)."},
		[]string{"scope", "reason"})
	reg.MustRegister(m.calls, steps, upstream, cache, m.tokens, m.storeErrors, m.dialRefusals, m.admission)
	return m
}

// Registry returns the registry, for collectors registered elsewhere.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Call counts a call. Each label combination is resolved once.
func (m *Metrics) Call(connector, surface, mode, code, protocol string) {
	if m == nil {
		return
	}
	k := callKey{connector, surface, mode, code, protocol}
	m.callsMu.RLock()
	c, ok := m.callKids[k]
	m.callsMu.RUnlock()
	if !ok {
		m.callsMu.Lock()
		if c, ok = m.callKids[k]; !ok {
			c = m.calls.WithLabelValues(connector, surface, mode, code, protocol)
			m.callKids[k] = c
		}
		m.callsMu.Unlock()
	}
	c.Inc()
}

// Step records that step s took d.
func (m *Metrics) Step(s Step, d time.Duration) {
	if m == nil {
		return
	}
	m.steps[s].Observe(d.Seconds())
}

// Since records that step s took the time since start.
func (m *Metrics) Since(s Step, start time.Time) {
	if m == nil {
		return
	}
	m.steps[s].Observe(time.Since(start).Seconds())
}

// Upstream counts an upstream answer of status, or with status 0 a
// request that got none.
func (m *Metrics) Upstream(status int) {
	if m == nil {
		return
	}
	switch {
	case status == 0:
		m.upstream[6].Inc()
	case status >= 100 && status < 600:
		m.upstream[status/100-1].Inc()
	default:
		m.upstream[5].Inc()
	}
}

// Lookup counts a lookup in cache c.
func (m *Metrics) Lookup(c Cache, hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cache[c][1].Inc()
	} else {
		m.cache[c][0].Inc()
	}
}

// Token counts a token endpoint request of the auth mode, its kind
// ("code", "fetch" or "refresh") and its outcome ("ok" or an error code).
func (m *Metrics) Token(mode, kind, outcome string) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(mode, kind, outcome).Inc()
}

// StoreError counts a failed store operation of component.
func (m *Metrics) StoreError(component string) {
	if m == nil {
		return
	}
	m.storeErrors.WithLabelValues(component).Inc()
}

// EgressRefused counts a connection the egress guard refused by rule.
func (m *Metrics) EgressRefused(rule string) {
	if m == nil {
		return
	}
	m.dialRefusals.WithLabelValues(rule).Inc()
}

// AdmissionRefused counts a call refused by admission.
func (m *Metrics) AdmissionRefused(scope, reason string) {
	if m == nil {
		return
	}
	m.admission.WithLabelValues(scope, reason).Inc()
}

// GaugeFunc registers a gauge whose value f reads at each scrape.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, f))
}

// CounterFunc registers a counter whose value f reads at each scrape.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, f))
}
