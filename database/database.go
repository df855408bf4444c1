// Package database opens the storage backend: PostgreSQL through pgx v5 when
// a database URL is given, otherwise an embedded SQLite file (modernc.org/sqlite,
// pure Go) in the data directory. Both are used through database/sql, so each
// domain store writes its SQL once ($1 placeholders, ON CONFLICT and RETURNING
// work in both); what only one backend has sits behind the Dialect.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboardhq/switchboard/migrations"
)

// DB is an open storage backend.
type DB struct {
	*sql.DB
	// Dialect is Postgres or SQLite.
	Dialect Dialect
	// Path is the SQLite file, empty on Postgres.
	Path string

	url string // Postgres connection string, for LISTEN connections

	statements *atomic.Int64
}

// Statements returns how many statements this pool has sent to the
// backend since it was opened (queries and writes, not transaction
// control): what the cache tests count round trips with.
func (db *DB) Statements() int64 { return db.statements.Load() }

// FileName is the embedded store's file inside the data directory.
const FileName = "switchboard.db"

// Open opens Postgres when url is set, else the embedded SQLite file in
// dataDir (created if missing). It pings the backend before returning.
func Open(ctx context.Context, url, dataDir string) (*DB, error) {
	if url != "" {
		return openPostgres(ctx, url)
	}
	return OpenSQLite(ctx, filepath.Join(dataDir, FileName))
}

func openPostgres(ctx context.Context, url string) (*DB, error) {
	n := new(atomic.Int64)
	db, err := openDB("pgx", url, n)
	if err != nil {
		return nil, fmt.Errorf("opening postgres: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to postgres: %w", redactURL(err, url))
	}
	return &DB{DB: db, Dialect: Postgres, url: url, statements: n}, nil
}

// redactURL keeps a connection string, which may hold a password, out of
// an error message.
func redactURL(err error, url string) error {
	if url == "" || !strings.Contains(err.Error(), url) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), url, "<database-url>"))
}

// OpenSQLite opens (creating) the SQLite file at path. Writes are serialised
// by SQLite's own lock: transactions begin IMMEDIATE so a writer takes the
// write lock up front and never fails on upgrade; readers proceed under WAL.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	if err := createSQLite(ctx, path); err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite"
	n := new(atomic.Int64)
	db, err := openDB("sqlite", dsn, n)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("restricting %s: %w", path, err)
	}
	return &DB{DB: db, Dialect: SQLite, Path: path, statements: n}, nil
}

// SQLitePageSize is the page size of a new SQLite file. The audit log's
// inserts write every page they change to the WAL (a frame: a header and
// the page, two pwrite calls) and the checkpoint copies it back (one more);
// with 8 KiB pages a batch of rows fills half as many frames, for the same
// bytes. A file created before keeps its 4 KiB pages: SQLite changes the
// page size of a WAL file only by a VACUUM outside WAL mode, which rewrites
// the whole file and which the server does not do on its own (see
// docs/performance.md, "Steps").
const SQLitePageSize = 8192

// createSQLite creates the file at path with SQLitePageSize pages when it
// does not exist yet (or is empty). The pool's connections set WAL mode as
// they open, which writes the file's first page and fixes its page size, and
// the driver runs a DSN's pragmas in its own order (journal_mode before
// page_size), so the page size is set here, on a connection of its own,
// before the first of them. On an existing database this does nothing.
func createSQLite(ctx context.Context, path string) error {
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", SQLitePageSize)); err != nil {
		return err
	}
	var mode string
	return conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
}

// Migrate applies pending migrations and returns the versions applied.
func (db *DB) Migrate(ctx context.Context) ([]int, error) {
	return migrations.Apply(ctx, db.DB, db.Dialect.String())
}

// Ready reports nil when the backend answers and every migration is applied.
func (db *DB) Ready(ctx context.Context) error {
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	n, err := migrations.Pending(ctx, db.DB, db.Dialect.String())
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d migrations pending: run switchboard migrate", n)
	}
	return nil
}

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common, so that
// unexported store helpers can run inside or outside a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Counts runs query, which selects a key and a count per row (SELECT k,
// count(*) ... GROUP BY k), and returns the counts by key.
func Counts[K ~string](ctx context.Context, q Querier, query string, args ...any) (map[K]int, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]int{}
	for rows.Next() {
		var (
			k string
			n int
		)
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[K(k)] = n
	}
	return out, rows.Err()
}

// InTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise. The rollback does not depend on ctx still being live.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// IsUniqueViolation reports whether err is a unique or primary-key
// constraint violation on either backend.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		c := sqErr.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// IsForeignKeyViolation reports whether err is a foreign-key violation.
func IsForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23503"
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		return sqErr.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	return false
}
