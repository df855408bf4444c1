// Package migrations holds the SQL schema of both storage backends as
// numbered, embedded files (postgres/NNNN_name.sql, sqlite/NNNN_name.sql) and
// applies them in order, each in its own transaction, recording what ran in
// schema_migrations.
//
// The two directories hold the same schema; they differ only in type names
// (TIMESTAMPTZ/TIMESTAMP, BYTEA/BLOB). A new migration is added to both.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Dialects.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// List returns the dialect's migrations in version order.
func List(dialect string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("unknown dialect %q: %w", dialect, err)
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", e.Name())
		}
		b, err := files.ReadFile(dialect + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Apply runs every migration not yet recorded. On Postgres it holds an
// advisory lock for the duration, so replicas starting together apply each
// migration once. It returns the versions it applied.
func Apply(ctx context.Context, db *sql.DB, dialect string) ([]int, error) {
	ms, err := List(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()
	if dialect == Postgres {
		// 0x5357424d = "SWBM": an arbitrary, fixed key for schema changes.
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(1398227533)`); err != nil {
			return nil, fmt.Errorf("taking migration lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(1398227533)`)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("creating schema_migrations: %w", err)
	}
	done, err := applied(ctx, conn)
	if err != nil {
		return nil, err
	}
	var ran []int
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if err := applyOne(ctx, conn, m); err != nil {
			return ran, err
		}
		ran = append(ran, m.Version)
	}
	return ran, nil
}

func applyOne(ctx context.Context, conn *sql.Conn, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("recording migration %04d: %w", m.Version, err)
	}
	return tx.Commit()
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func applied(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("reading schema_migrations: %w", err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

// Pending returns how many migrations have not been applied. A database
// without schema_migrations has all of them pending.
func Pending(ctx context.Context, db *sql.DB, dialect string) (int, error) {
	ms, err := List(dialect)
	if err != nil {
		return 0, err
	}
	done, err := applied(ctx, db)
	if err != nil {
		// No schema_migrations table yet: nothing applied.
		return len(ms), nil
	}
	n := 0
	for _, m := range ms {
		if !done[m.Version] {
			n++
		}
	}
	return n, nil
}
