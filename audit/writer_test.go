package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// outageStore is a migrated database on a private Postgres cluster the
// test can stop and start.
func outageStore(t *testing.T) (*dbtest.PostgresServer, *database.DB) {
	t.Helper()
	srv := dbtest.StartPostgres(t)
	return srv, srv.Open()
}

// admitAndRecord runs one call through w as the gateway does.
func admitAndRecord(w *audit.Writer, i int) error {
	record, err := w.Admit()
	if err != nil {
		return err
	}
	record.Record(audit.Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(i), Outcome: "ok", Status: 200})
	return nil
}

// waitRows waits until the audit table holds want rows.
func waitRows(t *testing.T, db *database.DB, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var n int
	for time.Now().Before(deadline) {
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n); err == nil && n == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("audit_log holds %d rows, want %d", n, want)
}

// Postgres stopped under a steady stream of calls, then started: every row
// arrives, the backlog having gone through memory and the spool on disk.
func TestWriterKeepsEveryRowThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv, db := outageStore(t)
	w, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Buffer: 20, Batch: 8,
		Interval: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	calls := 0
	call := func(n int) {
		for range n {
			if err := admitAndRecord(w, calls); err != nil {
				t.Fatalf("call %d refused: %v", calls, err)
			}
			calls++
			time.Sleep(2 * time.Millisecond)
		}
	}
	call(50)
	srv.Stop()
	call(300)
	srv.Start()
	call(50)
	waitRows(t, db, calls)
	st := w.Stats()
	if st.Spooled == 0 || st.Dropped != 0 || st.Spool != 0 {
		t.Fatalf("stats %+v: want rows spooled during the outage, none dropped, spool drained", st)
	}
}

// Close with the store down spools every row; a new writer on the same
// directory writes them once the store is back, and a replayed segment
// does not write a row twice.
func TestCloseSpoolsAndRestartDrains(t *testing.T) {
	t.Parallel()
	srv, db := outageStore(t)
	dir := t.TempDir()
	w, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Interval: 10 * time.Millisecond, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		_ = admitAndRecord(w, i)
	}
	w.Flush(context.Background())
	waitRows(t, db, 10)
	srv.Stop()
	for i := range 40 {
		if err := admitAndRecord(w, i); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	w.Close(ctx)
	if st := w.Stats(); st.Spool != 40 || st.Dropped != 0 {
		t.Fatalf("after Close with the store down: %+v, want 40 rows in the spool", st)
	}
	if _, err := w.Admit(); !isCode(err, "audit_unavailable") {
		t.Fatalf("Admit after Close = %v, want audit_unavailable", err)
	}
	// A copy of the spool replayed later must not duplicate rows.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(segs) == 0 {
		t.Fatal("no spool segment on disk")
	}
	b, _ := os.ReadFile(segs[0])

	srv.Start()
	w2, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Interval: 10 * time.Millisecond, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	waitRows(t, db, 50)
	w2.Close(context.Background())
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(segs[0])), b, 0o600); err != nil {
		t.Fatal(err)
	}
	w3, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Interval: 10 * time.Millisecond, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for w3.Stats().Written != 40 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(left) != 0 {
		t.Fatalf("spool not drained: %v (stats %+v)", left, w3.Stats())
	}
	waitRows(t, db, 50)
}

// With refuse (the default), a full backlog refuses new calls with
// audit_unavailable but keeps the rows of calls already admitted; when the
// store is back, calls are admitted again and every kept row is written.
func TestFullBacklogRefusesCalls(t *testing.T) {
	t.Parallel()
	srv, db := outageStore(t)
	srv.Stop()
	w, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Buffer: 10, SpoolRows: 10, Batch: 5,
		Interval: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	// Admitted calls still running when the backlog fills keep their rows.
	var open []audit.Admission
	for range 3 {
		r, err := w.Admit()
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, r)
	}
	admitted := 3
	var refusal error
	for i := 0; i < 200 && refusal == nil; i++ {
		if refusal = admitAndRecord(w, i); refusal == nil {
			admitted++
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !isCode(refusal, "audit_unavailable") {
		t.Fatalf("a full backlog did not refuse a call: %v (stats %+v)", refusal, w.Stats())
	}
	for i := range open {
		open[i].Record(audit.Entry{Tenant: "ten_a", Tool: "late", Outcome: "ok"})
	}
	if st := w.Stats(); st.Full == 0 || st.Refused == 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v: want full counted, a refusal, nothing dropped", st)
	}
	srv.Start()
	waitRows(t, db, admitted)
	if err := admitAndRecord(w, 0); err != nil {
		t.Fatalf("calls still refused once the store is back: %v", err)
	}
}

// With drop-oldest, a full backlog never refuses a call; it drops the
// oldest spooled rows and counts them.
func TestFullBacklogDropsOldest(t *testing.T) {
	t.Parallel()
	srv, db := outageStore(t)
	srv.Stop()
	w, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Buffer: 10, SpoolRows: 20, AtFull: audit.DropOldest,
		Interval: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := admitAndRecord(w, i); err != nil {
			t.Fatalf("drop-oldest refused a call: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	w.Close(context.Background())
	st := w.Stats()
	if st.Dropped == 0 || st.Spool > 20 {
		t.Fatalf("stats %+v: want oldest rows dropped and the spool within its bound", st)
	}
	if st.Dropped+st.Spool != 200 {
		t.Fatalf("stats %+v: dropped + spooled should account for all 200 rows", st)
	}
}

func isCode(err error, code string) bool {
	var e *switchboard.Error
	return errors.As(err, &e) && e.Code == code
}

// An admission records one row however often its Record is called, and
// Close waits for an admitted call until it records, not longer.
func TestAdmissionRecordsOnce(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	w, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Interval: 10 * time.Millisecond, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := w.Admit()
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Admit()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.Record(audit.Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "a", Outcome: "ok"})
	}
	closed := make(chan struct{})
	go func() { w.Close(context.Background()); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while an admitted call had not recorded its row")
	case <-time.After(200 * time.Millisecond):
	}
	b.Record(audit.Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "b", Outcome: "ok"})
	<-closed
	// a's row in the store, b's (recorded after Close began) spooled.
	if st := w.Stats(); st.Written+st.Spooled != 2 || st.Dropped != 0 {
		t.Fatalf("stats %+v: want two rows kept", st)
	}
	var zero audit.Admission
	zero.Record(audit.Entry{Tenant: "ten_a"}) // records nothing, and does not panic
}
