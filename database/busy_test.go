package database

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard"
)

// SQLite's lock held beyond the busy timeout is store_unavailable, not a
// driver error (the embedded store's form of an outage).
func TestSQLiteBusyIsStoreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `CREATE TABLE t (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil) // IMMEDIATE: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	other, err := openDB("sqlite", "file:"+path+"?_pragma=busy_timeout(50)&_txlock=immediate", new(atomic.Int64))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.ExecContext(ctx, `INSERT INTO t VALUES ('b')`)
	if switchboard.CodeOf(err) != "store_unavailable" {
		t.Fatalf("write while another holds the lock: %v, want store_unavailable", err)
	}
}
