//go:build linux

package audit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestJournalTornCopy: a copy into a mapped segment that a crash cut
// short reads as a torn last record (the rows before it kept, the segment
// not set aside), however far the copy got; a checksum missing before a
// whole record is corruption.
func TestJournalTornCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	j, _, err := OpenJournal(dir, 0, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		now := time.Now().UTC()
		e := Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(i), Outcome: "ok"}
		if err := j.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	if j.cur.mem == nil {
		t.Fatal("the segment is not mapped: this tests nothing")
	}
	path, end := filepath.Join(dir, j.cur.name), int(j.cur.size)
	crash(j)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int // of each record
	for off := 0; off < end; off += recordHead + int(binary.LittleEndian.Uint32(data[off:])) {
		offs = append(offs, off)
	}
	if len(offs) != 10 {
		t.Fatalf("%d records", len(offs))
	}
	last, ninth := offs[9], offs[8]
	zero := func(b []byte) {
		for i := range b {
			b[i] = 0
		}
	}
	for _, c := range []struct {
		name   string
		cut    func(b []byte)
		rows   int
		status journalStatus
	}{
		{"whole", func([]byte) {}, 10, journalWhole},
		{"payload half copied, no checksum", func(b []byte) { zero(b[last+4 : last+8]); zero(b[(last+end)/2 : end]) }, 9, journalTorn},
		{"payload copied, no checksum", func(b []byte) { zero(b[last+4 : last+8]) }, 9, journalTorn},
		{"only the length", func(b []byte) { zero(b[last+4 : end]) }, 9, journalTorn},
		{"nothing yet", func(b []byte) { zero(b[last:end]) }, 9, journalWhole},
		{"a checksum missing before a whole record", func(b []byte) { zero(b[ninth+4 : ninth+8]) }, 8, journalCorrupt},
	} {
		b := bytes.Clone(data)
		c.cut(b)
		rows, good, status := readJournal(bytes.NewReader(b))
		if len(rows) != c.rows || status != c.status {
			t.Errorf("%s: %d rows, status %d; want %d, %d", c.name, len(rows), status, c.rows, c.status)
		}
		if want := offs[min(c.rows, 9)]; c.rows < 10 && good != int64(want) {
			t.Errorf("%s: good to %d, want %d", c.name, good, want)
		}
	}
	// A restart loads the rows before a torn copy and removes the segment.
	b := bytes.Clone(data)
	zero(b[last+4 : last+8])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	again, left, err := OpenJournal(dir, 0, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if len(left.Rows) != 9 || left.Torn != 1 || left.Bad != 0 {
		t.Fatalf("after the torn copy: %d rows, torn %d, bad %d", len(left.Rows), left.Torn, left.Bad)
	}
	left.Done(dir)
	if n := segmentFiles(t, dir, "*"+journalExt+"*"); len(n) != 0 {
		t.Fatalf("files left: %v", n)
	}
}

// TestJournalSurvivesSIGKILL: a child process appending from four
// goroutines into mapped segments (rotated every 64 KiB, so group writes
// into fresh mappings too) is killed with SIGKILL mid-append; every row
// whose Append had returned is read back, and no segment is set aside.
func TestJournalSurvivesSIGKILL(t *testing.T) {
	if dir := os.Getenv("JOURNAL_KILL_DIR"); dir != "" {
		appendUntilKilled(dir)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestJournalSurvivesSIGKILL$")
	cmd.Env = append(os.Environ(), "JOURNAL_KILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			acked[id] = true
			if len(acked) == 5000 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
	}
	_ = cmd.Wait()
	if len(acked) < 5000 {
		t.Fatalf("the child acknowledged %d rows", len(acked))
	}
	j, left, err := OpenJournal(dir, 0, 64<<10, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	back := map[string]bool{}
	for _, e := range left.Rows {
		back[e.ID] = true
	}
	for id := range acked {
		if !back[id] {
			t.Fatalf("acknowledged row %s lost", id)
		}
	}
	if left.Bad != 0 {
		t.Fatalf("%d segments set aside", left.Bad)
	}
	t.Logf("%d rows acknowledged, %d read back, torn %d", len(acked), len(left.Rows), left.Torn)
	left.Done(dir)
}

// appendUntilKilled is the child of TestJournalSurvivesSIGKILL: it prints
// each row's ID once Append has returned.
func appendUntilKilled(dir string) {
	j, _, err := OpenJournal(dir, 200*time.Millisecond, 64<<10, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				now := time.Now().UTC()
				e := Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Instance: "crm", Tool: "t", Action: fmt.Sprint(c, "-", i), Outcome: "ok"}
				if err := j.Append(&e); err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "acked %s\n", e.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestJournalPopulatesAhead: the pages ahead of the write cursor are
// faulted in by the background goroutine, so that a copy into the mapping
// (under the journal's mutex) does not fault: 300 rows, about 18 fresh
// pages, cost the appending thread next to no page fault.
func TestJournalPopulatesAhead(t *testing.T) {
	dir := t.TempDir()
	j, _, err := OpenJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now().UTC()
	e := Entry{ID: NewID(now), Time: now, Tenant: "ten_a", Instance: "crm", Tool: "t", Action: "list", Outcome: "ok", Status: 200}
	if err := j.Append(&e); err != nil {
		t.Fatal(err)
	}
	if j.cur.mem == nil {
		// CI runs on ext4, where segments are mapped: there the mapped way
		// must be the one taken, not silently the fallback.
		if os.Getenv("CI") == "true" {
			t.Fatal("the temporary directory's filesystem does not preallocate: segments are written with write(2)")
		}
		t.Skip("the filesystem of the temporary directory does not preallocate: segments are written with write(2)")
	}
	populated := func() int64 {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.cur.populated
	}
	for deadline := time.Now().Add(5 * time.Second); populated() < populateAhead && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if p := populated(); p < populateAhead {
		t.Fatalf("populated to %d, want %d", p, populateAhead)
	}
	rows := make([]Entry, 0, 300)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &before)
	for range cap(rows) {
		if err := j.Append(&e); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, e)
	}
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &after)
	j.Release(rows)
	pages := j.cur.size / pageSize
	if faults := after.Minflt - before.Minflt; faults > 3 && !raceEnabled {
		t.Fatalf("%d page faults appending into %d pages", faults, pages)
	}
	j.mu.Lock()
	j.noPopulate = true          // what a kernel before 5.14 does: the copies fault
	j.cur.size = j.cur.populated // past the populated pages
	j.mu.Unlock()
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &before)
	for range cap(rows) {
		if err := j.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &after)
	if faults := after.Minflt - before.Minflt; faults < 10 && !raceEnabled {
		t.Fatalf("only %d page faults appending into fresh pages: the test measures nothing", faults)
	}
	if !preallocates(0xEF53) || preallocates(0x9123683E) { // ext4 maps, btrfs does not
		t.Fatal("preallocates: ext4 must map, btrfs must not")
	}
}
