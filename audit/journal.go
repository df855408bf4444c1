package audit

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Journal is the crash-safe first home of every audit row: Append returns
// once the row is in an append-only segment file (in the page cache), so a
// process crash (SIGKILL, an OOM kill, a panic) loses no row whose call was
// answered. Segments are fsync'd every Sync interval and when they are
// rotated, so a power loss or kernel crash loses at most the rows written
// since the last fsync.
//
// Where the filesystem keeps preallocated space (mapSegment), a segment is
// fallocate'd at creation (a full disk fails there) and mapped shared, and
// Append copies its record into the mapping under the mutex: no system
// call per row. The background goroutine keeps the pages ahead of the
// write cursor faulted in (populateAhead), so that the copy does not zero
// a fresh page under the mutex. Elsewhere, and for a group larger than
// what is left of a mapping, rows of concurrent calls share one write(2)
// (group commit: a caller waits for the next group write, microseconds).
//
// A record is a 4-byte little-endian payload length, the payload's CRC-32C
// and the payload (the row as JSON, the spool's form). A short last record
// (a torn write), or a last record that fails its checksum with nothing but
// zeros after it (a copy into the mapping that a crash cut short: the
// length is copied first and the checksum last), is cut off; zeros after
// the last whole record are the rest of a preallocated segment (or a file a
// power loss extended). Any other record whose checksum does not match
// sets the segment aside as *.bad.
//
// Each segment is held under an exclusive flock(2) by the process writing
// it, until all its rows are in the store or the spool; a segment nobody
// holds is a crashed process's, and OpenJournal hands its rows back for
// loading (replicas may share the directory). Segments are created under a
// temporary name and renamed once locked, so no other process ever sees an
// unlocked live segment.
type Journal struct {
	dir     string
	segMax  int64
	log     *slog.Logger
	owner   string
	seq     int
	stop    chan struct{}
	done    chan struct{}
	groups  atomic.Int64
	records atomic.Int64

	mu sync.Mutex
	// cond wakes Close when a write ends.
	cond  sync.Cond
	buf   []byte // the records of grp, the group being filled
	spare []byte
	grp   *jgroup
	// free holds groups all of whose callers have returned, for reuse:
	// a group allocated per write was one allocation per call at one
	// client.
	free    *jgroup
	writing bool // a leader is writing a group
	cur     *jsegment
	dirty   bool
	closed  bool
	// barrier, when set, makes the rows the store took durable there; a
	// done segment waits in ready until it has run (outside mu), and
	// after a failure is kept until retryAt.
	barrier func() error
	ready   []*jsegment
	retryAt time.Time

	// noMap makes every segment a write(2) one (tests of the fallback).
	noMap bool
	// noPopulate is set when the kernel refuses MADV_POPULATE_WRITE.
	noPopulate bool
	// kick asks the background goroutine to fault in pages ahead.
	kick chan struct{}
	// mapMu is held while the background goroutine uses a segment's
	// mapping outside mu, and to unmap one: a range unmapped meanwhile
	// could be reused by the runtime, and madvise would zero it.
	mapMu sync.Mutex
}

// populateAhead is how far ahead of the write cursor pages are faulted in
// (about 900 rows); the background goroutine is asked for more once half
// of it is used.
const populateAhead = 256 << 10

const pageSize = 4096

// barrierRetry is how long done segments are kept after a failed barrier
// before it is tried again.
const barrierRetry = 5 * time.Second

// jgroup is the rows of one write(2). Its appenders wait on cond (over
// Journal.mu), so that a write wakes only the callers it carried, and one
// caller of the next group to write that. A group is reused once done and
// left by all its callers (callers 0), never before: a caller still to
// return reads done, err and seg.
type jgroup struct {
	cond    sync.Cond
	rows    int
	callers int // callers that joined and have not yet returned
	done    bool
	err     error
	seg     *jsegment // where the group was written; nil when it failed
	next    *jgroup   // in Journal.free
}

// jsegment is one journal file of this process.
type jsegment struct {
	name    string
	f       *os.File
	size    int64
	pending int // rows written to it and not yet in the store or spool
	sealed  bool
	queued  bool // in Journal.ready
	// mem is the segment's shared mapping, nil for a write(2) segment;
	// unmapped (under Journal.mapMu) once it is sealed or closed.
	mem      []byte
	unmapped bool
	// populated is where the pages faulted in ahead end; dropped where
	// the written pages unmapped before an fsync end (dropPages).
	populated int64
	dropped   int64
}

const (
	journalExt  = ".wal"
	recordHead  = 8
	maxRecord   = 1 << 20
	journalTemp = ".wal-new"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errJournalClosed = errors.New("the audit journal is closed")

// Leftover is what OpenJournal found of crashed processes: their rows, and
// the segments to remove once those rows are kept elsewhere.
type Leftover struct {
	Rows []Entry
	// Bad counts segments set aside as *.bad (a checksum mismatch).
	Bad int
	// Torn counts segments whose torn last record was cut off.
	Torn  int
	files []*os.File
	names []string
}

// OpenJournal opens the journal in dir (created private to the server's
// user), fsyncing segments every sync (0: only on rotation and close), and
// returns the rows that crashed processes left in it. The caller keeps
// those rows (in the spool) and then calls Done on the Leftover.
func OpenJournal(dir string, sync time.Duration, segMax int64, log *slog.Logger) (*Journal, *Leftover, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating the audit journal directory: %w", err)
	}
	if segMax <= 0 {
		segMax = 4 << 20
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	j := &Journal{dir: dir, segMax: segMax, log: log, owner: hex.EncodeToString(id[:]),
		stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	j.cond.L = &j.mu
	j.grp = j.newGroup()
	left, err := j.leftover()
	if err != nil {
		return nil, nil, err
	}
	go j.syncLoop(sync)
	return j, left, nil
}

// leftover reads the segments no live process holds, oldest first.
func (j *Journal) leftover() (*Leftover, error) {
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("listing the audit journal: %w", err)
	}
	var names []string
	for _, de := range des {
		n := de.Name()
		switch {
		case strings.HasSuffix(n, journalExt):
			names = append(names, n)
		case strings.HasSuffix(n, journalTemp):
			// A segment a crash left before it was renamed (empty), unless
			// its process is still creating it.
			if f, err := lockFile(filepath.Join(j.dir, n)); err == nil {
				_ = os.Remove(filepath.Join(j.dir, n))
				f.Close()
			}
		}
	}
	sort.Strings(names)
	left := &Leftover{}
	for _, n := range names {
		path := filepath.Join(j.dir, n)
		f, err := lockFile(path)
		if err != nil {
			continue // a live process's segment
		}
		rows, good, status := readJournal(f)
		left.Rows = append(left.Rows, rows...)
		switch status {
		case journalTorn:
			left.Torn++
			j.log.Warn("audit journal segment ended in a torn write; cut off", "segment", n, "rows", len(rows), "at", good)
			_ = f.Truncate(good)
		case journalCorrupt:
			left.Bad++
			j.log.Error("AUDIT JOURNAL SEGMENT CORRUPT: a record fails its checksum; the rows before it are kept, the segment set aside",
				"segment", n, "rows_kept", len(rows), "at", good)
			if err := os.Rename(path, path+".bad"); err != nil {
				f.Close()
				return nil, fmt.Errorf("setting aside audit journal segment %s: %w", n, err)
			}
			f.Close()
			continue
		}
		left.files = append(left.files, f)
		left.names = append(left.names, path)
	}
	return left, nil
}

// Done removes the leftover segments, whose rows the caller has kept.
func (l *Leftover) Done(dir string) {
	for i, f := range l.files {
		_ = os.Remove(l.names[i])
		f.Close()
	}
	if len(l.files) > 0 {
		syncDir(dir)
	}
	l.files, l.names = nil, nil
}

// lockFile opens path and takes its exclusive flock without waiting.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

type journalStatus int

const (
	journalWhole journalStatus = iota
	journalTorn
	journalCorrupt
)

// readJournal decodes a segment's records up to the first one that is
// short (torn) or fails its checksum (corrupt); good is the offset after
// the last whole record.
func readJournal(r io.Reader) (rows []Entry, good int64, status journalStatus) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, journalCorrupt
	}
	for off := 0; off < len(data); {
		if allZero(data[off:]) {
			// The unwritten rest of a preallocated segment, or a file
			// extended by a power loss before its data reached the disk:
			// no record.
			return rows, int64(off), journalWhole
		}
		if len(data)-off < recordHead {
			return rows, int64(off), journalTorn
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n > maxRecord {
			return rows, int64(off), journalCorrupt
		}
		if len(data)-off-recordHead < n {
			return rows, int64(off), journalTorn
		}
		payload := data[off+recordHead : off+recordHead+n]
		var e Entry
		if crc32.Checksum(payload, castagnoli) != sum || json.Unmarshal(payload, &e) != nil {
			if allZero(data[off+recordHead+n:]) {
				// The last record, its copy into a mapping cut short
				// (the checksum is copied last): torn. A length copied
				// without its record leaves zeros after the length,
				// whatever the length says.
				return rows, int64(off), journalTorn
			}
			return rows, int64(off), journalCorrupt
		}
		rows = append(rows, e)
		off += recordHead + n
	}
	return rows, int64(len(data)), journalWhole
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Append writes e to the journal and returns once the write(2) holding it
// is done. On success e carries its segment, for Release.
func (j *Journal) Append(e *Entry) error {
	// The payload is encoded before the mutex is taken, on the caller's
	// stack (rows are 150-300 bytes): under the mutex it is only copied
	// into the group and checksummed there (crc32 moves its argument to
	// the heap), so that concurrent callers do not queue behind each
	// other's encoding.
	var stack [512]byte
	payload, err := encodePayload(stack[:0], e)
	if err != nil {
		return err
	}
	if len(payload) > maxRecord {
		// readJournal takes a longer record for a corrupt one and sets
		// its segment aside, with every row after it: such a row is
		// refused here instead (the Writer bounds its texts, so only a
		// caller of the journal that does not gets this).
		return fmt.Errorf("an audit journal record of %d bytes: the most is %d", len(payload), maxRecord)
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return errJournalClosed
	}
	if s := j.cur; s != nil && s.mem != nil && !j.writing && s.size < j.segMax &&
		s.size+int64(recordHead+len(payload)) <= int64(len(s.mem)) {
		// The mapped way: a copy into the page cache, no system call.
		// No group is being written (writing), so the record follows
		// the last one written whole.
		n := copyRecord(s.mem[s.size:], payload, 0)
		s.size += int64(n)
		s.pending++
		j.dirty = true
		if s.populated-s.size < populateAhead/2 {
			j.askPopulate()
		}
		j.mu.Unlock()
		j.groups.Add(1)
		j.records.Add(1)
		e.jseg = s
		return nil
	}
	start := len(j.buf)
	j.buf = binary.LittleEndian.AppendUint32(j.buf, uint32(len(payload)))
	j.buf = binary.LittleEndian.AppendUint32(j.buf, 0)
	j.buf = append(j.buf, payload...)
	binary.LittleEndian.PutUint32(j.buf[start+4:], crc32.Checksum(j.buf[start+recordHead:], castagnoli))
	g := j.grp
	g.rows++
	g.callers++
	for !g.done {
		if j.writing {
			g.cond.Wait()
			continue
		}
		j.writeGroup()
	}
	err, seg := g.err, g.seg
	if g.callers--; g.callers == 0 {
		// Every caller has returned from g.cond.Wait (done was set with
		// a Broadcast), so the condition has no waiter to carry over.
		g.rows, g.done, g.err, g.seg = 0, false, nil, nil
		g.next, j.free = j.free, g
	}
	j.mu.Unlock()
	if err == nil {
		e.jseg = seg
	}
	return err
}

// askPopulate asks the background goroutine to fault in the pages ahead
// of the write cursor (populateAhead), unless the kernel refused it or it
// was asked already. Called with mu held.
func (j *Journal) askPopulate() {
	if j.noPopulate {
		return
	}
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// copyRecord copies one record of payload into dst (a mapping) and returns
// its length. The length is copied first (one 4-byte store) and the
// checksum last, so that a crash in the middle leaves a record that reads
// as torn: a length followed by zeros, or a payload without its checksum,
// with only zeros after it. sum is the payload's checksum, 0 to compute
// it here (from the mapping: crc32 would move a stack argument to the
// heap).
func copyRecord(dst, payload []byte, sum uint32) int {
	binary.LittleEndian.PutUint32(dst, uint32(len(payload)))
	copy(dst[recordHead:], payload)
	if sum == 0 {
		sum = crc32.Checksum(dst[recordHead:recordHead+len(payload)], castagnoli)
	}
	binary.LittleEndian.PutUint32(dst[4:], sum)
	return recordHead + len(payload)
}

// copyRecords copies the records of a group, one by one in order, into
// dst (a mapping).
func copyRecords(dst, buf []byte) {
	for off := 0; off < len(buf); {
		n := int(binary.LittleEndian.Uint32(buf[off:]))
		sum := binary.LittleEndian.Uint32(buf[off+4:])
		off += copyRecord(dst[off:], buf[off+recordHead:off+recordHead+n], sum)
	}
}

// encodePayload appends e's record payload to b.
func encodePayload(b []byte, e *Entry) ([]byte, error) {
	b, ok := appendRecord(b, e)
	if ok {
		return b, nil
	}
	// encoding/json gets a copy: handing it e (an interface) would move
	// every caller's entry to the heap, on the common path too. Marshal
	// and a newline is what json.Encoder writes.
	c := *e
	p, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return append(append(b, p...), '\n'), nil
}

// writeGroup writes the group being filled, as its leader: j.mu is held on
// entry and exit, and released for the write.
func (j *Journal) writeGroup() {
	g, buf := j.grp, j.buf
	j.grp, j.buf = j.newGroup(), j.spare[:0]
	j.writing = true
	var old *jsegment
	var err error
	if j.closed {
		err = errJournalClosed
	} else if c := j.cur; c == nil || c.size >= j.segMax ||
		(c.mem != nil && c.size > 0 && c.size+int64(len(buf)) > int64(len(c.mem))) {
		old = j.cur
		j.seq++
		j.cur, err = j.create(j.seq)
		if err == nil && j.cur.mem != nil {
			j.askPopulate()
		}
	}
	seg := j.cur
	var at int64
	if seg != nil {
		at = seg.size
	}
	j.mu.Unlock()
	if old != nil && old.mem != nil {
		// Unmapped before its fsync: writeback would write-protect each
		// page still mapped (a TLB shootdown each).
		j.mapMu.Lock()
		unmapSegment(old.mem)
		old.unmapped = true
		j.mapMu.Unlock()
	}
	if err == nil && old != nil {
		// A sealed segment is on disk before its successor takes rows.
		_ = old.f.Sync()
	}
	if err == nil {
		if seg.mem != nil && at+int64(len(buf)) <= int64(len(seg.mem)) {
			copyRecords(seg.mem[at:], buf)
		} else {
			// A write(2) segment, or a group larger than a whole mapping
			// (tiny segments): written after the mapping's end, or
			// over its start, through the same page cache.
			_, err = seg.f.WriteAt(buf, at)
		}
	}
	j.groups.Add(1)
	j.records.Add(int64(g.rows))
	j.mu.Lock()
	if old != nil {
		old.sealed = true
		j.removeIfDone(old)
	}
	if err != nil {
		g.err = err
		if seg == nil {
			j.cur = nil
		}
		// A failed write may have left part of a record: the next group
		// goes to a new segment, so that the part is that segment's end.
		if seg != nil {
			seg.size = j.segMax
		}
	} else {
		g.seg = seg
		seg.pending += g.rows
		seg.size += int64(len(buf))
		j.dirty = true
	}
	g.done = true
	j.spare = buf[:0]
	j.writing = false
	g.cond.Broadcast()
	// One caller of the group filled meanwhile writes it.
	j.grp.cond.Signal()
	if j.closed {
		j.cond.Broadcast()
	}
}

// newGroup returns an empty group waiting on j.mu: a free one, or a new
// one. j.mu is held, or j is not yet shared.
func (j *Journal) newGroup() *jgroup {
	if g := j.free; g != nil {
		j.free, g.next = g.next, nil
		return g
	}
	g := &jgroup{}
	g.cond.L = &j.mu
	return g
}

// create makes a new locked segment: created under a temporary name, locked,
// then renamed, so that no replayer sees it unlocked.
func (j *Journal) create(seq int) (*jsegment, error) {
	name := fmt.Sprintf("%020d-%s-%06d%s", time.Now().UnixNano(), j.owner, seq, journalExt)
	tmp := filepath.Join(j.dir, name+"-new")
	// Written at the offsets the journal keeps (WriteAt), not appended:
	// a mapped segment's file is preallocated to its full size.
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating an audit journal segment: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("locking an audit journal segment: %w", err)
	}
	var mem []byte
	if !j.noMap {
		// Whole pages, at least one segment's worth.
		if mem, err = mapSegment(f, int((j.segMax+pageSize-1)&^(pageSize-1))); err != nil {
			f.Close()
			_ = os.Remove(tmp)
			return nil, fmt.Errorf("preallocating an audit journal segment: %w", err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(j.dir, name)); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("creating an audit journal segment: %w", err)
	}
	syncDir(j.dir)
	return &jsegment{name: name, f: f, mem: mem}, nil
}

// removeIfDone deletes a sealed segment whose rows are all kept elsewhere,
// or, with a barrier, queues it for removeReady. j.mu is held.
func (j *Journal) removeIfDone(s *jsegment) {
	if !s.sealed || s.pending > 0 || s.f == nil || s.queued {
		return
	}
	if j.barrier != nil {
		s.queued = true
		j.ready = append(j.ready, s)
		return
	}
	j.remove(s)
}

// removeReady runs the barrier once for the done segments, then deletes
// them; when it fails they are kept (retried after barrierRetry, or loaded
// by the next start: the store skips rows it has). force ignores
// retryAt. j.mu is not held.
func (j *Journal) removeReady(force bool) {
	j.mu.Lock()
	segs := j.ready
	if len(segs) == 0 || (!force && time.Now().Before(j.retryAt)) {
		j.mu.Unlock()
		return
	}
	j.ready = nil
	j.mu.Unlock()
	err := j.barrier()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		for _, s := range segs {
			j.remove(s)
		}
		return
	}
	j.retryAt = time.Now().Add(barrierRetry)
	j.log.Warn("audit journal segments kept: their rows are not yet durable in the store", "segments", len(segs), "err", err.Error())
	if !j.closed {
		j.ready = append(segs, j.ready...)
		return
	}
	for _, s := range segs {
		// Left on disk, unlocked, for the next start to load.
		s.f.Close()
		s.f = nil
	}
}

// remove deletes a segment. j.mu is held.
func (j *Journal) remove(s *jsegment) {
	if err := os.Remove(filepath.Join(j.dir, s.name)); err != nil {
		j.log.Error("removing an audit journal segment", "segment", s.name, "err", err.Error())
	}
	s.f.Close()
	s.f = nil
}

// Release records that rows are in the store or the spool; a sealed
// segment whose rows all are is deleted.
func (j *Journal) Release(rows []Entry) {
	j.mu.Lock()
	for i := range rows {
		s := rows[i].jseg
		if s == nil {
			continue
		}
		rows[i].jseg = nil
		s.pending--
		j.removeIfDone(s)
	}
	j.mu.Unlock()
	j.removeReady(false)
}

// syncLoop fsyncs the segment being written every d, when it was written
// since, and faults in the pages ahead of a mapped segment's cursor when
// Append asks (kick).
func (j *Journal) syncLoop(d time.Duration) {
	defer close(j.done)
	var tick <-chan time.Time
	if d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-j.stop:
			return
		case <-j.kick:
			j.populateAhead()
		case <-tick:
			j.syncCurrent()
		}
	}
}

// syncCurrent fsyncs the segment being written, if it was written since
// the last time.
func (j *Journal) syncCurrent() {
	j.mu.Lock()
	var s *jsegment
	if j.dirty && j.cur != nil && j.cur.f != nil {
		s, j.dirty = j.cur, false
	}
	var from, to int64
	if s != nil && s.mem != nil {
		// The whole pages written since the last fsync: no copy
		// touches them again.
		from, to = s.dropped, min(s.size, int64(len(s.mem)))&^(pageSize-1)
		s.dropped = max(from, to)
	}
	j.mu.Unlock()
	if s == nil {
		return
	}
	if from < to {
		j.mapMu.Lock()
		if !s.unmapped {
			dropPages(s.mem[from:to])
		}
		j.mapMu.Unlock()
	}
	// A segment closed meanwhile fails here; it was synced then.
	_ = s.f.Sync()
	if s.mem != nil {
		// The fsync wrote the pages faulted in ahead too (they are
		// dirty) and write-protected them: the next copy into each
		// would fault. They are faulted in again from the cursor.
		j.mu.Lock()
		s.populated = min(s.populated, s.size&^(pageSize-1))
		j.mu.Unlock()
		j.populateAhead()
	}
}

// populateAhead faults in, for writing, the pages from the write cursor to
// populateAhead bytes ahead, outside mu: the zeroing of a fresh page cache
// page (10-20 µs in a VM) is then not paid under the mutex by a copy.
func (j *Journal) populateAhead() {
	j.mapMu.Lock()
	defer j.mapMu.Unlock()
	j.mu.Lock()
	s := j.cur
	if s == nil || s.mem == nil || s.unmapped || j.noPopulate {
		j.mu.Unlock()
		return
	}
	cursor := min(s.size, int64(len(s.mem))) &^ (pageSize - 1)
	from := max(s.populated, cursor)
	to := min(cursor+populateAhead, int64(len(s.mem)))
	j.mu.Unlock()
	if from >= to {
		return
	}
	if err := populate(s.mem[from:to]); err != nil {
		// A kernel before 5.14: each first copy into a page faults it in.
		j.mu.Lock()
		j.noPopulate = true
		j.mu.Unlock()
		j.log.Warn("audit journal: pages are not faulted in ahead of the writes", "err", err.Error())
		return
	}
	j.mu.Lock()
	s.populated = max(s.populated, to)
	j.mu.Unlock()
}

// Close stops the journal: segments whose rows are all kept are removed,
// others are fsync'd and released for the next start to load. Appends
// after Close fail.
func (j *Journal) Close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	for j.writing {
		j.cond.Wait()
	}
	cur := j.cur
	j.cur = nil
	j.mu.Unlock()
	close(j.stop)
	<-j.done
	if cur != nil && cur.mem != nil {
		j.mapMu.Lock()
		unmapSegment(cur.mem)
		cur.unmapped = true
		j.mapMu.Unlock()
	}
	j.mu.Lock()
	switch {
	case cur == nil:
	case cur.pending > 0:
		cur.sealed = true
		_ = cur.f.Sync()
		j.log.Error("audit journal closed with rows not yet kept elsewhere; the next start loads them",
			"segment", cur.name, "rows", cur.pending)
		cur.f.Close()
		cur.f = nil
	default:
		cur.sealed = true
		j.removeIfDone(cur)
	}
	j.mu.Unlock()
	if j.barrier != nil {
		j.removeReady(true)
	}
}

// stats are the journal's counters: records written, in how many writes
// (a write(2) of a group, or the copy of one record into a mapping).
func (j *Journal) stats() (groups, records int64) { return j.groups.Load(), j.records.Load() }
