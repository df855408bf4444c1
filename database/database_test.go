package database_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

func TestMigrateIsIdempotentAndReady(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		if err := db.Ready(ctx); err != nil {
			t.Fatalf("Ready after migrate: %v", err)
		}
		ran, err := db.Migrate(ctx)
		if err != nil || len(ran) != 0 {
			t.Fatalf("second Migrate ran %v, err %v; want nothing", ran, err)
		}
	})
}

func TestReadyReportsPendingMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := database.OpenSQLite(ctx, t.TempDir()+"/x.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ready(ctx); err == nil {
		t.Fatal("Ready on an unmigrated store = nil, want an error")
	}
}

func TestConstraintErrorsAreRecognised(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		ins := `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, CURRENT_TIMESTAMP)`
		if _, err := db.ExecContext(ctx, ins, "t1", "acme", "Acme"); err != nil {
			t.Fatal(err)
		}
		_, err := db.ExecContext(ctx, ins, "t2", "acme", "Acme again")
		if !database.IsUniqueViolation(err) {
			t.Fatalf("duplicate slug: IsUniqueViolation(%v) = false", err)
		}
		_, err = db.ExecContext(ctx, `INSERT INTO callers (id, tenant_id, name, kind, trusted, agent_id, user_id, token_hash, created_at)
			VALUES ('c1', 'no-such-tenant', 'x', 'cron', false, '', '', 'h', CURRENT_TIMESTAMP)`)
		if !database.IsForeignKeyViolation(err) {
			t.Fatalf("unknown tenant: IsForeignKeyViolation(%v) = false", err)
		}
	})
}

func TestInTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		boom := errors.New("boom")
		err := db.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (id, slug, name, created_at) VALUES ('t1', 'acme', 'A', CURRENT_TIMESTAMP)`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx error = %v, want boom", err)
		}
		if n := dbtest.Count(t, db, "tenants", ""); n != 0 {
			t.Fatalf("tenants after rollback = %d, want 0", n)
		}
	})
}

// A new SQLite file gets SQLitePageSize pages, in WAL mode; a file created
// with 4 KiB pages (before the larger page) keeps them, in WAL mode, and
// keeps its rows when it is opened again.
func TestSQLitePageSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pragmas := func(t *testing.T, db *sql.DB) (int, string) {
		t.Helper()
		var size int
		var mode string
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		return size, mode
	}
	fresh, err := database.OpenSQLite(ctx, t.TempDir()+"/new.db")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if size, mode := pragmas(t, fresh.DB); size != database.SQLitePageSize || mode != "wal" {
		t.Fatalf("new file: page size %d, journal mode %s; want %d, wal", size, mode, database.SQLitePageSize)
	}

	path := t.TempDir() + "/old.db"
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	if size, _ := pragmas(t, old); size != 4096 {
		t.Fatalf("SQLite's default page size %d, want 4096 for this test", size)
	}
	old.Close()
	db, err := database.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != "kept" {
		t.Fatalf("existing file's row = %q, %v", v, err)
	}
	if size, mode := pragmas(t, db.DB); size != 4096 || mode != "wal" {
		t.Fatalf("existing file: page size %d, journal mode %s; want 4096, wal", size, mode)
	}
}
