package admission

import (
	"context"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestLeaseStatement checks the one statement of the shared buckets on
// PostgreSQL, at a rate slow enough (one token in 1,000 s) that the
// refill does not count: a new bucket starts full (its burst), a lease
// takes whole tokens up to the batch or what is left, tokens given back
// return to the bucket up to its burst, and a full bucket's row is
// deleted by the sweep only once it is full again.
func TestLeaseStatement(t *testing.T) {
	t.Parallel()
	db := dbtest.Replicas(t, 1)[0]
	s := NewShared(db)
	ctx := context.Background()
	l := Limit{Rate: 0.001, Burst: 10}
	for _, step := range []struct {
		n, back     int
		granted     int
		left        float64
		description string
	}{
		{4, 0, 4, 6, "a new bucket is full: 4 of 10"},
		{4, 0, 4, 2, "4 more"},
		{4, 0, 2, 0, "what is left, 2"},
		{4, 0, 0, 0, "none"},
		{0, 3, 0, 3, "3 given back"},
		{1, 20, 1, 9, "given back up to the burst, then 1 taken"},
	} {
		granted, left, err := s.lease(ctx, "tenant \"acme\"", l, step.n, step.back)
		if err != nil {
			t.Fatal(err)
		}
		if granted != step.granted || left < step.left || left > step.left+0.01 {
			t.Errorf("%s: granted %d, left %.3f; want %d, %.0f", step.description, granted, left, step.granted, step.left)
		}
	}
	if err := s.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "admission_buckets", "true"); n != 1 {
		t.Errorf("the sweep deleted a bucket that is not full (%d rows)", n)
	}
	if _, err := db.Exec(`UPDATE admission_buckets SET full_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if err := s.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "admission_buckets", "true"); n != 0 {
		t.Errorf("the sweep kept a full bucket (%d rows)", n)
	}
}
