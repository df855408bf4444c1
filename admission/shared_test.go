package admission_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// hammer sends calls of tenant t to each controller from workers
// goroutines each, one every millisecond, for d; it returns the calls
// admitted by each controller and the time it ran.
func hammer(t *testing.T, cs []*admission.Controller, tenant string, workers int, d time.Duration) ([]int64, time.Duration) {
	t.Helper()
	admitted := make([]atomic.Int64, len(cs))
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range cs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := admission.Call{Tenant: tenant, Instance: "crm", User: "u" + string(rune('a'+w)), Connector: "crm"}
				for time.Now().Before(deadline) {
					tk, err := c.Admit(context.Background(), cl)
					switch {
					case err == nil:
						admitted[i].Add(1)
						tk.Done()
					case switchboard.CodeOf(err) != "rate_limited":
						t.Errorf("replica %d: %v", i, err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	out := make([]int64, len(cs))
	for i := range admitted {
		out[i] = admitted[i].Load()
	}
	return out, time.Since(start)
}

func sum(ns []int64) int64 {
	var s int64
	for _, n := range ns {
		s += n
	}
	return s
}

// TestSharedRateAcrossReplicas runs three controllers, each on its own
// pool of one PostgreSQL database as three replicas would, sharing a
// tenant's rate limit (100 calls a second, burst 20) under a demand far
// above it on every replica. Over the run the tenant's calls admitted by
// all three stay within the stated bound: at most burst + rate·T plus one
// batch (a tenth of a second of the rate) per replica, and at least
// rate·T less those batches. Without the shared buckets the same run
// admits about three times the rate, which the bound refuses.
func TestSharedRateAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbs := dbtest.Replicas(t, 3)
	limits := admission.Limits{Tenant: admission.Limit{Rate: 100, Burst: 20}}
	const rate, burst, batch = 100, 20, 10
	var shared, local []*admission.Controller
	for _, db := range dbs {
		shared = append(shared, admission.New(admission.Options{Defaults: limits, Shared: admission.NewShared(db)}))
		local = append(local, admission.New(admission.Options{Defaults: limits}))
	}
	got, took := hammer(t, shared, "acme", 4, 2*time.Second)
	total, secs := float64(sum(got)), took.Seconds()
	upper := burst + rate*secs + 3*batch
	lower := rate*secs - 3*batch
	t.Logf("shared: %v admitted (%.0f) in %.2fs: %.1f a second for a limit of %d; bound [%.0f, %.0f]", got, total, secs, total/secs, rate, lower, upper)
	if total > upper || total < lower {
		t.Errorf("three replicas admitted %.0f calls in %.2fs under a shared limit of %d/s (burst %d): want %.0f..%.0f", total, secs, rate, burst, lower, upper)
	}
	for i, n := range got {
		if n == 0 {
			t.Errorf("replica %d admitted nothing", i)
		}
	}
	got, took = hammer(t, local, "acme", 4, time.Second)
	if total := float64(sum(got)); total <= burst+rate*took.Seconds()+3*batch {
		t.Errorf("control: three replicas counting on their own admitted %.0f in %.2fs, within the shared bound: the test shows nothing", total, took.Seconds())
	}
}

// TestSharedLeaseOfADeadReplica: a replica holding a lease dies (its
// controller is dropped with unspent tokens); the two others, once its
// batch is gone, get the whole limit between them, not two thirds of it.
func TestSharedLeaseOfADeadReplica(t *testing.T) {
	t.Parallel()
	dbs := dbtest.Replicas(t, 3)
	limits := admission.Limits{Tenant: admission.Limit{Rate: 50, Burst: 10}}
	var cs []*admission.Controller
	for _, db := range dbs {
		sh := admission.NewShared(db)
		sh.TTL = 200 * time.Millisecond
		cs = append(cs, admission.New(admission.Options{Defaults: limits, Shared: sh}))
	}
	ctx := context.Background()
	tk, err := cs[0].Admit(ctx, call("acme", "crm", "u"))
	if err != nil {
		t.Fatal(err)
	}
	tk.Done()
	// Replica 0 holds the rest of its batch (5 tokens at 50/s), and dies.
	got, took := hammer(t, cs[1:], "acme", 4, 2*time.Second)
	total, secs := float64(sum(got)), took.Seconds()
	t.Logf("two survivors: %v admitted in %.2fs: %.1f a second for a limit of 50", got, secs, total/secs)
	if lower := 50*secs - 2*5 - 5; total < lower {
		t.Errorf("the survivors admitted %.0f in %.2fs, want at least %.0f (the whole limit less the batches)", total, secs, lower)
	}

}

// TestSharedLeasesAreBatched counts the statements of admission on the
// shared buckets: a lease of a tenth of a second of the rate is one
// statement, so 1,000 calls under a limit of 10,000 a second cost one;
// and calls refused while the shared bucket is empty cost none.
func TestSharedLeasesAreBatched(t *testing.T) {
	t.Parallel()
	db := dbtest.Replicas(t, 1)[0]
	ctx := context.Background()
	fast := admission.New(admission.Options{Shared: admission.NewShared(db),
		Defaults: admission.Limits{Tenant: admission.Limit{Rate: 10000, Burst: 10000}}})
	before := db.Statements()
	for i := range 1000 {
		tk, err := fast.Admit(ctx, call("acme", "crm", "u"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		tk.Done()
	}
	if n := db.Statements() - before; n > 1 {
		t.Errorf("1,000 calls under a shared limit of 10,000/s cost %d statements, want 1 (one batch of 1,000)", n)
	}
	slow := admission.New(admission.Options{Shared: admission.NewShared(db),
		Defaults: admission.Limits{Tenant: admission.Limit{Rate: 1, Burst: 1}}})
	tk, err := slow.Admit(ctx, call("slow", "crm", "u"))
	if err != nil {
		t.Fatal(err)
	}
	tk.Done()
	before = db.Statements()
	refused := 0
	for range 100 {
		if _, err := slow.Admit(ctx, call("slow", "crm", "u")); switchboard.CodeOf(err) == "rate_limited" {
			refused++
		}
	}
	if n := db.Statements() - before; refused != 100 || n > 1 {
		t.Errorf("100 calls over a spent shared limit: %d refused with %d statements, want 100 with at most 1", refused, n)
	}
}
