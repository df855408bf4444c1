// Package dbtest gives tests a fresh, migrated database on each backend: an
// SQLite file in the test's temporary directory, and a new PostgreSQL
// database created for the test and dropped after it.
//
// PostgreSQL is found at SWITCHBOARD_TEST_DATABASE_URL, or at
// postgres://postgres@127.0.0.1:5432/postgres. When it is unreachable the
// Postgres half of a test is skipped, except with CI=true, where it fails.
//
// StartPostgres gives a test its own PostgreSQL cluster (initdb in a
// temporary folder, 127.0.0.1 on a free port) that it can Stop and Start to
// simulate a database outage; see PostgresServer. It needs PostgreSQL's
// server binaries (initdb, pg_ctl) and, when tests run as root, a "postgres"
// OS user to run the cluster as. Without the binaries the test is skipped,
// except with CI=true, where it fails.
package dbtest

import (
	"context"
	"database/sql"

	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// DefaultURL is the admin connection used to create per-test databases.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL returns the connection string tests create databases through.
func AdminURL() string {
	if u := os.Getenv("SWITCHBOARD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Run runs fn once per backend, as parallel subtests named "sqlite" and
// "postgres", each with a fresh migrated database.
func Run(t *testing.T, fn func(t *testing.T, db *database.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t))
	})
}

// SQLite returns a fresh migrated embedded store in t.TempDir().
func SQLite(t testing.TB) *database.DB {
	t.Helper()
	db, err := database.OpenSQLite(context.Background(), t.TempDir()+"/"+database.FileName)
	if err != nil {
		t.Fatalf("opening sqlite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("migrating sqlite: %v", err)
	}
	return db
}

var (
	adminOnce sync.Once
	adminDB   *sql.DB
	adminErr  error
)

func admin() (*sql.DB, error) {
	adminOnce.Do(func() {
		adminDB, adminErr = sql.Open("pgx", AdminURL())
		if adminErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adminErr = adminDB.PingContext(ctx)
	})
	return adminDB, adminErr
}

// PostgresURL creates a fresh, empty (unmigrated) PostgreSQL database for
// the test, drops it at cleanup, and returns its connection string.
func PostgresURL(t testing.TB) string {
	t.Helper()
	a, err := admin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required when CI=true and is unreachable at %s: %v", redacted(AdminURL()), err)
		}
		t.Skipf("PostgreSQL unreachable at %s (%v); set SWITCHBOARD_TEST_DATABASE_URL", redacted(AdminURL()), err)
	}
	name := strings.ReplaceAll(switchboard.NewID("sbtest_"), "-", "_")
	ctx := context.Background()
	if _, err := a.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("parsing %s: %v", redacted(AdminURL()), err)
	}
	u.Path = "/" + name
	return u.String()
}

// Postgres returns a fresh migrated PostgreSQL database for the test.
func Postgres(t testing.TB) *database.DB {
	t.Helper()
	dsn := PostgresURL(t)
	db, err := database.Open(context.Background(), dsn, "")
	if err != nil {
		t.Fatalf("opening postgres: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("migrating postgres: %v", err)
	}
	return db
}

func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Redacted()
}

// Count returns SELECT count(*) FROM table WHERE <where>, for tests that
// assert that bad input wrote nothing.
func Count(t testing.TB, db *database.DB, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// LogChange logs payload, a JSON object, on channel of the change log in
// a transaction of its own (database.DB.LogChangeTx) and returns its
// sequence.
func LogChange(t testing.TB, db *database.DB, channel string, payload []byte) int64 {
	t.Helper()
	ctx := context.Background()
	var seq int64
	if err := db.InTx(ctx, func(tx *sql.Tx) (err error) {
		seq, err = db.LogChangeTx(ctx, tx, channel, payload)
		return err
	}); err != nil {
		t.Fatalf("logging a change: %v", err)
	}
	return seq
}

// ChangePosition reads the change log's position now
// (database.Dialect.ChangePosition).
func ChangePosition(t testing.TB, db *database.DB) database.ChangePosition {
	t.Helper()
	var p database.ChangePosition
	if err := db.QueryRowContext(context.Background(), `SELECT `+db.Dialect.ChangePosition()).Scan(p.Scan()...); err != nil {
		t.Fatalf("reading the change log's position: %v", err)
	}
	return p
}

// Replicas returns n connection pools on one fresh, migrated PostgreSQL
// database, as n replicas of the server would have: each its own pool, so
// locks and notifications really cross connections.
func Replicas(t testing.TB, n int) []*database.DB {
	t.Helper()
	dsn := PostgresURL(t)
	out := make([]*database.DB, n)
	for i := range out {
		db, err := database.Open(context.Background(), dsn, "")
		if err != nil {
			t.Fatalf("opening postgres: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		out[i] = db
	}
	if _, err := out[0].Migrate(context.Background()); err != nil {
		t.Fatalf("migrating postgres: %v", err)
	}
	return out
}
