package dbtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestPostgresServerStopStart proves the private cluster really goes away on
// Stop and comes back with its data and port on Start.
func TestPostgresServerStopStart(t *testing.T) {
	srv := dbtest.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatalf("writing: %v", err)
	}
	url := srv.URL()

	srv.Stop()
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("an open connection still works after Stop")
	}
	if c, err := pgx.Connect(ctx, url); err == nil {
		c.Close(ctx)
		t.Fatal("a new connection succeeds after Stop")
	}
	srv.Stop() // stopping twice is harmless

	srv.Start()
	if srv.URL() != url {
		t.Fatalf("URL changed across restart: %s then %s", url, srv.URL())
	}
	conn2, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatalf("connecting after Start: %v", err)
	}
	defer conn2.Close(ctx)
	var v int
	if err := conn2.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after restart: v=%d err=%v", v, err)
	}
}
