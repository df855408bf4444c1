package database

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
)

// The change log (table change_log) numbers the changes replicas tell each
// other of, per NOTIFY channel: a change's row is written in the change's
// own transaction (LogChangeTx), and its notification carries the row's
// sequence, so that a listener that was away (its connection dropped)
// reads what it missed from the log instead of dropping every cache
// (ChangeListener).

// changeLogKept is how long the change log keeps a change: a listener
// away longer empties its caches instead of replaying.
const changeLogKept = time.Hour

// replayMargin is how far before its last sequence a reconnecting
// listener reads again: sequences are taken before commit, so a lower one
// may commit after a higher one was heard (delivering a change twice is
// harmless: it invalidates).
const replayMargin = 100

// LogChangeTx writes payload, a JSON object, to the change log of channel
// inside tx, the transaction of the change itself, so that either both
// commit or neither, and returns its sequence. On Postgres it also
// notifies channel with the payload and its sequence ({"seq":N,...}),
// which Postgres delivers only when tx commits. One change in a thousand
// prunes the log.
func (db *DB) LogChangeTx(ctx context.Context, tx *sql.Tx, channel string, payload []byte) (int64, error) {
	if len(payload) < 2 || payload[0] != '{' {
		return 0, errors.New("a logged change must be a JSON object")
	}
	now := time.Now().UTC()
	var seq int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO change_log (channel, payload, created_at) VALUES ($1, $2, $3) RETURNING seq`,
		channel, string(payload), now).Scan(&seq); err != nil {
		return 0, fmt.Errorf("logging a change: %w", err)
	}
	if seq%1000 == 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM change_log WHERE created_at < $1`, now.Add(-changeLogKept)); err != nil {
			return 0, fmt.Errorf("pruning the change log: %w", err)
		}
	}
	return seq, db.NotifyTx(ctx, tx, channel, withSeq(payload, seq))
}

// withSeq is the JSON object payload with "seq" first.
func withSeq(payload []byte, seq int64) string {
	head := `{"seq":` + strconv.FormatInt(seq, 10)
	if rest := string(payload[1:]); len(rest) > 1 && rest != "}" {
		return head + "," + rest
	}
	return head + "}"
}

// ChangeListener delivers the changes of one channel, logged by
// LogChangeTx, to a replica: each notification as it comes, and, after a
// reconnection, the changes logged while it was away.
//
// A change is delivered once: the replay after a connection skips the
// changes already heard, and, on the first connection, those the mark saw
// committed (what a replica caches after Mark already reflects them).
// Delivering them again would be harmless for correctness but not for
// availability: it drops cache entries for nothing, and a listener that
// connects late (a loaded machine) would empty warm caches just before
// they are needed, such as when the store goes away.
type ChangeListener struct {
	db      *DB
	channel string
	// last is the sequence of the last change heard; known says there is
	// one (Mark, or a first connection).
	last  atomic.Int64
	known atomic.Bool
	// seen holds the sequences of this channel's changes heard (or seen
	// by Mark) within the replay window below last, so that a replay
	// skips them; older ones are dropped as last rises.
	mu   sync.Mutex
	seen map[int64]struct{}
}

// NewChangeListener returns the listener of channel's changes.
func (db *DB) NewChangeListener(channel string) *ChangeListener {
	return &ChangeListener{db: db, channel: channel}
}

// Mark notes where the log stands: the listener's first connection then
// replays the changes logged since, instead of dropping everything. Call
// it before anything is cached (when the server starts serving). On the
// embedded store it does nothing.
func (l *ChangeListener) Mark(ctx context.Context) error {
	if !l.db.Dialect.Replicated() {
		return nil
	}
	var last int64
	if err := l.db.QueryRowContext(ctx, `SELECT COALESCE(max(seq), 0) FROM change_log`).Scan(&last); err != nil {
		return fmt.Errorf("reading the change log: %w", err)
	}
	// The changes of the window that have committed are reflected in
	// whatever is cached from now on: the replay skips them. Those still
	// uncommitted (a lower sequence taken before a higher one committed)
	// are not listed, and are replayed.
	rows, err := l.db.QueryContext(ctx, `SELECT seq FROM change_log WHERE channel = $1 AND seq > $2`,
		l.channel, last-replayMargin)
	if err != nil {
		return fmt.Errorf("reading the change log: %w", err)
	}
	var committed []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return fmt.Errorf("reading the change log: %w", err)
		}
		committed = append(committed, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the change log: %w", err)
	}
	l.raise(last)
	for _, seq := range committed {
		l.heard(seq)
	}
	l.known.Store(true)
	return nil
}

// Listen calls deliver with every change's payload (a JSON object with
// its "seq") until ctx is done. After every connection of its listener it
// replays the changes logged since the last one heard (or since Mark);
// only when it cannot (no position known yet, the log was pruned past it
// or cannot be read) does it call all, which must drop everything the
// changes would have invalidated. A notification without a sequence is
// reported to onError and skipped. It returns at once on the embedded
// store. Run it in its own goroutine.
func (l *ChangeListener) Listen(ctx context.Context, deliver func(payload string), all func(), onError func(error)) {
	l.db.Listen(ctx, l.channel, func(payload string) {
		var head struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(payload), &head); err != nil || head.Seq <= 0 {
			// Not a change a replica of this version sends: emptying
			// every cache for it would cost a stampede of lookups, so it
			// is reported and skipped. (Its content is not logged.)
			if onError != nil {
				onError(fmt.Errorf("skipped an unparsable change notification of %d bytes on %s", len(payload), l.channel))
			}
			return
		}
		if l.heard(head.Seq) { // else the replay delivered it
			deliver(payload)
		}
	}, func() error { return l.resync(deliver, all, onError) }, onError)
}

// resync runs after every connection of the listener. When the change
// log cannot be read because the store is unavailable, it drops nothing
// and returns the error: the listener reconnects, with backoff, and
// replays from the same position once the store answers. Dropping every
// cache there would empty a replica's caches just as the store goes away
// (a listener that connected as it went, on a loaded machine), when they
// are what it serves from; and losing the store is no more reason to drop
// them than losing the listener's connection is. Other errors, and a log
// pruned past the position, drop everything.
func (l *ChangeListener) resync(deliver func(string), all func(), onError func(error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	report := func(err error) error {
		if errors.Is(Classify(err), switchboard.ErrUnavailable) {
			return fmt.Errorf("replaying missed changes on %s, retried on the next connection: %w", l.channel, err)
		}
		if onError != nil {
			onError(fmt.Errorf("replaying missed changes on %s, dropping every cache instead: %w", l.channel, err))
		}
		all()
		return nil
	}
	if !l.known.Load() {
		if err := l.Mark(ctx); err != nil && onError != nil {
			onError(err)
		}
		all()
		return nil
	}
	last := l.last.Load()
	var oldest sql.NullInt64
	if err := l.db.QueryRowContext(ctx, `SELECT min(seq) FROM change_log`).Scan(&oldest); err != nil {
		return report(err)
	}
	if oldest.Valid && oldest.Int64 > last+1 {
		return report(errors.New("the change log was pruned past the last change heard"))
	}
	rows, err := l.db.QueryContext(ctx, `SELECT seq, payload FROM change_log WHERE channel = $1 AND seq > $2 ORDER BY seq`,
		l.channel, last-replayMargin)
	if err != nil {
		return report(err)
	}
	type change struct {
		seq     int64
		payload []byte
	}
	var missed []change
	for rows.Next() {
		var c change
		if err := rows.Scan(&c.seq, &c.payload); err != nil {
			rows.Close()
			return report(err)
		}
		missed = append(missed, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return report(err)
	}
	for _, c := range missed {
		if l.heard(c.seq) {
			deliver(withSeq(c.payload, c.seq))
		}
	}
	return nil
}

// heard records seq as heard and reports whether it was new (not heard,
// nor seen by Mark, before).
func (l *ChangeListener) heard(seq int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[seq]; ok {
		return false
	}
	l.raise(seq)
	floor := l.last.Load() - replayMargin
	if seq <= floor {
		// Below the window: a later replay cannot list it again.
		return true
	}
	if l.seen == nil {
		l.seen = map[int64]struct{}{}
	}
	l.seen[seq] = struct{}{}
	if len(l.seen) > replayMargin {
		// At most replayMargin sequences lie in the window.
		for s := range l.seen {
			if s <= floor {
				delete(l.seen, s)
			}
		}
	}
	return true
}

// raise records seq as the last heard, if it is the highest yet.
func (l *ChangeListener) raise(seq int64) {
	for {
		cur := l.last.Load()
		if seq <= cur || l.last.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// ChangePosition is where the change log stood for one read: which
// changes the read's snapshot saw committed, so that a cache entry made
// from the read can skip the notifications of the changes it already
// reflects (a notification arrives after its change commits, on every
// replica including the one that made it, and a read in between is
// current). The zero value saw nothing.
//
// On Postgres a read's snapshot may see a higher sequence without a lower
// one: sequences are taken before commit, so a transaction holding a
// lower one may commit after a higher one. There the position is not a
// high-water mark but the set of sequences the snapshot saw within
// changePositionWindow below the highest: a change it did not see is
// never taken as seen, and one older than the window is taken as unseen
// (its cache entry is dropped, as before). On the embedded store writers
// are serialized (every transaction begins IMMEDIATE), so a snapshot sees
// every sequence up to the highest it sees: there the highest is enough.
type ChangePosition struct {
	top int64 // the highest sequence the read saw
	// seen has bit i set when the read saw sequence top-i; allSeen when
	// it saw every sequence up to top.
	seen int64
}

// allSeen is ChangePosition.seen on the embedded store.
const allSeen = -1

// changePositionWindow is how many sequences below and including its
// highest a Postgres ChangePosition records (bits of a positive int64,
// so that their sum fits a BIGINT).
const changePositionWindow = 63

// ChangePosition returns the two select-list expressions that read a
// ChangePosition (scan them with its Scan) in a query, from the query's
// own snapshot: a statement reads one snapshot, on both stores. Each is a
// subquery that does not depend on the query's rows, evaluated once. On
// Postgres they read the change log's primary key, the highest entry and
// at most changePositionWindow entries below it.
func (d Dialect) ChangePosition() string {
	if d != Postgres {
		return `(SELECT COALESCE(max(seq), 0) FROM change_log), -1`
	}
	// 63 is changePositionWindow.
	return `(SELECT COALESCE(max(seq), 0) FROM change_log),
		(SELECT CAST(COALESCE(sum(CAST(1 AS BIGINT) << CAST(m.top - c.seq AS INTEGER)), 0) AS BIGINT)
			FROM (SELECT max(seq) AS top FROM change_log) m JOIN change_log c ON c.seq > m.top - 63)`
}

// Scan returns the destinations of the expressions of
// Dialect.ChangePosition, in their order.
func (p *ChangePosition) Scan() []any { return []any{&p.top, &p.seen} }

// Saw reports whether the read saw the change of sequence seq committed.
// 0 (no sequence) was not seen, nor, on Postgres, a sequence out of the
// read's window.
func (p ChangePosition) Saw(seq int64) bool {
	d := p.top - seq
	switch {
	case seq <= 0 || d < 0:
		return false
	case p.seen == allSeen:
		return true
	}
	return d < changePositionWindow && p.seen>>d&1 == 1
}
