package gateway_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

// BenchmarkWarmInstanceHeap warms 500 apiKey instances (20 tenants of 25)
// with one tools/call each through the whole in-process stack, and reports
// the live heap they add per instance (after a GC): what a warm instance
// costs in memory (issue 19, goal 1), and beside it the bytes the
// instance cache counts each at against its budget (estimateB/instance)
// and their ratio, which should stay at or above 1 (the estimate bounds
// the heap). The loop only repeats the warm calls.
//
//	go test -run '^$' -bench WarmInstanceHeap -benchtime 1x ./gateway
func BenchmarkWarmInstanceHeap(b *testing.B) {
	const tenantsN, perTenant = 20, 25
	up := newUpstream(b, nil)
	// No log buffer: the test stack's grows with every call, which is
	// not the server's memory.
	srv := servertest.Start(b, server.Config{DB: dbtest.SQLite(b), ConnectorCatalog: loadCRM(b),
		Logger: slog.New(slog.DiscardHandler), Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}})
	s := &stack{svc: srv.Tenants(), srv: srv.HTTP}
	type target struct{ url, token string }
	var targets []target
	for i := range tenantsN {
		slug := fmt.Sprintf("t%d", i)
		s.tenant(b, slug)
		token := s.caller(b, slug, headerPlatform("alice"))
		for j := range perTenant {
			in := fmt.Sprintf("crm-%d", j)
			s.install(b, slug, in, "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"}, agent)
			targets = append(targets, target{s.srv.URL + "/workspaces/" + slug + "/webhooks/" + in + ".mcp", token})
		}
	}
	client := &http.Client{}
	// One warm-up call settles what every call allocates once.
	benchCall(b, client, targets[0].url, targets[0].token, "alice", benchBody)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for _, t := range targets[1:] {
		benchCall(b, client, t.url, t.token, "alice", benchBody)
	}
	perInstance := float64(int64(heap())-int64(before)) / float64(len(targets)-1)
	b.ResetTimer()
	for b.Loop() {
		for _, t := range targets {
			benchCall(b, client, t.url, t.token, "alice", benchBody)
		}
	}
	st := srv.Gateway().CacheStats()
	estimate := float64(st.Bytes) / float64(st.Instances)
	b.ReportMetric(perInstance, "heapB/instance")
	b.ReportMetric(estimate, "estimateB/instance")
	b.ReportMetric(estimate/perInstance, "estimate/heap")
}
