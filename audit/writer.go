package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
)

// Recorder takes audit entries on the call path.
type Recorder interface {
	// Admit is asked before a call may reach its upstream. It returns the
	// admission whose Record records the call's entry, which the caller
	// must call exactly once, before the call is answered, or an
	// audit_unavailable error when the row could not be kept: the call
	// must then be refused without reaching the upstream. Record returns
	// once the row is in the Writer's journal (when it has one), so that
	// a crash after the answer keeps the row.
	Admit() (Admission, error)
	// Record records the entry of a call that was not admitted (refused
	// before it could reach an upstream), also through the journal.
	Record(Entry)
}

// Admission is an admitted call's right to record its row (Recorder.Admit).
// It is a value the call keeps (a closure per call was two of a
// tools/call's allocations): Record it through the variable Admit's
// answer was stored in, once; a second Record of that variable records
// nothing.
type Admission struct {
	record func(Entry) // the recorder's, shared by its admissions
	done   bool
}

// AdmitTo returns an Admission whose Record gives the entry to record:
// for Recorders other than Writer.
func AdmitTo(record func(Entry)) Admission { return Admission{record: record} }

// Admitted reports whether a is an admitted call's (not the zero value):
// whether its call has a row to record.
func (a *Admission) Admitted() bool { return a.record != nil }

// Record records the admitted call's entry, the first time it is called.
func (a *Admission) Record(e Entry) {
	if a.done || a.record == nil {
		return
	}
	a.done = true
	a.record(e)
}

// AtFull is what a Writer does when its backlog (memory and spool) is
// full.
type AtFull string

const (
	// RefuseCalls refuses new calls (Admit returns audit_unavailable)
	// until the backlog shrinks; rows of calls already admitted are still
	// kept. The default: no call reaches an upstream without its row.
	RefuseCalls AtFull = "refuse"
	// DropOldest keeps taking calls and drops the oldest waiting rows
	// (the oldest spool segment, or the oldest rows in memory without a
	// spool) to make room, each drop logged and counted.
	DropOldest AtFull = "drop-oldest"
)

// ParseAtFull parses a --audit-at-full value.
func ParseAtFull(s string) (AtFull, error) {
	switch AtFull(s) {
	case RefuseCalls, DropOldest:
		return AtFull(s), nil
	case "":
		return RefuseCalls, nil
	}
	return "", fmt.Errorf("audit at-full policy %q: want %q or %q", s, RefuseCalls, DropOldest)
}

// errUnavailable is the typed error Admit returns when a call must be
// refused because its audit row could not be kept.
func errUnavailable(why string) error {
	return switchboard.E(switchboard.ErrUnavailable, "audit_unavailable",
		"the call was refused because its audit row cannot be kept: %s", why)
}

// WriterOptions tunes a Writer.
type WriterOptions struct {
	// Buffer is how many rows may wait in memory. While the store fails,
	// a backlog this long is moved to the spool; without a spool, it is
	// the whole bound. Default 8192.
	Buffer int
	// Batch is the most entries written per transaction. Default 256.
	Batch int
	// Interval is how long an entry may wait before it is written.
	// Default 200ms.
	Interval time.Duration
	// SpoolDir is the directory of the on-disk spool (such as
	// <data dir>/audit-spool); empty keeps the backlog in memory only.
	SpoolDir string
	// JournalSync is how often the journal (kept in SpoolDir with the
	// spool) is fsync'd: a process crash loses no journaled row, a power
	// loss or kernel crash the rows since the last fsync. Default 200ms;
	// negative: only when a segment is rotated or closed.
	JournalSync time.Duration
	// JournalSegment is the size at which a journal segment is rotated.
	// Default 4 MiB.
	JournalSegment int64
	// SpoolRows bounds the rows in the spool. Default 1,000,000.
	SpoolRows int64
	// AtFull is what happens when memory and spool are full. Default
	// RefuseCalls.
	AtFull AtFull
	// RetryMax caps the backoff between attempts while the store fails.
	// Default 5s.
	RetryMax time.Duration
	Logger   *slog.Logger
	// beforeSync, when set, runs at the start of every durability barrier
	// and fails it by returning an error (tests).
	beforeSync func() error
}

// Writer writes entries asynchronously, in batches, and loses none. With a
// spool directory, every entry is first appended to the journal there
// (group commit, no fsync per row) before Record or the admitted call's
// Admission.Record returns, so that a process crash loses no row; the
// journal segments are deleted once their rows are in the store or the
// spool (after a barrier making the store's copy durable: Store.Sync), and
// a crashed process's segments are moved to the spool on the next start. A
// batch the store refuses stays in memory and is retried with backoff;
// past Buffer rows the backlog goes to the spool on disk (fsync'd), which
// is drained oldest first once the store takes rows again, also after a
// restart. Close writes or spools every row. Record never blocks on the
// store.
type Writer struct {
	store   *Store
	opts    WriterOptions
	spool   *Spool
	journal *Journal
	log     *slog.Logger

	mu       sync.Mutex
	queue    []Entry
	closed   bool
	inflight int
	// admitted records an admitted call's entry (Admission.record).
	admitted func(Entry)
	// memory counts the rows waiting in memory: the queue and the batch
	// the loop holds.
	memory atomic.Int64

	wake    chan struct{}
	flushCh chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	// base bounds every store write; Close cancels it when its deadline
	// passes, so that the rest is spooled instead.
	base       context.Context
	cancelBase context.CancelFunc

	full    atomic.Bool
	dropped atomic.Int64
	written atomic.Int64
	spooled atomic.Int64
	refused atomic.Int64
	fulls   atomic.Int64
	// unjournaled counts rows the journal could not take (kept in
	// memory only); journalBad the journal segments set aside.
	unjournaled atomic.Int64
	journalBad  atomic.Int64
}

// NewWriter starts a writer over store. When opts.SpoolDir is set it opens
// the spool there; rows a previous run left in it are written once the
// store takes them.
func NewWriter(store *Store, opts WriterOptions) (*Writer, error) {
	if opts.Buffer <= 0 {
		opts.Buffer = 8192
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.Interval <= 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.SpoolRows <= 0 {
		opts.SpoolRows = 1_000_000
	}
	if opts.AtFull == "" {
		opts.AtFull = RefuseCalls
	}
	if opts.JournalSync == 0 {
		opts.JournalSync = 200 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{store: store, opts: opts, log: opts.Logger,
		wake: make(chan struct{}, 1), flushCh: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	w.admitted = func(e Entry) { w.add(e, true) }
	w.base, w.cancelBase = context.WithCancel(context.Background())
	if opts.SpoolDir != "" {
		sp, err := OpenSpool(opts.SpoolDir)
		if err != nil {
			return nil, err
		}
		w.spool = sp
		j, left, err := OpenJournal(opts.SpoolDir, opts.JournalSync, opts.JournalSegment, w.log)
		if err != nil {
			return nil, err
		}
		// A crashed process's journal goes to the spool (one fsync'd
		// segment), which the loop drains into the store first.
		w.journalBad.Add(int64(left.Bad))
		if len(left.Rows) > 0 {
			if err := sp.Append(left.Rows); err != nil {
				j.Close()
				return nil, fmt.Errorf("moving the audit journal of a crashed process to the spool: %w", err)
			}
			w.log.Warn("audit journal holds rows of a process that crashed; spooled for the store", "rows", len(left.Rows),
				"torn_segments", left.Torn, "bad_segments", left.Bad)
		}
		left.Done(opts.SpoolDir)
		j.barrier = w.durable
		w.journal = j
		if n := sp.Rows(); n > 0 {
			w.log.Warn("audit spool holds rows from an earlier run; writing them to the store", "rows", n, "dir", sp.Dir())
		}
	}
	go w.run()
	return w, nil
}

// Stats are a Writer's counters, for operators (until metrics are
// exported) and tests.
type Stats struct {
	// Written rows reached the store.
	Written int64 `json:"written"`
	// Spooled rows were written to the spool (and may since have been
	// drained into the store).
	Spooled int64 `json:"spooled"`
	// Dropped rows are lost: dropped at a full backlog under DropOldest,
	// recorded after Close without a spool, or unreadable in the spool.
	Dropped int64 `json:"dropped"`
	// Refused calls were refused by Admit (backlog full or closed).
	Refused int64 `json:"refused"`
	// Full counts the times the backlog became full.
	Full int64 `json:"full"`
	// Memory and Spool are the rows waiting now, in memory and on disk.
	Memory int64 `json:"memory"`
	Spool  int64 `json:"spool"`
	// JournalWrites and JournalRows count the journal's writes (a
	// write(2), or a row copied into a mapped segment) and the rows they
	// carried; Unjournaled the rows it could not take
	// (kept in memory only, logged); JournalBad the segments set aside as
	// *.bad at start.
	JournalWrites int64 `json:"journal_writes"`
	JournalRows   int64 `json:"journal_rows"`
	Unjournaled   int64 `json:"unjournaled"`
	JournalBad    int64 `json:"journal_bad"`
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	st := Stats{Written: w.written.Load(), Spooled: w.spooled.Load(), Dropped: w.dropped.Load(),
		Refused: w.refused.Load(), Full: w.fulls.Load(), Memory: w.memory.Load()}
	if w.spool != nil {
		st.Spool = w.spool.Rows()
	}
	if w.journal != nil {
		st.JournalWrites, st.JournalRows = w.journal.stats()
	}
	st.Unjournaled, st.JournalBad = w.unjournaled.Load(), w.journalBad.Load()
	return st
}

// Dropped returns how many entries were lost.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Written returns how many entries were written to the store.
func (w *Writer) Written() int64 { return w.written.Load() }

// isFull reports whether memory and spool are at their bounds.
func (w *Writer) isFull() bool {
	if w.memory.Load() < int64(w.opts.Buffer) {
		return false
	}
	return w.spool == nil || w.spool.Rows() >= w.opts.SpoolRows
}

// setFull records a change of the full state, loudly when it fills.
func (w *Writer) setFull(full bool) {
	if w.full.Swap(full) == full {
		return
	}
	if full {
		w.fulls.Add(1)
		w.log.Error("AUDIT BACKLOG FULL: the store is not taking rows and memory and spool are at their bounds",
			"policy", string(w.opts.AtFull), "memory_rows", w.memory.Load(), "spool_rows", w.Stats().Spool,
			"buffer", w.opts.Buffer, "spool_bound", w.opts.SpoolRows)
	} else {
		w.log.Warn("audit backlog no longer full", "memory_rows", w.memory.Load(), "spool_rows", w.Stats().Spool)
	}
}

// Admit implements Recorder: it refuses the call when the backlog is full
// under RefuseCalls, or when the writer is closed.
func (w *Writer) Admit() (Admission, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.refused.Add(1)
		return Admission{}, errUnavailable("the server is shutting down")
	}
	if w.opts.AtFull == RefuseCalls && w.isFull() {
		w.setFull(true)
		w.refused.Add(1)
		return Admission{}, errUnavailable("the audit backlog is full while the store is unavailable")
	}
	w.inflight++
	return Admission{record: w.admitted}, nil
}

// Record implements Recorder.
func (w *Writer) Record(e Entry) { w.add(e, false) }

// add queues e; admitted marks the end of an admitted call. After Close the
// entry goes straight to the spool.
func (w *Writer) add(e Entry, admitted bool) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if e.ID == "" {
		e.ID = NewID(e.Time)
	}
	e.boundTexts()
	if w.journal != nil {
		// The row is in the journal before the call's answer leaves.
		if err := w.journal.Append(&e); err != nil && !errors.Is(err, errJournalClosed) {
			w.unjournaled.Add(1)
			w.log.Error("AUDIT JOURNAL WRITE FAILED: the row is kept in memory only", "err", err.Error())
		}
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.spill([]Entry{e}, "recorded after close")
		// Close waits for admitted calls: this one counts until its row
		// is on disk, so the process cannot exit in between.
		if admitted {
			w.mu.Lock()
			w.inflight--
			w.mu.Unlock()
		}
		return
	}
	if admitted {
		w.inflight--
	}
	w.queue = append(w.queue, e)
	w.memory.Add(1)
	full := len(w.queue) >= w.opts.Batch
	w.mu.Unlock()
	// The loop writes on its tick (Interval) or when a whole batch
	// waits: waking it for every row made one transaction per call under
	// light load, a fifth of the server's CPU at 16 clients.
	if full {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// spill moves rows to the spool, applying the at-full policy; without a
// spool (or when it fails) they are dropped, loudly.
func (w *Writer) spill(rows []Entry, why string) {
	if len(rows) == 0 {
		return
	}
	if w.spool == nil {
		w.dropped.Add(int64(len(rows)))
		w.log.Error("AUDIT ROWS LOST: no spool directory to keep them", "rows", len(rows), "why", why)
		return
	}
	if w.opts.AtFull == DropOldest {
		// A batch larger than the whole spool keeps its newest rows: the
		// bound holds even then, and what goes is still the oldest.
		if over := int64(len(rows)) - w.opts.SpoolRows; over > 0 {
			w.setFull(true)
			w.dropped.Add(over)
			w.log.Error("AUDIT ROWS DROPPED: a batch larger than the spool and the policy is drop-oldest",
				"rows", over, "spool_bound", w.opts.SpoolRows)
			w.release(rows[:over])
			rows = rows[over:]
		}
		w.makeRoom(int64(len(rows)))
	}
	if err := w.spool.Append(rows); err != nil {
		w.dropped.Add(int64(len(rows)))
		// Journaled rows stay in the journal, for the next start.
		w.log.Error("AUDIT ROWS LOST: spooling failed", "rows", len(rows), "why", why, "err", err.Error())
		return
	}
	w.release(rows)
	w.spooled.Add(int64(len(rows)))
	w.log.Warn("audit rows spooled to disk", "rows", len(rows), "why", why, "spool_rows", w.spool.Rows())
}

// makeRoom drops the oldest spool segments until n more rows fit.
func (w *Writer) makeRoom(n int64) {
	for w.spool.Rows()+n > w.opts.SpoolRows {
		segs, err := w.spool.segments()
		if err != nil || len(segs) == 0 {
			return
		}
		if w.spool.Rows()+n <= w.opts.SpoolRows {
			return
		}
		if err := w.spool.remove(segs[0]); err != nil {
			w.log.Error("dropping the oldest audit spool segment", "err", err.Error())
			return
		}
		w.setFull(true)
		w.dropped.Add(segs[0].rows)
		w.log.Error("AUDIT ROWS DROPPED: the spool is full and the policy is drop-oldest",
			"rows", segs[0].rows, "segment", segs[0].name)
	}
}

// Flush tries once to write everything queued and spooled before it
// returns (or ctx is done).
func (w *Writer) Flush(ctx context.Context) {
	ack := make(chan struct{})
	select {
	case w.flushCh <- ack:
	case <-w.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ack:
	case <-ctx.Done():
	}
}

// Close stops admitting calls, waits (until ctx is done) for admitted
// calls to record their rows, writes what is queued and spools whatever
// the store did not take by ctx's deadline. It returns once every row it
// held is in the store or the spool. A row recorded after Close goes
// straight to the spool.
func (w *Writer) Close(ctx context.Context) {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		stopCancel := context.AfterFunc(ctx, w.cancelBase)
		defer stopCancel()
		for {
			w.mu.Lock()
			n := w.inflight
			w.mu.Unlock()
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				w.log.Error("shutdown: admitted calls still running; their rows are spooled if they finish before exit",
					"calls", n)
			case <-time.After(5 * time.Millisecond):
				continue
			}
			break
		}
		close(w.stop)
		<-w.done
		w.cancelBase()
		if w.journal != nil {
			w.journal.Close()
		}
		st := w.Stats()
		w.log.Info("audit writer closed", "written", st.Written, "spooled", st.Spooled, "dropped", st.Dropped,
			"refused", st.Refused, "full", st.Full, "spool_rows", st.Spool)
	})
	<-w.done
}

// take moves the queue into the loop's batch.
func (w *Writer) take(pending []Entry) []Entry {
	w.mu.Lock()
	pending = append(pending, w.queue...)
	w.queue = w.queue[:0]
	w.mu.Unlock()
	return pending
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	var pending []Entry
	var failures int
	// drainSpool is set while the spool may hold rows to write: rows an
	// earlier run left, or rows spilled while the store failed.
	drainSpool := w.spool != nil && w.spool.Rows() > 0
	// retry is the backoff timer while the store fails.
	var retry <-chan time.Time
	for {
		var ack chan struct{}
		stopping, due := false, false
		select {
		case <-w.wake:
		case <-tick.C:
		case <-retry:
			due = true
		case ack = <-w.flushCh:
		case <-w.stop:
			stopping = true
		}
		if retry != nil && !due && ack == nil && !stopping {
			// Backing off: only the timer, a flush or Close trigger an
			// attempt; meanwhile keep memory within its bound.
			pending = w.take(pending)
			w.bound(&pending)
			continue
		}
		retry = nil
		pending = w.take(pending)
		err := w.writePending(&pending)
		for err == nil && drainSpool && !stopping {
			if drainSpool, err = w.drainSpool(); err == nil {
				pending = w.take(pending)
				err = w.writePending(&pending)
			}
			select {
			case <-w.stop:
				stopping = true
			default:
			}
		}
		if err != nil {
			failures++
			if failures == 1 || failures%20 == 0 {
				w.log.Error("writing audit rows failed; keeping them and retrying", "waiting_rows", len(pending),
					"attempt", failures, "err", err.Error())
			}
			w.bound(&pending)
			drainSpool = w.spool != nil
			if !stopping {
				retry = time.After(w.backoff(failures))
			}
		} else if failures > 0 {
			w.log.Info("audit store writable again", "after_attempts", failures)
			failures = 0
		}
		if !w.isFull() {
			w.setFull(false)
		}
		if stopping {
			// Everything still held, including rows of calls that
			// finished since the last take, goes to the spool.
			pending = w.take(pending)
			w.memory.Add(-int64(len(pending)))
			w.spill(pending, "shutdown before the store took them")
		}
		if ack != nil {
			close(ack)
		}
		if stopping {
			return
		}
	}
}

// writePending writes pending in batches; what the store refuses stays.
func (w *Writer) writePending(pending *[]Entry) error {
	for len(*pending) > 0 {
		n := min(len(*pending), w.opts.Batch)
		ctx, cancel := context.WithTimeout(w.base, 10*time.Second)
		err := w.store.Insert(ctx, (*pending)[:n])
		cancel()
		if err != nil {
			return err
		}
		w.release((*pending)[:n])
		w.written.Add(int64(n))
		w.memory.Add(-int64(n))
		*pending = (*pending)[n:]
	}
	*pending = nil
	return nil
}

// drainSpool writes the oldest spool segment to the store and removes
// it; it reports whether segments remain.
func (w *Writer) drainSpool() (bool, error) {
	segs, err := w.spool.segments()
	if err != nil || len(segs) == 0 {
		return false, err
	}
	seg := segs[0]
	rows, err := w.spool.read(seg)
	if err != nil {
		w.dropped.Add(seg.rows)
		w.log.Error("AUDIT ROWS LOST: unreadable spool segment set aside", "segment", seg.name, "rows", seg.rows, "err", err.Error())
		if qerr := w.spool.quarantine(seg); qerr != nil {
			return false, qerr
		}
		return len(segs) > 1, nil
	}
	for len(rows) > 0 {
		n := min(len(rows), w.opts.Batch)
		ctx, cancel := context.WithTimeout(w.base, 10*time.Second)
		err := w.store.Insert(ctx, rows[:n])
		cancel()
		if err != nil {
			return true, err
		}
		rows = rows[n:]
	}
	// The segment is deleted only once its rows are durable in the store;
	// when that fails it is drained again (the store skips rows it has).
	if err := w.durable(); err != nil {
		return true, err
	}
	if err := w.spool.remove(seg); err != nil {
		return true, err
	}
	w.written.Add(seg.rows)
	w.log.Info("audit spool segment written to the store", "rows", seg.rows, "segments_left", len(segs)-1)
	if len(segs) == 1 && !w.isFull() {
		w.setFull(false)
	}
	return len(segs) > 1, nil
}

// bound keeps the rows in memory within Buffer while the store fails:
// the backlog goes to the spool, or, at a full spool, the policy applies.
func (w *Writer) bound(pending *[]Entry) {
	if len(*pending) < w.opts.Buffer {
		return
	}
	if w.spool != nil && (w.spool.Rows() < w.opts.SpoolRows || w.opts.AtFull == DropOldest) {
		w.spill(*pending, "store unavailable, memory backlog full")
		w.memory.Add(-int64(len(*pending)))
		*pending = nil
		return
	}
	w.setFull(true)
	if w.opts.AtFull == DropOldest {
		// No spool: drop the oldest rows in memory.
		n := len(*pending) - w.opts.Buffer + 1
		w.dropped.Add(int64(n))
		w.memory.Add(-int64(n))
		w.release((*pending)[:n])
		*pending = (*pending)[n:]
		w.log.Error("AUDIT ROWS DROPPED: memory backlog full, no spool, policy drop-oldest", "rows", n)
	}
	// RefuseCalls: Admit refuses new calls; rows of admitted calls stay.
}

// durable is the barrier before the journal or the spool deletes rows the
// store took: it returns once they are durable in the store.
func (w *Writer) durable() error {
	if w.opts.beforeSync != nil {
		if err := w.opts.beforeSync(); err != nil {
			return err
		}
	}
	// Not w.base: Close cancels it before the journal's last barrier.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.store.Sync(ctx)
}

// release tells the journal that rows are kept elsewhere (or dropped by
// policy).
func (w *Writer) release(rows []Entry) {
	if w.journal != nil {
		w.journal.Release(rows)
	}
}

// backoff is the wait before attempt n+1: doubling from Interval up to
// RetryMax, with ±20% jitter so replicas do not retry in step.
func (w *Writer) backoff(n int) time.Duration {
	d := w.opts.Interval
	for i := 1; i < n && d < w.opts.RetryMax; i++ {
		d *= 2
	}
	d = min(d, w.opts.RetryMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
