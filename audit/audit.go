// Package audit records one row per agent call — time, tenant, instance,
// caller, agent, actor and subject user, tool, action, outcome and latency;
// never arguments, never secrets — and lists a tenant's rows.
//
// Rows are written by a Writer, asynchronously and in batches, so that the
// tools/call path costs no database round trip. No row of a call that may
// have reached an upstream is lost: what the store does not take is kept
// in memory, then in an on-disk Spool, and written when the store is back
// (also after a restart); Close writes or spools everything. When the
// backlog is full the Writer refuses new calls, or, if so configured,
// drops the oldest rows, loudly.
package audit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// Entry is one audited call.
type Entry struct {
	ID     string               `json:"id"`
	Time   time.Time            `json:"time"`
	Tenant switchboard.TenantID `json:"tenant_id"`
	// Instance is the app instance's slug.
	Instance string `json:"instance"`
	Caller   string `json:"caller"`
	Agent    string `json:"agent"`
	// Actor is the user the caller's credential stands for; Subject the
	// user whose credentials the call was made with. They differ when a
	// trusted caller acts for a targetUserId.
	Actor   string `json:"actor"`
	Subject string `json:"subject"`
	Tool    string `json:"tool"`
	Action  string `json:"action"`
	// Outcome is "ok" or the error code the caller got.
	Outcome string `json:"outcome"`
	// Status is the upstream HTTP status, 0 when the upstream was not
	// reached.
	Status    int   `json:"status"`
	LatencyUs int64 `json:"latency_us"`
	// jseg is the journal segment holding the row, until the row is in
	// the store or the spool (Journal.Release).
	jseg *jsegment
}

// Store reads and writes audit rows.
type Store struct {
	db *database.DB
	// RetentionDays is how long the operator keeps rows (Retain), and the
	// most a tenant may keep them (SetTenantRetention); 0 is
	// DefaultRetentionDays.
	RetentionDays int

	// inserts are the SQLite INSERTs of 1, 2, 4 ... sqliteRows rows of
	// each kind (sqlitePlain, sqliteReturning, sqliteSame: see
	// insertSQLite), prepared on first use and kept (database/sql keeps
	// each prepared on every connection that ran it), so a batch compiles
	// none; usage is the SQLite upsert of the usage rollup, kept likewise.
	insertsMu sync.Mutex
	inserts   [sqliteKinds][sqliteSizes]*sql.Stmt
	usage     *sql.Stmt
}

// NewStore returns a store over db.
func NewStore(db *database.DB) *Store { return &Store{db: db} }

// Sync makes every row committed so far durable: a power loss or kernel
// crash after it returns keeps them. The audit journal and spool delete
// their copy of rows only after it, since on SQLite (WAL,
// synchronous=NORMAL) a commit reaches the disk only when a checkpoint
// syncs the WAL. A FULL checkpoint is used: it waits for readers of older
// snapshots (up to a second here) and syncs the WAL before copying it back,
// where a PASSIVE one may copy, and sync, nothing while such a reader
// lasts; frames a previous checkpoint copied back were synced by it. A
// checkpoint that did not complete is an error. On PostgreSQL a commit is
// durable when it returns (synchronous_commit stays on: the store never
// changes it), so Sync does nothing there.
func (s *Store) Sync(ctx context.Context) error {
	if s.db.Dialect != database.SQLite {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("syncing the audit store: %w", err)
	}
	defer conn.Close()
	// The checkpoint holds the write lock while it waits for readers:
	// other writers wait at most a second, not the connection's timeout.
	var timeout int
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return fmt.Errorf("syncing the audit store: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 1000`); err != nil {
		return fmt.Errorf("syncing the audit store: %w", err)
	}
	var busy, frames, copied int
	err = conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(FULL)`).Scan(&busy, &frames, &copied)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA busy_timeout = %d`, timeout)); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("syncing the audit store: %w", err)
	}
	if busy != 0 || copied < frames {
		return fmt.Errorf("syncing the audit store: the checkpoint was blocked (%d of %d WAL frames copied)", copied, frames)
	}
	return nil
}

// maxField bounds every text column.
const maxField = 200

// clip makes s storable on both backends: a NUL byte (which the store
// refuses, PostgreSQL cannot hold it) and invalid UTF-8 become U+FFFD, and
// the result is cut to maxField bytes on a rune boundary. Audit values come
// from callers (agent ids, user ids, actions), and a row must still be
// written when they hold such bytes.
func clip(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// boundTexts cuts the texts longer than the store keeps (clip) before
// the row is journaled: a caller-supplied value of any length (an agent
// ID, a tool name) would otherwise make a journal record longer than a
// restart reads back (maxRecord), and the rows after it would be set
// aside with it. Shorter texts are left as they are, for the store's
// clip, without a scan here.
func (e *Entry) boundTexts() {
	for _, s := range [...]*string{&e.Instance, &e.Caller, &e.Agent, &e.Actor, &e.Subject, &e.Tool, &e.Action, &e.Outcome} {
		if len(*s) > maxField {
			*s = clip(*s)
		}
	}
}

// Insert writes entries in one transaction. Entries without an ID or a
// time get one. A row whose ID is already stored is skipped, so replaying
// a batch (from the spool, after an uncertain commit) writes each row once
// (the stores compare the key the row was stored under, its tenant, time
// and ID: a replayed row has all three of its first write).
//
// Rows go in as few statements as possible, since the statement count,
// not the row count, was most of the audit's cost under load (a quarter
// of the server's CPU, per-row statements): on PostgreSQL one INSERT
// ... SELECT FROM unnest() of one array per column, whatever the batch
// size; on SQLite multi-row INSERTs of sqliteRows rows with positional
// parameters.
func (s *Store) Insert(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for i := range entries {
		e := &entries[i]
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
		if e.ID == "" {
			e.ID = NewID(e.Time)
		}
	}
	if s.db.Dialect == database.Postgres {
		// COPY first: it has no ON CONFLICT, and needs none but on a
		// replay. A batch holding a row stored already fails on the
		// primary key, is rolled back whole (its usage counts too), and
		// is written again by the INSERT that skips the stored rows.
		err := s.db.PgxConn(ctx, func(c *pgx.Conn) error { return copyPostgres(ctx, c, entries) })
		if !database.IsUniqueViolation(err) {
			return err
		}
		return s.db.InTx(ctx, func(tx *sql.Tx) error { return insertPostgres(ctx, tx, entries) })
	}
	// The statements are prepared before the transaction takes its
	// connection: preparing on the pool needs one of its own. A batch
	// holding rows stored already (a replay) is written again with the
	// statements that say which rows they took.
	texts := make([][sqliteShared]string, len(entries))
	for i := range entries {
		e := &entries[i]
		texts[i] = [sqliteShared]string{string(e.Tenant), clip(e.Instance), clip(e.Caller), clip(e.Agent),
			clip(e.Actor), clip(e.Subject), clip(e.Tool), clip(e.Action), clip(e.Outcome)}
	}
	for _, returning := range []bool{false, true} {
		plan := planSQLite(texts, returning)
		stmts, usage, err := s.sqliteInserts(ctx, plan.need)
		if err != nil {
			return err
		}
		err = s.db.InTx(ctx, func(tx *sql.Tx) error { return insertSQLite(ctx, tx, stmts, usage, entries, texts, plan) })
		if !errors.Is(err, errReplayed) {
			return err
		}
	}
	return errReplayed // not reached: with RETURNING, nothing is errReplayed
}

const insertColumns = `INSERT INTO audit_log
	(id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action, outcome, status, latency_us)`

// copyColumns are audit_log's columns in the order of copyRows' values.
var copyColumns = []string{"id", "at", "tenant_id", "instance", "caller_id", "agent_id", "actor", "subject",
	"tool", "action", "outcome", "status", "latency_us"}

// copyPostgres writes entries in one transaction with COPY (binary), and
// their counts into the usage rollup with one more statement. COPY costs
// the backend less per row than the INSERT ... SELECT FROM unnest() of
// insertPostgres: no function scan materialising the arrays, no RETURNING
// for the rollup, and rows go to the heap in multi-row inserts (one WAL
// record per page, not per row). A row whose key is stored fails the
// COPY, and with it the whole transaction.
func copyPostgres(ctx context.Context, c *pgx.Conn, entries []Entry) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	rows := copyRows{entries: entries, i: -1, usage: map[usageKey]int64{}}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_log"}, copyColumns, &rows); err != nil {
		return fmt.Errorf("writing audit rows: %w", err)
	}
	if len(rows.usage) > 0 {
		n := len(rows.usage)
		tenants, days, instances, agents, outcomes, calls := make([]string, 0, n), make([]string, 0, n),
			make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]int64, 0, n)
		for k, v := range rows.usage {
			tenants, days, instances = append(tenants, k.tenant), append(days, k.day), append(instances, k.instance)
			agents, outcomes, calls = append(agents, k.agent), append(outcomes, k.outcome), append(calls, v)
		}
		if _, err := tx.Exec(ctx, postgresUsage, tenants, days, instances, agents, outcomes, calls); err != nil {
			return fmt.Errorf("counting audit usage: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// postgresUsage adds a batch's counts to the usage rollup, in key order
// (sorted by the database, as postgresReplay's rollup is) so that two
// writers lock the rollup's rows in the same order.
const postgresUsage = `INSERT INTO audit_usage (tenant_id, day, instance, agent_id, outcome, calls)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
	ORDER BY 1, 2, 3, 4, 5
	ON CONFLICT (tenant_id, day, instance, agent_id, outcome) DO UPDATE SET calls = audit_usage.calls + excluded.calls`

// copyRows is a batch as pgx.CopyFromSource: the values of one row at a
// time, with the texts clipped as the INSERT's are, counting each row
// that is not a change into usage as it goes.
type copyRows struct {
	entries []Entry
	i       int
	values  [13]any
	usage   map[usageKey]int64
	days    dayCache
}

func (r *copyRows) Next() bool {
	r.i++
	return r.i < len(r.entries)
}

func (r *copyRows) Values() ([]any, error) {
	e := &r.entries[r.i]
	instance, caller, agent, tool, outcome := clip(e.Instance), clip(e.Caller), clip(e.Agent), clip(e.Tool), clip(e.Outcome)
	// pgx encodes the values before it asks for the next row's: the
	// array is reused.
	r.values = [13]any{e.ID, e.Time.UTC(), string(e.Tenant), instance, caller, agent, clip(e.Actor), clip(e.Subject),
		tool, clip(e.Action), outcome, int32(e.Status), e.LatencyUs}
	if !isChange(e) {
		r.usage[usageKey{string(e.Tenant), r.days.format(e.Time), instance, agent, outcome}]++
	}
	return r.values[:], nil
}

func (r *copyRows) Err() error { return nil }

// insertPostgres writes entries with one statement: one array parameter
// per column, unnested into rows, skipping those whose key is stored
// already (a replay).
func insertPostgres(ctx context.Context, tx *sql.Tx, entries []Entry) error {
	n := len(entries)
	var (
		ids, tenants, instances, callers, agents, actors, subjects, tools, actions, outcomes = make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ats       = make([]time.Time, n)
		statuses  = make([]int32, n)
		latencies = make([]int64, n)
	)
	for i := range entries {
		e := &entries[i]
		ids[i], ats[i], tenants[i] = e.ID, e.Time.UTC(), string(e.Tenant)
		instances[i], callers[i], agents[i] = clip(e.Instance), clip(e.Caller), clip(e.Agent)
		actors[i], subjects[i], tools[i] = clip(e.Actor), clip(e.Subject), clip(e.Tool)
		actions[i], outcomes[i], statuses[i], latencies[i] = clip(e.Action), clip(e.Outcome), int32(e.Status), e.LatencyUs
	}
	// The rows the INSERT took (not the replayed ones it skipped) are
	// counted into the usage rollup by the same statement, in key order
	// so that two writers lock the rollup's rows in the same order.
	_, err := tx.ExecContext(ctx, postgresReplay,
		ids, ats, tenants, instances, callers, agents, actors, subjects, tools, actions, outcomes, statuses, latencies)
	if err != nil {
		return fmt.Errorf("writing audit rows: %w", err)
	}
	return nil
}

// postgresReplay is the PostgreSQL statement of a replayed batch: ON
// CONFLICT makes PostgreSQL insert every row speculatively (check,
// insert, confirm), which costs the backend more than COPY's unique
// check, so only a batch that COPY could not write takes it.
const postgresReplay = `WITH ins AS (` + insertColumns + `
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::bigint[])
		ON CONFLICT (tenant_id, at, id) DO NOTHING
		RETURNING tenant_id, at, instance, agent_id, outcome, tool, caller_id)
	INSERT INTO audit_usage (tenant_id, day, instance, agent_id, outcome, calls)
		SELECT tenant_id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), instance, agent_id, outcome, count(*)
		FROM ins WHERE NOT ` + changeRow + `
		GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
	ON CONFLICT (tenant_id, day, instance, agent_id, outcome) DO UPDATE SET calls = audit_usage.calls + excluded.calls`

// sqliteRows is the most rows of one SQLite INSERT: 13 parameters each,
// far below SQLite's bound on parameters. It is a power of two:
// sqliteSizes statements (1, 2, 4 ... sqliteRows rows) write any batch.
const (
	sqliteRows  = 64
	sqliteSizes = 7
	// sqliteShared is the number of text columns bound once per
	// statement when they repeat the first row's (sqliteInsert).
	sqliteShared = 9
	// sqliteMinSame is the fewest rows with the same texts that take
	// INSERTs of their own (sqliteSame, planSQLite): fewer go with the
	// batch's other rows, so that a batch of many small groups is not
	// written in as many small statements.
	sqliteMinSame = 8
)

// The kinds of SQLite INSERT (sqliteInsert).
const (
	// sqlitePlain rows bind every column, NULL for a text equal to the
	// statement's first row's.
	sqlitePlain = iota
	// sqliteReturning is sqlitePlain returning the ids it took (a replay).
	sqliteReturning
	// sqliteSame rows, after the first, bind only their id, time, status
	// and latency: every row of the statement has the first row's texts.
	sqliteSame
	sqliteKinds
)

// sqlitePlan is the INSERTs of a batch: chunks of order (indexes into the
// batch), each written by one statement of its kind and size.
type sqlitePlan struct {
	order  []int
	chunks []sqliteChunk
	// need has bit k of need[kind] set when the plan uses the statement
	// of that kind with 1<<k rows.
	need [sqliteKinds]uint
}

type sqliteChunk struct {
	start, size int
	kind        int
}

// planSQLite orders a batch's rows, texts[i] being row i's text columns,
// into INSERTs. Without returning, rows with the same texts (the calls of
// one agent to one tool: most of a batch under load) go, sqliteMinSame or
// more at a time, into sqliteSame statements, which bind four parameters
// a row instead of thirteen: the driver makes several calls into SQLite
// per parameter (its name, the bind, a NULL included), and database/sql
// checks each, which was about a sixth of the insert's CPU. The other
// rows, in the batch's order, go into sqlitePlain statements of
// sqliteRows rows, then of the powers of two below (a batch of any size
// takes a few statement sizes, each compiled once per store). With
// returning (a replay), every row goes into sqliteReturning statements.
// The order of rows across statements does not matter: each row is its
// own key, and one transaction writes them all.
func planSQLite(texts [][sqliteShared]string, returning bool) sqlitePlan {
	p := sqlitePlan{order: make([]int, 0, len(texts))}
	add := func(kind int, rows []int) {
		for len(rows) > 0 {
			size := sqliteRows
			for size > len(rows) {
				size >>= 1
			}
			p.chunks = append(p.chunks, sqliteChunk{start: len(p.order), size: size, kind: kind})
			p.need[kind] |= uint(size)
			p.order = append(p.order, rows[:size]...)
			rows = rows[size:]
		}
	}
	if returning {
		all := make([]int, len(texts))
		for i := range all {
			all[i] = i
		}
		add(sqliteReturning, all)
		return p
	}
	// Groups of rows with the same texts, in the order of their first
	// rows; consecutive rows are compared before the map is asked.
	var groups [][]int
	index := map[[sqliteShared]string]int{}
	last := -1
	for i := range texts {
		if last < 0 || texts[i] != texts[groups[last][0]] {
			g, ok := index[texts[i]]
			if !ok {
				g = len(groups)
				index[texts[i]] = g
				groups = append(groups, nil)
			}
			last = g
		}
		groups[last] = append(groups[last], i)
	}
	// A group's rows beyond its largest multiple of sqliteMinSame (a power
	// of two) go with the rest: its statements are then of 64, 32, 16
	// and 8 rows, none smaller.
	var rest []int
	for _, g := range groups {
		n := len(g) &^ (sqliteMinSame - 1)
		add(sqliteSame, g[:n])
		rest = append(rest, g[n:]...)
	}
	slices.Sort(rest)
	add(sqlitePlain, rest)
	return p
}

// sqliteInserts returns the prepared INSERTs of each kind and of 1, 2, 4
// ... sqliteRows rows, need[kind] having bit k set for each one a batch
// needs (the others may be nil), preparing those not prepared yet, and
// the usage rollup's upsert. Statements of other sizes would each be
// compiled for one use (a statement of 64 rows is about 300 µs to
// compile, 1.4 % of the server's CPU under load on SQLite, bench/overhead
// -server-profile).
func (s *Store) sqliteInserts(ctx context.Context, need [sqliteKinds]uint) (*[sqliteKinds][sqliteSizes]*sql.Stmt, *sql.Stmt, error) {
	s.insertsMu.Lock()
	defer s.insertsMu.Unlock()
	if s.usage == nil {
		st, err := s.db.PrepareContext(ctx, sqliteUsage)
		if err != nil {
			return nil, nil, fmt.Errorf("preparing audit usage upsert: %w", err)
		}
		s.usage = st
	}
	for kind := range sqliteKinds {
		for k := range sqliteSizes {
			if need[kind]&(1<<k) == 0 || s.inserts[kind][k] != nil {
				continue
			}
			st, err := s.db.PrepareContext(ctx, sqliteInsert(1<<k, kind))
			if err != nil {
				return nil, nil, fmt.Errorf("preparing audit insert: %w", err)
			}
			s.inserts[kind][k] = st
		}
	}
	stmts := s.inserts
	return &stmts, s.usage, nil
}

// errReplayed says that an INSERT without RETURNING skipped rows stored
// already: the batch is rolled back and written again with RETURNING.
var errReplayed = errors.New("audit batch holds stored rows")

// insertSQLite writes entries, texts[i] being entry i's text columns, in
// the INSERTs of plan (planSQLite), with stmts and usage (from
// sqliteInserts) run in tx, and counts the rows they took into the usage
// rollup.
//
// Without RETURNING, a statement that took all its rows took every one
// (nearly every batch); one that took fewer fails the batch with
// errReplayed, for Insert to write it again with sqliteReturning
// statements, which return the ids they took. RETURNING costs SQLite a
// temporary table of the rows and database/sql a scan per row.
func insertSQLite(ctx context.Context, tx *sql.Tx, stmts *[sqliteKinds][sqliteSizes]*sql.Stmt, usageStmt *sql.Stmt,
	entries []Entry, texts [][sqliteShared]string, plan sqlitePlan) error {
	args := make([]any, 0, 13*min(len(entries), sqliteRows))
	taken := make(map[string]bool, len(entries))
	usage := map[usageKey]int64{}
	// The rows of a batch repeat their tenants, instances, agents, tools
	// and outcomes: each distinct value is put in an interface once per
	// batch, not once per row (a third of the rows' allocations).
	boxes := map[string]any{}
	box := func(s string) any {
		v, ok := boxes[s]
		if !ok {
			v = s
			boxes[s] = v
		}
		return v
	}
	var days dayCache
	count := func(i int) {
		if e := &entries[i]; !isChange(e) {
			t := &texts[i]
			usage[usageKey{t[0], days.format(e.Time), t[1], t[3], t[8]}]++
		}
	}
	for _, c := range plan.chunks {
		chunk := plan.order[c.start : c.start+c.size]
		args = args[:0]
		var first [sqliteShared]string
		for i, j := range chunk {
			e := &entries[j]
			args = append(args, e.ID, unixNano(e.Time))
			for k, t := range texts[j] {
				// In a sqliteSame statement the rows after the first
				// bind no text; in the others a value equal to the
				// chunk's first row's is bound as NULL: the statement
				// takes the first row's (see sqliteInsert).
				switch {
				case i == 0:
					first[k] = t
					args = append(args, box(t))
				case c.kind == sqliteSame:
				case t == first[k]:
					args = append(args, nil)
				default:
					args = append(args, box(t))
				}
			}
			args = append(args, int64(e.Status), e.LatencyUs)
		}
		st := tx.StmtContext(ctx, stmts[c.kind][bits.TrailingZeros(uint(c.size))])
		if c.kind != sqliteReturning {
			res, err := st.ExecContext(ctx, args...)
			st.Close()
			if err != nil {
				return fmt.Errorf("writing audit rows: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(c.size) {
				return errReplayed
			}
			for _, j := range chunk {
				count(j)
			}
			continue
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			st.Close()
			return fmt.Errorf("writing audit rows: %w", err)
		}
		// The ids the INSERT took, not the replayed ones it skipped, are
		// counted into the usage rollup.
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				st.Close()
				return fmt.Errorf("writing audit rows: %w", err)
			}
			taken[id] = true
		}
		rows.Close()
		st.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("writing audit rows: %w", err)
		}
		for _, j := range chunk {
			if taken[entries[j].ID] {
				count(j)
			}
		}
	}
	return addUsageSQLite(ctx, tx.StmtContext(ctx, usageStmt), usage)
}

// dayCache formats UTC days (time.DateOnly), the last one remembered:
// a batch's rows are mostly of one day.
type dayCache struct {
	y    int
	yd   int
	text string
}

func (c *dayCache) format(t time.Time) string {
	t = t.UTC()
	if y, yd := t.Year(), t.YearDay(); c.text == "" || y != c.y || yd != c.yd {
		c.y, c.yd, c.text = y, yd, t.Format(time.DateOnly)
	}
	return c.text
}

// usageKey is one row of the usage rollup.
type usageKey struct{ tenant, day, instance, agent, outcome string }

// isChange reports whether e is a change row (changeRow), which the usage
// rollup does not count.
func isChange(e *Entry) bool {
	return (e.Tool == "members" || e.Tool == "admin") && e.Caller == ""
}

// sqliteUsage adds a count to the usage rollup (OR FAIL: see
// sqliteInsert).
const sqliteUsage = `INSERT OR FAIL INTO audit_usage (tenant_id, day, instance, agent_id, outcome, calls)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (tenant_id, day, instance, agent_id, outcome) DO UPDATE SET calls = calls + excluded.calls`

// addUsageSQLite adds counts to the usage rollup with st, sqliteUsage in
// the batch's transaction.
func addUsageSQLite(ctx context.Context, st *sql.Stmt, usage map[usageKey]int64) error {
	defer st.Close()
	for k, n := range usage {
		if _, err := st.ExecContext(ctx, k.tenant, k.day, k.instance, k.agent, k.outcome, n); err != nil {
			return fmt.Errorf("counting audit usage: %w", err)
		}
	}
	return nil
}

// sqliteInsert is the INSERT of n rows of kind (sqlitePlain,
// sqliteReturning, sqliteSame) with positional parameters.
//
// It is INSERT OR FAIL: a statement that may abort (ABORT, SQLite's
// default for a NOT NULL violation) makes SQLite keep a statement journal
// of every page it changes, so that the statement alone can be undone
// inside the batch's transaction; the journal outgrew its 64 KiB in
// memory and was written to a temporary file, about a fifth of the
// insert's CPU. FAIL stops at the violation without undoing the
// statement's earlier rows, and needs no journal: the error still fails
// the batch, and its whole transaction is rolled back (database.InTx),
// so a batch is still written entirely or not at all. A row whose key is
// stored already is skipped (a replay), as before.
//
// The text columns from tenant_id to outcome (sqliteShared of them) repeat
// from row to row in a batch: in every row after the first, such a column
// is coalesce(?, ?k), ?k being the first row's parameter of that column,
// and insertSQLite binds NULL for a value equal to the first row's. The
// driver copies every text argument into a C buffer it allocates, binds,
// unbinds and frees (four calls into SQLite's allocator and mutexes per
// value, for every text of every row), where a NULL is one call. The
// columns are NOT NULL, so a NULL bound always means the first row's
// value. The first row's parameters are numbered before any ?k refers to
// them, so the bare parameters keep their positions (SQLite numbers a
// bare ? one above the largest number so far). In a sqliteSame statement
// those columns are ?k alone, and a row after the first has four
// parameters: its id, time, status and latency.
//
// sqliteReturning returns the ids of the rows it took.
func sqliteInsert(n int, kind int) string {
	var b strings.Builder
	b.WriteString(strings.Replace(insertColumns, "INSERT INTO", "INSERT OR FAIL INTO", 1))
	b.WriteString(" VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == 0 {
			b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?)")
			continue
		}
		b.WriteString("(?,?")
		for k := range sqliteShared {
			// The first row's parameter of shared column k is ?(3+k).
			if kind == sqliteSame {
				b.WriteString(",?" + strconv.Itoa(3+k))
			} else {
				b.WriteString(",coalesce(?,?" + strconv.Itoa(3+k) + ")")
			}
		}
		b.WriteString(",?,?)")
	}
	b.WriteString(" ON CONFLICT (tenant_id, at, id) DO NOTHING")
	if kind == sqliteReturning {
		b.WriteString(" RETURNING id")
	}
	return b.String()
}

// On SQLite the audit log's time is an integer, nanoseconds since the Unix
// epoch (migration 0029: the time is in the key and every index, and its
// text was a quarter of each entry); on PostgreSQL a timestamptz.
// unixNano is that integer, clamped to the range an int64 of nanoseconds
// holds (1678 to 2262), so that a bound outside it still compares as the
// time it stands for (before or after every stored row).
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minUnixNano):
		return math.MinInt64
	case t.After(maxUnixNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// atArg is the parameter of a time compared with the audit log's at on
// dialect's store (see unixNano).
func atArg(dialect database.Dialect, t time.Time) any {
	if dialect == database.SQLite {
		return unixNano(t)
	}
	return t.UTC()
}

// atColumn scans the audit log's at into a UTC time: nanoseconds since the
// Unix epoch on SQLite, a time on PostgreSQL (and in SQLite's text from
// before migration 0029, which the driver parses).
type atColumn struct{ t *time.Time }

func (c atColumn) Scan(v any) error {
	switch v := v.(type) {
	case int64:
		*c.t = time.Unix(0, v).UTC()
	case time.Time:
		*c.t = v.UTC()
	default:
		return fmt.Errorf("audit time of type %T", v)
	}
	return nil
}

// NewID returns the ID of an audit row made at t: "aud_", the time in
// fixed-width hex microseconds, then 64 random bits. Time-ordered IDs go
// to the end of the primary key's index instead of a random page of it
// (random IDs made each insert touch a cold page), and the random part
// keeps two rows of one microsecond, or of two replicas, apart.
func NewID(t time.Time) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	var us [16]byte
	hexTime := strconv.AppendUint(us[:0], uint64(t.UnixMicro()), 16)
	var buf [4 + 14 + 16]byte // built on the stack: one allocation, the string
	id := append(buf[:0], "aud_"...)
	id = append(id, "00000000000000"[min(len(hexTime), 14):]...)
	id = append(id, hexTime...)
	return string(hex.AppendEncode(id, b[:]))
}

// Query selects a tenant's rows, newest first. Every filter left empty
// keeps every row.
type Query struct {
	// Limit defaults to 100 and is at most MaxLimit.
	Limit int
	// Cursor continues a listing: a Page's Older or Newer cursor, opaque
	// to the client. It holds the (time, id) of the row it continues
	// from, so rows that share a time are neither skipped nor repeated.
	Cursor string
	// Before, when set, returns only rows older than it (the API's former
	// cursor, still accepted; it skips the rows that share the time of the
	// page's last row, so prefer Cursor).
	Before time.Time
	// From and To, when set, keep the rows at or after From and before To.
	From, To time.Time
	// Instance, when set, keeps the rows of that instance slug.
	Instance string
	// Agent, when set, keeps the rows of that agent id.
	Agent string
	// User, when set, keeps the rows whose actor or subject is that user:
	// how members are shown their own rows only.
	User string
	// Outcome, when set, keeps the rows with that outcome ("ok" or an
	// error code); OutcomeFailed keeps every row whose outcome is not ok.
	Outcome string
	// Kind, when set, keeps agent calls (KindCalls) or changes made by
	// people (KindChanges).
	Kind string
}

// Kinds of row. Changes are the rows the server records for what people
// and keys change (members, sessions, API keys, connect links, grants:
// tool "members" or "admin", no caller); every other row is an agent
// call, refused ones included.
const (
	KindCalls   = "calls"
	KindChanges = "changes"
)

// changeRow is the SQL condition of a change row.
const changeRow = "(tool IN ('members', 'admin') AND caller_id = '')"

// OutcomeFailed is the Outcome filter of every failed call.
const OutcomeFailed = "!ok"

// MaxLimit bounds a page.
const MaxLimit = 1000

// Page is one page of a listing, newest first, and the cursors of the
// pages around it.
type Page struct {
	Entries []Entry `json:"entries"`
	// Older continues with the rows older than the page's last one; empty
	// when there are none.
	Older string `json:"next_cursor,omitempty"`
	// Newer goes back to the rows newer than the page's first one; empty
	// when there are none (or, on the first page, not looked for).
	Newer string `json:"prev_cursor,omitempty"`
}

var errCursor = switchboard.E(switchboard.ErrInvalid, "invalid_cursor",
	"cursor is not one this server gave out: start again from the first page")

// cursor is a position in a listing: the (time, id) of a row, and which
// way to go from it. Encoded as base64url("o|<RFC 3339 time>|<id>") (or
// "n|" for newer): opaque to clients, who only pass it back.
type cursor struct {
	newer bool
	at    time.Time
	id    string
}

func (c cursor) String() string {
	dir := "o"
	if c.newer {
		dir = "n"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(dir + "|" + c.at.UTC().Format(time.RFC3339Nano) + "|" + c.id))
}

func parseCursor(s string) (cursor, error) {
	if len(s) > 4*maxField {
		return cursor{}, errCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, errCursor
	}
	parts := strings.SplitN(string(b), "|", 3)
	if len(parts) != 3 || (parts[0] != "o" && parts[0] != "n") || parts[2] == "" || len(parts[2]) > maxField {
		return cursor{}, errCursor
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return cursor{}, errCursor
	}
	return cursor{newer: parts[0] == "n", at: at.UTC(), id: parts[2]}, nil
}

// List returns a tenant's audit rows, newest first: the entries of
// Page.
func (s *Store) List(ctx context.Context, tenant switchboard.TenantID, q Query) ([]Entry, error) {
	p, err := s.Page(ctx, tenant, q)
	return p.Entries, err
}

// Page returns one page of a tenant's audit rows, newest first, with the
// cursors of the older and newer pages. Paging is keyset-based on
// (time, id), the order of the index it reads, so a walk through every
// page returns every row exactly once even when many rows share a time
// (and rows written meanwhile do not shift the pages). A cursor that is
// not one Page made fails with invalid_cursor.
func (s *Store) Page(ctx context.Context, tenant switchboard.TenantID, q Query) (Page, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > MaxLimit {
		q.Limit = MaxLimit
	}
	var cur *cursor
	if q.Cursor != "" {
		c, err := parseCursor(q.Cursor)
		if err != nil {
			return Page{Entries: []Entry{}}, err
		}
		cur = &c
	}
	query, args := pageQuery(s.db.Dialect, tenant, q, cur)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return Page{Entries: []Entry{}}, fmt.Errorf("listing audit rows: %w", err)
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var tenantID string
		if err := rows.Scan(&e.ID, atColumn{&e.Time}, &tenantID, &e.Instance, &e.Caller, &e.Agent, &e.Actor, &e.Subject,
			&e.Tool, &e.Action, &e.Outcome, &e.Status, &e.LatencyUs); err != nil {
			return Page{Entries: []Entry{}}, fmt.Errorf("listing audit rows: %w", err)
		}
		e.Tenant = switchboard.TenantID(tenantID)
		e.Time = e.Time.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return Page{Entries: []Entry{}}, fmt.Errorf("listing audit rows: %w", err)
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	if cur != nil && cur.newer {
		slices.Reverse(out)
	}
	p := Page{Entries: out}
	if len(out) == 0 {
		return p, nil
	}
	first, last := out[0], out[len(out)-1]
	// Going older, there are newer rows (the cursor's own, at least), and
	// older ones when the query found more; going newer, the reverse.
	switch {
	case cur == nil:
		if more {
			p.Older = cursor{at: last.Time, id: last.ID}.String()
		}
	case !cur.newer:
		p.Newer = cursor{newer: true, at: first.Time, id: first.ID}.String()
		if more {
			p.Older = cursor{at: last.Time, id: last.ID}.String()
		}
	default:
		p.Older = cursor{at: last.Time, id: last.ID}.String()
		if more {
			p.Newer = cursor{newer: true, at: first.Time, id: first.ID}.String()
		}
	}
	return p, nil
}

// pageQuery is the SQL of one page of tenant's rows for q, continuing from
// cur when it is not nil, and its arguments, for the dialect's store. The
// page holds one row more than q.Limit: it says whether there is a page
// beyond.
//
// On SQLite the audit log is clustered by (tenant_id, at, id) (migration
// 0028): the table is the tenant's listing, in order, and SQLite, which
// keeps no statistics here, prefers it to any index that would need a
// lookup of the row, even when a filter has its own index. A filter by
// agent or instance therefore names its index (INDEXED BY), so that a
// page of a rare agent reads that agent's rows only; a filter by user
// reads the actor's index and the subject's (which holds only the rows
// whose subject is not their actor) and merges them.
func pageQuery(dialect database.Dialect, tenant switchboard.TenantID, q Query, cur *cursor) (string, []any) {
	var (
		where = []string{"tenant_id = $1"}
		args  = []any{string(tenant)}
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, f := range []struct{ col, v string }{{"instance", q.Instance}, {"agent_id", q.Agent}} {
		if f.v != "" {
			where = append(where, f.col+" = "+arg(f.v))
		}
	}
	user := ""
	if q.User != "" {
		user = arg(q.User)
	}
	switch q.Outcome {
	case "":
	case OutcomeFailed:
		where = append(where, "outcome <> 'ok'")
	default:
		where = append(where, "outcome = "+arg(q.Outcome))
	}
	switch q.Kind {
	case KindCalls:
		where = append(where, "NOT "+changeRow)
	case KindChanges:
		where = append(where, changeRow)
	}
	if !q.From.IsZero() {
		where = append(where, "at >= "+arg(atArg(dialect, q.From)))
	}
	if !q.Before.IsZero() && (q.To.IsZero() || q.Before.Before(q.To)) {
		q.To = q.Before
	}
	if !q.To.IsZero() {
		where = append(where, "at < "+arg(atArg(dialect, q.To)))
	}
	// Rows are ordered by (at, id), newest first; a cursor continues from
	// its row in either direction. The row-value comparison is what both
	// stores match to the (tenant_id[, instance], at, id) indexes.
	order := "at DESC, id DESC"
	if cur != nil {
		op := "<"
		if cur.newer {
			op, order = ">", "at ASC, id ASC"
		}
		where = append(where, "(at, id) "+op+" ("+arg(atArg(dialect, cur.at))+", "+arg(cur.id)+")")
	}
	limit := arg(q.Limit + 1)
	const sel = `SELECT id, at, tenant_id, instance, caller_id, agent_id, actor, subject,
		tool, action, outcome, status, latency_us FROM audit_log`
	from, actorIndex, subjectIndex := "", "", ""
	if dialect == database.SQLite {
		actorIndex, subjectIndex = " INDEXED BY audit_log_tenant_actor_at", " INDEXED BY audit_log_tenant_subject_at"
	}
	switch {
	case user != "":
		// A user's rows are those they acted in plus those made with
		// their credentials by someone else (subject <> actor, the only
		// rows the subject index holds, on both stores: migrations
		// sqlite/0028, postgres/0031), two disjoint ranges that the
		// store merges in order.
		return sel + actorIndex + `
		WHERE ` + strings.Join(append(where, "actor = "+user), " AND ") + `
		UNION ALL ` + sel + subjectIndex + `
		WHERE ` + strings.Join(append(where, "subject = "+user, "subject <> actor"), " AND ") + `
		ORDER BY ` + order + ` LIMIT ` + limit, args
	case dialect != database.SQLite:
	case q.Agent != "":
		from = " INDEXED BY audit_log_tenant_agent_at"
	case q.Instance != "":
		from = " INDEXED BY audit_log_tenant_instance_at"
	}
	return sel + from + `
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY ` + order + ` LIMIT ` + limit, args
}
