package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// crash abandons j as a killed process would: its files are closed (their
// locks released) and nothing is removed.
func crash(j *Journal) {
	close(j.stop) // an fsync in progress would hold the file open
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	var path string
	if j.cur != nil && j.cur.f != nil {
		path = filepath.Join(j.dir, j.cur.name)
		j.cur.f.Close()
		if j.cur.mem != nil {
			// What was copied stays in the page cache, as after a kill.
			unmapSegment(j.cur.mem)
			j.cur.unmapped = true
		}
	}
	j.cur = nil
	// A process that dies releases its lock at once. In this test process
	// a child that another parallel test is forking (dbtest starts
	// Postgres) shares the segment's open file, and with it the lock,
	// until it execs: wait for that moment to pass, as a restart after a
	// real crash never sees it.
	for deadline := time.Now().Add(10 * time.Second); path != "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if f, err := lockFile(path); err == nil {
			f.Close()
			break
		}
	}
}

// journalRows appends n rows from concurrent callers and returns their IDs.
func journalRows(t *testing.T, j *Journal, n int) map[string]bool {
	t.Helper()
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += 8 {
				e := Entry{Time: time.Now().UTC(), Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(i), Outcome: "ok"}
				e.ID = NewID(e.Time)
				if err := j.Append(&e); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids[e.ID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids
}

func segmentFiles(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Rows appended by concurrent callers are all there after a crash, each
// once; a live process's segment is not touched by a second opener.
// Both ways: segments mapped, and written with write(2) where the
// filesystem refuses to preallocate or map.
func TestJournalKeepsEveryRowThroughACrash(t *testing.T) {
	t.Parallel()
	for _, noMap := range []bool{false, true} {
		t.Run(fmt.Sprint("write(2)=", noMap), func(t *testing.T) {
			t.Parallel()
			keepsEveryRow(t, noMap)
		})
	}
}

func keepsEveryRow(t *testing.T, noMap bool) {
	dir := t.TempDir()
	j, left, err := OpenJournal(dir, time.Millisecond, 0, slog.New(slog.DiscardHandler))
	if err != nil || len(left.Rows) != 0 {
		t.Fatal(err, left)
	}
	j.noMap = noMap
	ids := journalRows(t, j, 400)
	groups, records := j.stats()
	t.Logf("%d rows in %d writes", records, groups)
	if records != 400 || groups < 1 || groups > 400 {
		t.Fatalf("records %d in %d writes", records, groups)
	}
	// The way taken: a mapped segment is preallocated to its full size,
	// a write(2) one holds the records' bytes.
	path := filepath.Join(dir, j.cur.name)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mapped := j.cur.mem != nil; mapped == noMap || (mapped && st.Size() != 4<<20) || (!mapped && st.Size() != j.cur.size) {
		t.Fatalf("segment of %d bytes (records %d), mapped %v", st.Size(), j.cur.size, mapped)
	}
	// Another process starting on the directory leaves a live segment.
	other, left, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil || len(left.Rows) != 0 {
		t.Fatalf("a live segment was taken: %v %d rows", err, len(left.Rows))
	}
	other.Close()
	crash(j)
	again, left, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if len(left.Rows) != 400 || left.Torn != 0 || left.Bad != 0 {
		t.Fatalf("after the crash: %d rows, torn %d, bad %d", len(left.Rows), left.Torn, left.Bad)
	}
	for _, e := range left.Rows {
		if !ids[e.ID] {
			t.Fatalf("row %q was not appended (or is doubled)", e.ID)
		}
		delete(ids, e.ID)
	}
	left.Done(dir)
	if n := segmentFiles(t, dir, "*"+journalExt); len(n) != 0 {
		t.Fatalf("segments left after Done: %v", n)
	}
}

// A segment whose last record is cut short, or that ends in zeros, keeps
// its whole records and is cut off after the last one; a segment with a flipped byte keeps the records
// before it and is set aside as *.bad. The rows reach a real store, once.
func TestJournalTornAndCorruptSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	// Two crashed processes: one torn, one corrupt.
	var sizes []int64
	var paths []string
	var js []*Journal
	for range 3 {
		j, _, err := OpenJournal(dir, 0, 0, log)
		if err != nil {
			t.Fatal(err)
		}
		js = append(js, j)
	}
	for _, j := range js {
		journalRows(t, j, 10)
		path := filepath.Join(dir, j.cur.name)
		// The records' end: a mapped segment's file is longer.
		size := j.cur.size
		crash(j)
		paths, sizes = append(paths, path), append(sizes, size)
	}
	// Torn: the last record loses its last 5 bytes.
	if err := os.Truncate(paths[0], sizes[0]-5); err != nil {
		t.Fatal(err)
	}
	// Corrupt: a byte inside the fifth record's JSON flipped.
	data, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for range 4 { // to the fifth record
		off += recordHead + int(binary.LittleEndian.Uint32(data[off:]))
	}
	data[off+recordHead+10] ^= 0x20
	if err := os.WriteFile(paths[1], data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Zero-filled: the end of the file is zeros (a power loss after the
	// file grew, before its data reached the disk).
	f, err := os.OpenFile(paths[2], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A process starts on the directory: a real store takes the rows.
	db := dbtest.SQLite(t)
	w, err := NewWriter(NewStore(db), WriterOptions{SpoolDir: dir, Interval: 10 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.JournalBad != 1 {
		t.Fatalf("journal_bad = %d, want 1", st.JournalBad)
	}
	bad := segmentFiles(t, dir, "*"+journalExt+".bad")
	if len(bad) != 1 || bad[0] != paths[1]+".bad" {
		t.Fatalf("set aside: %v, want %s.bad", bad, paths[1])
	}
	for _, p := range []string{paths[0], paths[2]} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("the torn segment %s was not loaded and removed: %v", p, err)
		}
	}
	// 9 whole rows of the torn segment, the 4 rows before the flipped
	// byte and the 10 rows before the zeros.
	var want int
	rows, _, status := readJournal(mustOpen(t, paths[1]+".bad"))
	if status != journalCorrupt || len(rows) != 4 {
		t.Fatalf("the corrupt segment reads %d rows, status %d", len(rows), status)
	}
	want = 9 + len(rows) + 10
	deadline := time.Now().Add(30 * time.Second)
	for dbtest.Count(t, db, "audit_log", "1=1") != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	w.Close(context.Background())
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != want {
		t.Fatalf("audit_log holds %d rows, want %d", n, want)
	}
	if n := segmentFiles(t, dir, "*"+journalExt); len(n) != 0 {
		t.Fatalf("segments left after a clean close: %v", n)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A journal replayed twice (a crash after its rows reached the store but
// before the segment was removed) writes each row once; rows recorded
// through a Writer are journaled before Record returns, and a clean Close
// leaves no segment.
func TestJournalReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	db := dbtest.SQLite(t)
	w, err := NewWriter(NewStore(db), WriterOptions{SpoolDir: dir, Interval: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		w.Record(Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(i), Outcome: "ok"})
	}
	if st := w.Stats(); st.JournalRows != 20 || st.JournalWrites < 1 {
		t.Fatalf("journal rows %d in %d writes, want 20", st.JournalRows, st.JournalWrites)
	}
	segs := segmentFiles(t, dir, "*"+journalExt)
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	copyOf, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	w.Flush(context.Background())
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != 20 {
		t.Fatalf("audit_log holds %d rows, want 20", n)
	}
	w.Close(context.Background())
	if n := segmentFiles(t, dir, "*"+journalExt); len(n) != 0 {
		t.Fatalf("segments left after a clean close: %v", n)
	}
	// The segment comes back, as if the process had died before removing
	// it: the next start loads it, and the store keeps one row per ID.
	if err := os.WriteFile(segs[0], copyOf, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err = NewWriter(NewStore(db), WriterOptions{SpoolDir: dir, Interval: 10 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	w.Flush(context.Background())
	w.Close(context.Background())
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != 20 {
		t.Fatalf("audit_log holds %d rows after the replay, want 20", n)
	}
	if st := w.Stats(); st.Spool != 0 {
		t.Fatalf("spool rows left: %d", st.Spool)
	}
}

// TestJournalFallbackRow: a row appendRecord declines (a text that is not
// plain) goes through encoding/json, whose copy leaves the caller's entry
// as it was but for its segment, and comes back whole after a crash.
func TestJournalFallbackRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	e := Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "quote \" and \u00e9", Outcome: "ok", Status: 200}
	if _, ok := appendRecord(nil, &e); ok {
		t.Fatal("the row takes the direct way: it tests nothing")
	}
	want := e
	if err := j.Append(&e); err != nil {
		t.Fatal(err)
	}
	if e.jseg == nil {
		t.Fatal("the appended entry carries no segment")
	}
	e.jseg = nil
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("Append changed the entry: %+v", e)
	}
	crash(j)
	again, left, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if len(left.Rows) != 1 || left.Rows[0].ID != want.ID || left.Rows[0].Action != want.Action || !left.Rows[0].Time.Equal(want.Time) {
		t.Fatalf("after the crash: %+v", left.Rows)
	}
	left.Done(dir)
}

// TestJournalAppendAllocatesNothing: a plain row goes into the journal
// without an allocation: its payload is encoded on the caller's stack and
// the group that carried the previous write is reused.
func TestJournalAppendAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	j, _, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now().UTC()
	e := Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "list", Outcome: "ok", Status: 200}
	if err := j.Append(&e); err != nil { // creates the segment
		t.Fatal(err)
	}
	rows := []Entry{e}
	allocs := testing.AllocsPerRun(200, func() {
		if err := j.Append(&e); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, e)
	})
	if allocs >= 1 {
		t.Fatalf("Append allocated %.1f times per row", allocs)
	}
	j.Release(rows)
}

// TestJournalReusedGroupsKeepTheirRows: many concurrent callers, small
// segments rotating under them, and groups reused across writes: every
// row is counted in the segment that holds it, so that releasing all of
// them deletes every sealed segment (a row counted in the wrong segment
// would leave one behind, or delete one early), and a crash before the
// release loses none. Run it with -race.
func TestJournalReusedGroupsKeepTheirRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _, err := OpenJournal(dir, 0, 2048, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 16, 200
	var mu sync.Mutex
	var rows []Entry
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := Entry{Time: time.Now().UTC(), Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(c, "-", i), Outcome: "ok"}
				e.ID = NewID(e.Time)
				if err := j.Append(&e); err != nil {
					t.Error(err)
					return
				}
				if e.jseg == nil {
					t.Error("an appended row carries no segment")
					return
				}
				mu.Lock()
				rows = append(rows, e)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	groups, records := j.stats()
	if records != callers*each || groups > records {
		t.Fatalf("%d records in %d writes, want %d records", records, groups, callers*each)
	}
	// Half released, then a crash: the other half comes back.
	kept := map[string]bool{}
	for _, e := range rows[:len(rows)/2] {
		kept[e.ID] = true
	}
	j.Release(rows[:len(rows)/2])
	// crash closes the segment being written; a killed process also
	// drops its locks on the sealed ones that still hold rows.
	j.mu.Lock()
	for _, e := range rows[len(rows)/2:] {
		if s := e.jseg; s != j.cur && s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
	j.mu.Unlock()
	crash(j)
	again, left, err := OpenJournal(dir, 0, 2048, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	back := map[string]bool{}
	for _, e := range left.Rows {
		back[e.ID] = true
	}
	for _, e := range rows[len(rows)/2:] {
		if !back[e.ID] {
			t.Fatalf("row %s lost in the crash", e.ID)
		}
	}
	left.Done(dir)
	again.Close()

	// Released in full, the journal deletes every segment.
	dir = t.TempDir()
	j, _, err = OpenJournal(dir, 0, 2048, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rows = rows[:0]
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := Entry{Time: time.Now().UTC(), Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(c, "-", i), Outcome: "ok"}
				e.ID = NewID(e.Time)
				if err := j.Append(&e); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				rows = append(rows, e)
				// Released while others append: segments are sealed and
				// deleted under the callers' feet.
				if len(rows) >= 64 {
					j.Release(rows)
					rows = rows[:0]
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	j.Release(rows)
	j.Close()
	if left := segmentFiles(t, dir, "*"+journalExt); len(left) != 0 {
		t.Fatalf("segments left after every row was released: %v", left)
	}
}

// TestJournalBoundsLongTexts: a row whose caller-supplied texts are
// megabytes long (an agent ID, a tool name) is journaled with the texts the
// store keeps, so that a restart after a crash reads it and the rows after
// it back (a record longer than maxRecord reads as corrupt and sets its
// segment aside); the journal itself refuses a record it could not read.
func TestJournalBoundsLongTexts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	w, err := NewWriter(NewStore(dbtest.SQLite(t)), WriterOptions{SpoolDir: dir, Interval: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	long := strings.Repeat("\x01", 2<<20) // six bytes each in JSON
	w.Record(Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "before", Outcome: "ok"})
	w.Record(Entry{Tenant: "ten_a", Instance: "crm", Agent: long, Tool: strings.Repeat("t", 1<<20), Action: "long", Outcome: "ok"})
	w.Record(Entry{Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "after", Outcome: "ok"})
	if st := w.Stats(); st.JournalRows != 3 {
		t.Fatalf("journal rows %d, want 3", st.JournalRows)
	}
	segs := segmentFiles(t, dir, "*"+journalExt)
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, _, status := readJournal(bytes.NewReader(data))
	if status != journalWhole || len(rows) != 3 {
		t.Fatalf("the segment reads as %v with %d rows, want whole with 3", status, len(rows))
	}
	if r := rows[1]; r.Action != "long" || r.Agent != long[:maxField] || r.Tool != strings.Repeat("t", maxField) {
		t.Fatalf("the long row came back as action %q, agent of %d bytes, tool of %d", r.Action, len(r.Agent), len(r.Tool))
	}

	j, _, err := OpenJournal(t.TempDir(), 0, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now().UTC()
	if err := j.Append(&Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Action: long}); err == nil {
		t.Fatal("the journal took a record longer than it reads back")
	}
}
