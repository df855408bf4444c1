package database_test

import (
	"context"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestChangePositionSawWhatItsSnapshotSaw checks, on both stores, that a
// read's change-log position (Dialect.ChangePosition) says it saw exactly
// the changes committed before it: not a later one, and, on Postgres, not
// one older than its window nor a lower sequence whose transaction was
// still open while a higher one had committed (sequences are taken before
// commit) — until a read after that commit.
func TestChangePositionSawWhatItsSnapshotSaw(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		logChange := func() int64 { return dbtest.LogChange(t, db, "test_changes", []byte(`{"n":1}`)) }
		position := func() database.ChangePosition { return dbtest.ChangePosition(t, db) }
		if p := position(); p.Saw(1) || p.Saw(0) {
			t.Fatalf("the position of an empty log saw a change: %+v", p)
		}
		var seqs []int64
		for range 70 {
			seqs = append(seqs, logChange())
		}
		p := position()
		top := seqs[len(seqs)-1]
		for _, seq := range seqs {
			// The embedded store's writers are serialized: a read that
			// saw a sequence saw every one below it.
			if want := seq > top-63 || !db.Dialect.Replicated(); p.Saw(seq) != want {
				t.Errorf("Saw(%d) = %v with %d the highest, want %v", seq, p.Saw(seq), top, want)
			}
		}
		if p.Saw(top+1) || p.Saw(0) {
			t.Errorf("the position saw a change not logged yet (or no change)")
		}
		if !db.Dialect.Replicated() {
			return // writers are serialized: sequences commit in order
		}

		// A lower sequence committed after a higher one.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		late, err := db.LogChangeTx(ctx, tx, "test_changes", []byte(`{"n":2}`))
		if err != nil {
			t.Fatal(err)
		}
		early := logChange()
		if early <= late {
			t.Fatalf("sequences %d then %d: want the open transaction's lower", late, early)
		}
		p = position()
		if !p.Saw(early) || p.Saw(late) {
			t.Errorf("with %d committed and %d open: Saw = %v, %v; want true, false", early, late, p.Saw(early), p.Saw(late))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if p := position(); !p.Saw(early) || !p.Saw(late) {
			t.Errorf("after both committed: Saw = %v, %v; want true, true", p.Saw(early), p.Saw(late))
		}
	})
}
