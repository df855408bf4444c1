package secrets

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

func randomKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// Reseal moves every row to the new primary key in batches, resumes after
// a stop, leaves rows it cannot open (naming them) and reports the key
// usage before and after; values read back unchanged.
func TestResealBatchedResumableAndChecked(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		oldKey, newKey, lostKey := randomKey(t), randomKey(t), randomKey(t)
		oldRing, _ := NewKeyring(oldKey)
		lostRing, _ := NewKeyring(lostKey)
		ring, _ := NewKeyring(newKey, oldKey)
		old, lost, current := NewStore(db, oldRing), NewStore(db, lostRing), NewStore(db, ring)

		want := map[Ref]string{}
		for i := range 7 {
			ref := Ref{Tenant: switchboard.TenantID(fmt.Sprintf("t%d", i%3)), Owner: "instance:a", Name: fmt.Sprintf("F%d", i)}
			want[ref] = fmt.Sprintf("value-%d", i)
			if err := old.Put(ctx, ref, New(want[ref])); err != nil {
				t.Fatal(err)
			}
		}
		fresh := Ref{Tenant: "t9", Owner: "instance:b", Name: "NEW"}
		if err := current.Put(ctx, fresh, New("already-new")); err != nil {
			t.Fatal(err)
		}
		orphan := Ref{Tenant: "t1", Owner: "instance:z", Name: "LOST"}
		if err := lost.Put(ctx, orphan, New("gone")); err != nil {
			t.Fatal(err)
		}

		usage, err := current.KeyUsage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(usage) != 3 || !usage[0].Primary || usage[0].Rows != 1 {
			t.Fatalf("usage before = %+v", usage)
		}
		for _, u := range usage[1:] {
			if wantIn := u.KeyID == KeyID(oldKey); u.InKeyring != wantIn || (wantIn && u.Rows != 7) {
				t.Fatalf("usage before = %+v", usage)
			}
		}

		// Stopped after the first batch of 3 ...
		stop, cancel := context.WithCancel(ctx)
		rep, err := current.Reseal(stop, ResealOptions{BatchSize: 3, AfterBatch: func(ResealReport) { cancel() }})
		if err == nil || rep.Resealed != 3 {
			t.Fatalf("stopped run = %+v, %v; want 3 rows and the cancellation", rep, err)
		}
		// ... and resumed: the rest, with the unopenable row named.
		rep, err = current.Reseal(ctx, ResealOptions{BatchSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Resealed != 4 || len(rep.Failed) != 1 || rep.Failed[0] != orphan {
			t.Fatalf("resumed run = %+v, want 4 re-sealed and %v failed", rep, orphan)
		}
		usage, err = current.KeyUsage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(usage) != 2 || !usage[0].Primary || usage[0].Rows != 8 || usage[1].InKeyring || usage[1].Rows != 1 {
			t.Fatalf("usage after = %+v", usage)
		}
		// The new primary alone opens every value now.
		newOnly := NewStore(db, func() *Keyring { k, _ := NewKeyring(newKey); return k }())
		for ref, v := range want {
			got, err := newOnly.Get(ctx, ref)
			if err != nil || got.Reveal() != v {
				t.Fatalf("%v after reseal = %v, want %q", ref, err, v)
			}
		}
	})
}

// A value written by another replica between Reseal's read and its write
// is not overwritten with the old one.
func TestResealCompareAndSwap(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		oldKey, newKey := randomKey(t), randomKey(t)
		oldRing, _ := NewKeyring(oldKey)
		ring, _ := NewKeyring(newKey, oldKey)
		old, current := NewStore(db, oldRing), NewStore(db, ring)
		ref := Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
		if err := old.Put(ctx, ref, New("before")); err != nil {
			t.Fatal(err)
		}
		batch, err := current.resealBatch(ctx, Ref{}, true, 10)
		if err != nil || len(batch) != 1 {
			t.Fatalf("batch = %v, %v", batch, err)
		}
		// A replica still sealing with the old key writes a new value.
		if err := old.Put(ctx, ref, New("after")); err != nil {
			t.Fatal(err)
		}
		swapped, err := current.resealRow(ctx, batch[0])
		if err != nil || swapped {
			t.Fatalf("resealRow over a changed row = %v, %v; want no swap", swapped, err)
		}
		if got, err := current.Get(ctx, ref); err != nil || got.Reveal() != "after" {
			t.Fatalf("value = %v, want the newer write kept", err)
		}
		rep, err := current.Reseal(ctx, ResealOptions{})
		if err != nil || rep.Resealed != 1 {
			t.Fatalf("Reseal = %+v, %v", rep, err)
		}
		if got, err := current.Get(ctx, ref); err != nil || got.Reveal() != "after" {
			t.Fatalf("value after reseal = %v", err)
		}
	})
}

// BenchmarkReseal re-seals b.N rows moved to a new primary key, reporting
// rows per second on each backend.
func BenchmarkReseal(b *testing.B) {
	for name, open := range map[string]func(testing.TB) *database.DB{"sqlite": dbtest.SQLite, "postgres": dbtest.Postgres} {
		b.Run(name, func(b *testing.B) {
			db := open(b)
			ctx := context.Background()
			oldKey, newKey := randomKey(b), randomKey(b)
			oldRing, _ := NewKeyring(oldKey)
			ring, _ := NewKeyring(newKey, oldKey)
			old := NewStore(db, oldRing)
			for i := range b.N {
				if err := old.Put(ctx, Ref{Tenant: "t", Owner: "instance:a", Name: fmt.Sprintf("F%06d", i)}, New("v")); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			rep, err := NewStore(db, ring).Reseal(ctx, ResealOptions{})
			if err != nil || rep.Resealed != b.N {
				b.Fatalf("Reseal = %+v, %v", rep, err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
