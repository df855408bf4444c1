package database_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// When the server ends the sessions of pooled connections (a failover's
// fast shutdown, pg_terminate_backend, an idle-session timeout), the next
// statements run on other connections instead of failing: the server's
// FATAL 57P01 answer to the first statement sent on such a connection is
// store_unavailable with driver.ErrBadConn in its chain, which makes
// database/sql retry (a new connection after two failures). pgx pings a
// pooled connection before reuse only when it was idle for over a second,
// so without this every connection used in the second before the sessions
// ended failed one request (TestStoreOutageIsTyped's cold process, whose
// first request after the store came back was refused).
func TestTerminatedSessionsAreRetried(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	db, err := database.Open(ctx, dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := sql.Open("pgx", dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// terminate ends every session on the test's database and waits
	// until they are gone.
	terminate := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var left int
			if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions still on the database", left)
			}
		}
	}

	// The error a terminated session answers with, on a connection
	// held across the termination (no retry on a held connection).
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := terminate(); n != 1 {
		t.Fatalf("terminated %d sessions, want 1", n)
	}
	err = c.QueryRowContext(ctx, `SELECT 1`).Scan(new(int))
	if switchboard.CodeOf(err) != "store_unavailable" || !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("a statement on a terminated session: %v, want store_unavailable that database/sql retries (driver.ErrBadConn)", err)
	}
	c.Close()

	// A pool of connections all used within the last second, their
	// sessions ended: each way of running a statement succeeds.
	const n = 8
	hold := func() {
		var wg sync.WaitGroup
		conns := make(chan *sql.Conn, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := db.Conn(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				conns <- c
			}()
		}
		wg.Wait()
		close(conns)
		for c := range conns {
			c.Close()
		}
	}
	hold() // opens n connections
	hold() // takes each from the pool: pgx notes it was just used
	if got := terminate(); got != n {
		t.Fatalf("terminated %d sessions, want %d", got, n)
	}
	var one int
	if err := db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		t.Errorf("query after the sessions ended: %v", err)
	}
	if _, err := db.ExecContext(ctx, `SELECT 1`); err != nil {
		t.Errorf("exec after the sessions ended: %v", err)
	}
	if err := db.InTx(ctx, func(tx *sql.Tx) error { return tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one) }); err != nil {
		t.Errorf("transaction after the sessions ended: %v", err)
	}
	stmt, err := db.PrepareContext(ctx, `SELECT 1`)
	if err != nil {
		t.Fatalf("prepare after the sessions ended: %v", err)
	}
	defer stmt.Close()
	if err := stmt.QueryRowContext(ctx).Scan(&one); err != nil {
		t.Errorf("prepared statement after the sessions ended: %v", err)
	}
}
