package audit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

func countRows(t *testing.T, db *database.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A sealed journal segment, or a drained spool segment, is deleted only
// after the barrier making its rows durable in the store (the SQLite
// store's checkpoint) has run, once for all the segments done meanwhile
// and never on the call path; when the barrier fails the segment stays,
// and its rows, loaded again, are stored once.
func TestSegmentsOutliveAFailingBarrier(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	store := NewStore(db)
	dir := t.TempDir()
	var fail atomic.Bool
	var calls atomic.Int32
	var seen atomic.Int32 // journal segments on disk at the last barrier
	hook := func() error {
		calls.Add(1)
		seen.Store(int32(len(segmentFiles(t, dir, "*"+journalExt))))
		if fail.Load() {
			return errors.New("injected barrier failure")
		}
		return nil
	}
	// Every row rotates the journal (a one-byte segment bound); the
	// writer writes only on Flush.
	opts := WriterOptions{SpoolDir: dir, JournalSegment: 1, Interval: time.Hour, beforeSync: hook}
	w, err := NewWriter(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	record := func(i int) {
		w.Record(Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: string(rune('a' + i)), Outcome: "ok"})
	}
	ctx := context.Background()

	fail.Store(true)
	for i := range 3 {
		record(i)
	}
	w.Flush(ctx)
	if n := countRows(t, db); n != 3 {
		t.Fatalf("store holds %d rows, want 3", n)
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("barrier ran %d times for two sealed segments, want once", c)
	}
	if n := len(segmentFiles(t, dir, "*"+journalExt)); n != 3 {
		t.Fatalf("%d journal segments after a failed barrier, want all 3 kept", n)
	}

	fail.Store(false)
	w.journal.mu.Lock()
	w.journal.retryAt = time.Time{} // no waiting out barrierRetry
	w.journal.mu.Unlock()
	record(3) // seals the third segment, whose row is stored
	if c := calls.Load(); c != 1 {
		t.Fatalf("the barrier ran on the call path (%d calls)", c)
	}
	w.Flush(ctx)
	if c, s := calls.Load(), seen.Load(); c != 2 || s != 4 {
		t.Fatalf("barrier calls %d, segments on disk during it %d; want 2 and 4", c, s)
	}
	if n := len(segmentFiles(t, dir, "*"+journalExt)); n != 1 {
		t.Fatalf("%d journal segments after the barrier, want only the current one", n)
	}

	// At Close the last segment's barrier fails: it stays for the next
	// start, which spools its row; the spool segment outlives a failing
	// barrier too, and the row is stored once.
	fail.Store(true)
	w.Close(ctx)
	if n := len(segmentFiles(t, dir, "*"+journalExt)); n != 1 {
		t.Fatalf("%d journal segments after Close with a failing barrier, want 1", n)
	}
	opts.RetryMax = time.Hour
	w2, err := NewWriter(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close(ctx)
	if w2.spool.Rows() != 1 {
		t.Fatalf("spool holds %d rows after the restart, want 1", w2.spool.Rows())
	}
	before := calls.Load()
	w2.Flush(ctx)
	if calls.Load() == before || w2.spool.Rows() != 1 || len(segmentFiles(t, dir, "*"+segmentExt)) != 1 {
		t.Fatalf("spool segment removed despite a failing barrier (calls %d→%d, spool rows %d)", before, calls.Load(), w2.spool.Rows())
	}
	fail.Store(false)
	w2.Flush(ctx)
	if n := len(segmentFiles(t, dir, "*"+segmentExt)); n != 0 || w2.spool.Rows() != 0 {
		t.Fatalf("spool segments %d, rows %d after a good barrier; want none", n, w2.spool.Rows())
	}
	if n := countRows(t, db); n != 4 {
		t.Fatalf("store holds %d rows, want 4 (each once)", n)
	}
}
