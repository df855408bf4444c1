package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// Close writes everything queued; List is newest first and scoped by
// tenant.
func TestWriterFlushesOnClose(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		db.ExecContext(context.Background(), `INSERT INTO tenants (id, slug, name, created_at) VALUES ('ten_a', 'a', 'a', CURRENT_TIMESTAMP)`)
		store := audit.NewStore(db)
		w, err := audit.NewWriter(store, audit.WriterOptions{Batch: 7, Interval: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			tenant := "ten_a"
			if i%10 == 0 {
				tenant = "ten_b"
			}
			w.Record(audit.Entry{Tenant: switchboardTenant(tenant), Instance: "crm", Tool: "me", Action: "get", Outcome: "ok"})
		}
		w.Close(context.Background())
		if w.Written() != 100 || w.Dropped() != 0 {
			t.Fatalf("written %d dropped %d", w.Written(), w.Dropped())
		}
		rows, err := store.List(context.Background(), "ten_a", audit.Query{Limit: 1000})
		if err != nil || len(rows) != 90 {
			t.Fatalf("List = %d rows, %v", len(rows), err)
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].Time.After(rows[i-1].Time) {
				t.Fatalf("rows not newest first")
			}
		}
		w.Record(audit.Entry{Tenant: "ten_a"})
		if w.Dropped() != 1 {
			t.Errorf("a record after Close was not dropped")
		}
	})
}

// A batch larger than one INSERT's chunk is written whole, every field
// intact.
func TestInsertLargeBatch(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		store := audit.NewStore(db)
		entries := make([]audit.Entry, 250)
		for i := range entries {
			entries[i] = audit.Entry{Tenant: "ten_a", Instance: "crm", Caller: "cal_1", Agent: "bot", Actor: "alice",
				Subject: "bob", Tool: "contacts", Action: "list", Outcome: "ok", Status: 200, LatencyUs: int64(i)}
		}
		if err := store.Insert(context.Background(), entries); err != nil {
			t.Fatal(err)
		}
		rows, err := store.List(context.Background(), "ten_a", audit.Query{Limit: 1000})
		if err != nil || len(rows) != 250 {
			t.Fatalf("List = %d rows, %v; want 250", len(rows), err)
		}
		seen := map[int64]bool{}
		for _, r := range rows {
			if r.Actor != "alice" || r.Subject != "bob" || r.Agent != "bot" || r.Status != 200 || r.Outcome != "ok" {
				t.Fatalf("row %+v lost a field", r)
			}
			seen[r.LatencyUs] = true
		}
		if len(seen) != 250 {
			t.Fatalf("%d distinct rows, want 250", len(seen))
		}
	})
}

// Every batch size takes the INSERTs its rows add up to (64 rows, then
// the powers of two below): each row is stored once and counted once in
// the usage rollup, also when a batch is written again mixed with new
// rows (a replay from the spool).
func TestInsertEveryBatchSize(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		addTenants(t, db, "ten_s")
		at := time.Now().UTC().Add(-time.Minute)
		written := 0
		var last []audit.Entry
		for _, n := range []int{1, 2, 3, 5, 7, 31, 63, 64, 65, 127, 130, 200} {
			fresh := rows("ten_s", fmt.Sprintf("n%d", n), at, n)
			// Half of the last batch again, interleaved with the new rows.
			var batch []audit.Entry
			for i, e := range fresh {
				batch = append(batch, e)
				if i < len(last)/2 {
					batch = append(batch, last[i])
				}
			}
			insert(t, store, batch)
			written += n
			last = fresh
			var stored int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM audit_log WHERE tenant_id = 'ten_s'`).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			u, err := store.Usage(ctx, "ten_s", audit.UsageQuery{From: at.Add(-48 * time.Hour), To: at.Add(48 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if stored != written || u.Calls != int64(written) {
				t.Fatalf("after a batch of %d new and %d replayed rows: %d stored, %d counted, want %d",
					n, min(n, len(batch)-n), stored, u.Calls, written)
			}
		}
	})
}

// Rows whose text columns differ from the first row of their INSERT, or
// repeat it, each keep their own values: on SQLite a value equal to the
// first row's is bound once per statement (insertSQLite). Every column
// varies on its own pattern, across chunks of 64, 4 and 2 rows and with
// empty values, and each row is read back whole.
func TestInsertRowsDifferingFromTheFirst(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		store := audit.NewStore(db)
		// Microseconds: PostgreSQL's precision.
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
		val := func(i, k int, base string) string {
			switch (i*7 + k) % (k + 2) {
			case 0:
				return base
			case 1:
				return ""
			default:
				return fmt.Sprintf("%s-%d", base, i%(k+3))
			}
		}
		var want []audit.Entry
		for i := range 134 {
			tenant := "ten_a"
			if i%9 == 4 {
				tenant = "ten_b"
			}
			want = append(want, audit.Entry{ID: fmt.Sprintf("aud_%04d", i), Time: at.Add(time.Duration(i) * time.Microsecond),
				Tenant: switchboardTenant(tenant), Instance: val(i, 1, "crm"), Caller: val(i, 2, "cal"), Agent: val(i, 3, "bot"),
				Actor: val(i, 4, "alice"), Subject: val(i, 5, "bob"), Tool: val(i, 6, "contacts"), Action: val(i, 7, "list"),
				Outcome: val(i, 8, "ok"), Status: i % 4, LatencyUs: int64(i)})
		}
		batch := append([]audit.Entry(nil), want...)
		if err := store.Insert(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		got := map[string]audit.Entry{}
		for _, tenant := range []string{"ten_a", "ten_b"} {
			rows, err := store.List(context.Background(), switchboardTenant(tenant), audit.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got[r.ID] = r
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d rows stored, want %d", len(got), len(want))
		}
		for _, w := range want {
			g := got[w.ID]
			if !g.Time.Equal(w.Time) {
				t.Errorf("row %s: time %v, want %v", w.ID, g.Time, w.Time)
			}
			g.Time = w.Time
			if g != w {
				t.Errorf("row %s:\n got %+v\nwant %+v", w.ID, g, w)
			}
		}
	})
}
