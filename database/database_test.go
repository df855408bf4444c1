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
