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
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

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
}

// Store reads and writes audit rows.
type Store struct{ db *database.DB }

// NewStore returns a store over db.
func NewStore(db *database.DB) *Store { return &Store{db: db} }

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

// Insert writes entries in one transaction. Entries without an ID or a
// time get one. A row whose ID is already stored is skipped, so replaying
// a batch (from the spool, after an uncertain commit) writes each row once.
func (s *Store) Insert(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for i := range entries {
		e := &entries[i]
		if e.ID == "" {
			e.ID = switchboard.NewID("aud_")
		}
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
	}
	// One prepared statement per batch, executed per row: parsing the
	// statement for every row cost a quarter of the server's CPU under
	// load, and a multi-row INSERT with hundreds of $N parameters is
	// slower still on SQLite (named-parameter lookup).
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit_log
			(id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action, outcome, status, latency_us)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (id) DO NOTHING`)
		if err != nil {
			return fmt.Errorf("preparing audit insert: %w", err)
		}
		defer stmt.Close()
		for i := range entries {
			e := &entries[i]
			if _, err := stmt.ExecContext(ctx, e.ID, e.Time.UTC(), string(e.Tenant), clip(e.Instance), clip(e.Caller), clip(e.Agent),
				clip(e.Actor), clip(e.Subject), clip(e.Tool), clip(e.Action), clip(e.Outcome), e.Status, e.LatencyUs); err != nil {
				return fmt.Errorf("writing audit row: %w", err)
			}
		}
		return nil
	})
}

// Query selects a tenant's rows, newest first.
type Query struct {
	// Limit defaults to 100 and is at most 1000.
	Limit int
	// Before, when set, returns only rows older than it.
	Before time.Time
	// Instance, when set, keeps the rows of that instance slug.
	Instance string
	// User, when set, keeps the rows whose actor or subject is that user.
	User string
}

// List returns a tenant's audit rows, newest first.
func (s *Store) List(ctx context.Context, tenant switchboard.TenantID, q Query) ([]Entry, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 1000 {
		q.Limit = 1000
	}
	before := q.Before
	if before.IsZero() {
		before = time.Now().UTC().Add(time.Hour)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, tenant_id, instance, caller_id, agent_id, actor, subject,
		tool, action, outcome, status, latency_us FROM audit_log
		WHERE tenant_id = $1 AND at < $2 AND ($3 = '' OR instance = $3) AND ($5 = '' OR actor = $5 OR subject = $5)
		ORDER BY at DESC, id DESC LIMIT $4`, string(tenant), before.UTC(), q.Instance, q.Limit, q.User)
	if err != nil {
		return nil, fmt.Errorf("listing audit rows: %w", err)
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var tenantID string
		if err := rows.Scan(&e.ID, &e.Time, &tenantID, &e.Instance, &e.Caller, &e.Agent, &e.Actor, &e.Subject,
			&e.Tool, &e.Action, &e.Outcome, &e.Status, &e.LatencyUs); err != nil {
			return nil, err
		}
		e.Tenant = switchboard.TenantID(tenantID)
		e.Time = e.Time.UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
