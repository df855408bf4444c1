package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// DefaultRetentionDays is how long rows are kept when the operator does
// not say.
const DefaultRetentionDays = 400

// retainBatch is the most rows one DELETE of Retain removes: each batch is
// its own short statement, so that retention never holds locks on many
// rows at once, nor for long.
const retainBatch = 5000

// retentionDays is the operator's retention.
func (s *Store) retentionDays() int {
	if s.RetentionDays > 0 {
		return s.RetentionDays
	}
	return DefaultRetentionDays
}

// RetainStats says what one Retain removed.
type RetainStats struct {
	// PartitionsDropped counts the monthly partitions dropped
	// (PostgreSQL).
	PartitionsDropped int
	// RowsDeleted counts the rows deleted one batch at a time.
	RowsDeleted int64
	// Batches counts the DELETE statements.
	Batches int
}

// Retain deletes the rows older than retention: the operator's
// (RetentionDays), or a tenant's own when shorter (SetTenantRetention),
// and their usage rollup. It is safe to run on every replica at once.
//
// On PostgreSQL the audit log is partitioned by month: Retain first makes
// the partitions of this month and the next (so that rows never land in
// the default partition), then drops every month whose end is past the
// operator's retention, whole (a row is so kept for at most a month more
// than the retention), and deletes the default partition's old rows, and
// a tenant's older than its shorter retention, in batches of retainBatch.
// On SQLite, whose audit log is clustered by (tenant_id, at, id), Retain
// walks the tenants that have rows (those since deleted too), each from
// its oldest row, and deletes each one's rows older than its retention in
// batches of retainBatch (retainSQLite).
func (s *Store) Retain(ctx context.Context, now time.Time) (RetainStats, error) {
	var st RetainStats
	now = now.UTC()
	cutoff := now.AddDate(0, 0, -s.retentionDays())
	short, err := s.shortRetention(ctx)
	if err != nil {
		return st, err
	}
	if s.db.Dialect == database.Postgres {
		if err := s.makePartitions(ctx, now); err != nil {
			return st, err
		}
		n, err := s.dropPartitions(ctx, cutoff)
		st.PartitionsDropped = n
		if err != nil {
			return st, err
		}
		if err := s.deleteBatches(ctx, &st, `DELETE FROM audit_log_default WHERE (tenant_id, at, id) IN
			(SELECT tenant_id, at, id FROM audit_log_default WHERE at < $1 LIMIT $2)`, cutoff); err != nil {
			return st, err
		}
		for t, days := range short {
			if err := s.deleteBatches(ctx, &st, `DELETE FROM audit_log WHERE tenant_id = $1 AND (at, id) IN
				(SELECT at, id FROM audit_log WHERE tenant_id = $1 AND at < $2 ORDER BY at, id LIMIT $3)`, t, now.AddDate(0, 0, -days)); err != nil {
				return st, err
			}
		}
	} else if err := s.retainSQLite(ctx, &st, now, cutoff, short); err != nil {
		return st, err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_usage WHERE day < $1`, cutoff.Format(time.DateOnly)); err != nil {
		return st, fmt.Errorf("audit retention: %w", err)
	}
	for t, days := range short {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_usage WHERE tenant_id = $1 AND day < $2`,
			t, now.AddDate(0, 0, -days).Format(time.DateOnly)); err != nil {
			return st, fmt.Errorf("audit retention: %w", err)
		}
	}
	return st, nil
}

// shortRetention returns the days of the tenants that keep their rows less
// long than the operator, by tenant id.
func (s *Store) shortRetention(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant_id, days FROM audit_retention WHERE days < $1`, s.retentionDays())
	if err != nil {
		return nil, fmt.Errorf("audit retention: %w", err)
	}
	defer rows.Close()
	short := map[string]int{}
	for rows.Next() {
		var (
			id   string
			days int
		)
		if err := rows.Scan(&id, &days); err != nil {
			return nil, fmt.Errorf("audit retention: %w", err)
		}
		short[id] = days
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit retention: %w", err)
	}
	return short, nil
}

// The statements of retainSQLite: the first tenant (from the empty id), the next
// one, each with its oldest row's time; a batch of a tenant's rows older
// than a time.
const (
	retainFirst  = `SELECT tenant_id, at FROM audit_log WHERE tenant_id >= $1 ORDER BY tenant_id, at LIMIT 1`
	retainNext   = `SELECT tenant_id, at FROM audit_log WHERE tenant_id > $1 ORDER BY tenant_id, at LIMIT 1`
	retainDelete = `DELETE FROM audit_log WHERE tenant_id = $1 AND (at, id) IN
		(SELECT at, id FROM audit_log WHERE tenant_id = $1 AND at < $2 ORDER BY at, id LIMIT $3)`
)

// retainSQLite deletes, tenant by tenant in the order of the audit log's
// key (tenant_id, at, id), the rows older than the tenant's retention: its
// own from short, else cutoff. One seek of the key finds the next tenant
// and its oldest row; a tenant whose oldest row is within its retention
// costs no more, and the rows of one that has older ones are deleted in
// batches of retainBatch from the start of its range. Tenants since
// deleted have rows under the operator's retention like any other.
func (s *Store) retainSQLite(ctx context.Context, st *RetainStats, now, cutoff time.Time, short map[string]int) error {
	// Rows of no tenant (the operator's own changes) have tenant_id '',
	// below every other: the walk starts at them.
	next, after := retainFirst, ""
	for {
		var (
			tenant string
			oldest time.Time
		)
		err := s.db.QueryRowContext(ctx, next, after).Scan(&tenant, atColumn{&oldest})
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
		cut := cutoff
		if days, ok := short[tenant]; ok {
			cut = now.AddDate(0, 0, -days)
		}
		if oldest.Before(cut) {
			if err := s.deleteBatches(ctx, st, retainDelete, tenant, unixNano(cut)); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		next, after = retainNext, tenant
	}
}

// deleteBatches runs query, a DELETE of at most its last parameter's rows
// (retainBatch), until it deletes fewer.
func (s *Store) deleteBatches(ctx context.Context, st *RetainStats, query string, args ...any) error {
	args = append(args, retainBatch)
	for {
		res, err := s.db.ExecContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
		st.Batches++
		st.RowsDeleted += n
		if n < retainBatch {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// partitionPrefix names the monthly partitions: audit_log_pYYYYMM.
const partitionPrefix = "audit_log_p"

// monthStart is the first instant of t's month, UTC.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// makePartitions makes the partitions of now's month and the next one
// when they are missing.
func (s *Store) makePartitions(ctx context.Context, now time.Time) error {
	for m := monthStart(now); !m.After(monthStart(now).AddDate(0, 1, 0)); m = m.AddDate(0, 1, 0) {
		// Names and bounds are made here from a time, never from input.
		_, err := s.db.ExecContext(ctx, fmt.Sprintf(
			`CREATE TABLE IF NOT EXISTS %s%s PARTITION OF audit_log FOR VALUES FROM ('%s') TO ('%s')`,
			partitionPrefix, m.Format("200601"), m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339)))
		var exists bool
		if err != nil {
			// Another replica made it meanwhile.
			_ = s.db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, partitionPrefix+m.Format("200601")).Scan(&exists)
		}
		if err != nil && !exists {
			return fmt.Errorf("audit retention: making the partition of %s: %w", m.Format("2006-01"), err)
		}
	}
	return nil
}

// dropPartitions drops the monthly partitions whose whole month is before
// cutoff.
func (s *Store) dropPartitions(ctx context.Context, cutoff time.Time) (int, error) {
	names, err := s.partitions(ctx)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, name := range names {
		m, err := time.Parse("200601", strings.TrimPrefix(name, partitionPrefix))
		if err != nil || !strings.HasPrefix(name, partitionPrefix) {
			continue // not one of ours
		}
		if m.AddDate(0, 1, 0).After(cutoff) {
			continue
		}
		if _, err := s.db.ExecContext(ctx, `DROP TABLE IF EXISTS `+partitionPrefix+m.Format("200601")); err != nil {
			return dropped, fmt.Errorf("audit retention: dropping %s: %w", name, err)
		}
		dropped++
	}
	return dropped, nil
}

// partitions lists the audit log's partitions by name.
func (s *Store) partitions(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("audit retention: listing partitions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("audit retention: listing partitions: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// SetTenantRetention sets how many days a tenant's rows are kept, at most
// the operator's RetentionDays; 0 goes back to the operator's.
func (s *Store) SetTenantRetention(ctx context.Context, tenant switchboard.TenantID, days int) error {
	if days < 0 || days > s.retentionDays() {
		return switchboard.E(switchboard.ErrInvalid, "invalid_retention",
			"days must be between 1 and the operator's retention, %d (0 keeps the operator's)", s.retentionDays())
	}
	if days == 0 {
		_, err := s.db.ExecContext(ctx, `DELETE FROM audit_retention WHERE tenant_id = $1`, string(tenant))
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit_retention (tenant_id, days) VALUES ($1, $2)
		ON CONFLICT (tenant_id) DO UPDATE SET days = excluded.days`, string(tenant), days)
	return err
}

// Retention is how long a tenant's rows are kept.
type Retention struct {
	// Days the tenant's rows are kept: its own, or the operator's.
	Days int `json:"days"`
	// OperatorDays is the operator's retention, the most Days may be.
	OperatorDays int `json:"operator_days"`
	// Own says whether the tenant set Days.
	Own bool `json:"own"`
}

// TenantRetention says how long a tenant's rows are kept.
func (s *Store) TenantRetention(ctx context.Context, tenant switchboard.TenantID) (Retention, error) {
	r := Retention{Days: s.retentionDays(), OperatorDays: s.retentionDays()}
	var days int
	err := s.db.QueryRowContext(ctx, `SELECT days FROM audit_retention WHERE tenant_id = $1`, string(tenant)).Scan(&days)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, nil
	case err != nil:
		return r, fmt.Errorf("reading audit retention: %w", err)
	}
	r.Days, r.Own = min(days, r.Days), true
	return r, nil
}
