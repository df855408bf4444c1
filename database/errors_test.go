package database_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// A text argument with a NUL byte is refused as invalid_text on both
// backends (PostgreSQL cannot store it; SQLite would), through every way a
// store runs SQL, and nothing is written.
func TestNULTextIsRefusedOnBothBackends(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		ins := `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, CURRENT_TIMESTAMP)`
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, switchboard.ErrInvalid) || switchboard.CodeOf(err) != "invalid_text" {
				t.Errorf("%s: %v, want invalid_text", what, err)
			}
		}
		_, err := db.ExecContext(ctx, ins, "t1", "ac\x00me", "Acme")
		check("exec", err)
		err = db.QueryRowContext(ctx, `SELECT id FROM tenants WHERE slug = $1`, switchboard.TenantID("a\x00")).Scan(new(string))
		check("query with a named string type", err)
		err = db.InTx(ctx, func(tx *sql.Tx) error {
			stmt, err := tx.PrepareContext(ctx, ins)
			if err != nil {
				return err
			}
			defer stmt.Close()
			_, err = stmt.ExecContext(ctx, "t2", "acme", "A\x00")
			return err
		})
		check("prepared statement in a transaction", err)
		if n := dbtest.Count(t, db, "tenants", ""); n != 0 {
			t.Fatalf("tenants = %d, want none written", n)
		}
	})
}

// With the PostgreSQL server stopped, queries, transactions and pings fail
// with store_unavailable (an ErrUnavailable), never a driver error; when it
// is back, the same pool works again.
func TestOutageIsStoreUnavailable(t *testing.T) {
	t.Parallel()
	pg := dbtest.StartPostgres(t)
	ctx := context.Background()
	db := pg.Open()
	if err := db.PingContext(ctx); err != nil { // a pooled connection, to be cut
		t.Fatal(err)
	}
	pg.Stop()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, switchboard.ErrUnavailable) || switchboard.CodeOf(err) != "store_unavailable" {
			t.Errorf("%s during the outage: %v, want store_unavailable", what, err)
		}
	}
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(new(int))
	check("query", err)
	_, err = db.ExecContext(ctx, `INSERT INTO tenants (id, slug, name, created_at) VALUES ('t1', 'acme', 'A', CURRENT_TIMESTAMP)`)
	check("exec", err)
	check("transaction", db.InTx(ctx, func(tx *sql.Tx) error { return nil }))
	check("ping", db.PingContext(ctx))
	pg.Start()
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(new(int)); err != nil {
		t.Fatalf("query after the outage: %v", err)
	}
}
