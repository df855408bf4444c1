package audit_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
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
		sameRows(t, got, want)
	})
}

// The usage rollup counts what the batch stored, whichever way the store
// wrote it (on PostgreSQL the rollup is computed by the writer for COPY,
// by the statement for a replay): per UTC day, instance, agent and
// outcome, change rows left out but an agent's call to an admin tool
// counted, values clipped as the stored row's are, and a replayed row
// once. The rollup is compared with a GROUP BY over the stored rows.
func TestUsageCountsWhatIsStored(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		addTenants(t, db, "ten_u", "ten_v")
		midnight := time.Now().UTC().Truncate(24 * time.Hour)
		long := strings.Repeat("a", 300)
		var batch []audit.Entry
		for i := range 300 {
			e := audit.Entry{Tenant: switchboard.TenantID([]string{"ten_u", "ten_v"}[i%2]),
				Time:     midnight.Add(time.Duration(i-150) * time.Second), // both sides of midnight
				Instance: []string{"gh", "crm", long}[i%3], Agent: []string{"bot", long + "b", ""}[i%5%3],
				Caller: []string{"cal_1", ""}[i%4/3], Tool: []string{"repos", "admin", "members"}[i%7%3],
				Action: "get", Outcome: []string{"ok", "denied", "upstream_error"}[i%11%3]}
			e.ID = audit.NewID(e.Time)
			batch = append(batch, e)
		}
		insert(t, store, batch[:200])
		insert(t, store, batch[100:]) // rows 100-199 replayed
		want := map[string]int64{}
		day := map[string]string{}
		for _, e := range batch {
			day[e.ID] = e.Time.Format(time.DateOnly)
		}
		q, err := db.QueryContext(ctx, `SELECT id, tenant_id, instance, agent_id, outcome FROM audit_log
			WHERE NOT (tool IN ('members', 'admin') AND caller_id = '')`)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var id, tenant, instance, agent, outcome string
			if err := q.Scan(&id, &tenant, &instance, &agent, &outcome); err != nil {
				t.Fatal(err)
			}
			want[strings.Join([]string{tenant, day[id], instance, agent, outcome}, "|")]++
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		var total int64
		for _, tenant := range []string{"ten_u", "ten_v"} {
			u, err := store.Usage(ctx, switchboard.TenantID(tenant), audit.UsageQuery{From: midnight.Add(-48 * time.Hour),
				To: midnight.Add(48 * time.Hour), By: []string{audit.ByDay, audit.ByInstance, audit.ByAgent, audit.ByOutcome}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range u.Rows {
				got[strings.Join([]string{tenant, r.Day, r.Instance, r.Agent, r.Outcome}, "|")] += r.Calls
				total += r.Calls
			}
		}
		if len(want) < 20 {
			t.Fatalf("%d usage keys: the batch should spread over more", len(want))
		}
		for k := range maps.Keys(want) {
			if got[k] != want[k] {
				t.Errorf("usage of %.60s...: %d counted, %d stored", k, got[k], want[k])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d usage keys, want %d", len(got), len(want))
		}
		if total >= 300 {
			t.Fatalf("%d calls counted: the change rows were counted", total)
		}
	})
}

// Rows with the same texts go, eight or more at a time, into INSERTs that
// bind only their id, time, status and latency (planSQLite): groups of
// every size around those bounds, interleaved with each other and with
// rows of their own, are each stored once with their own values, and
// counted once in the usage rollup, also when the batch is written again
// with new rows (a replay).
func TestInsertGroupsOfSameTexts(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		addTenants(t, db, "ten_g")
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
		sizes := []int{1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 72, 130}
		var want []audit.Entry
		left := append([]int(nil), sizes...)
		for i := 0; ; i++ {
			// Round robin over the groups still short of their size, so
			// that every group's rows are spread over the batch.
			g := -1
			for k := range left {
				if left[(i+k)%len(left)] > 0 {
					g = (i + k) % len(left)
					break
				}
			}
			if g < 0 {
				break
			}
			left[g]--
			n := len(want)
			want = append(want, audit.Entry{ID: fmt.Sprintf("aud_g%04d", n), Time: at.Add(time.Duration(n) * time.Microsecond),
				Tenant: "ten_g", Instance: fmt.Sprintf("crm%d", g), Caller: "cal_1", Agent: "bot", Actor: "alice",
				Subject: "bob", Tool: "contacts", Action: []string{"list", "get"}[g%2], Outcome: []string{"ok", "denied", "ok"}[g%3],
				Status: 200 + n%7, LatencyUs: int64(n)})
		}
		check := func(stored []audit.Entry) {
			t.Helper()
			rows, err := store.List(ctx, "ten_g", audit.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]audit.Entry{}
			for _, r := range rows {
				got[r.ID] = r
			}
			if len(rows) != len(stored) || len(got) != len(stored) {
				t.Fatalf("%d rows stored (%d distinct), want %d", len(rows), len(got), len(stored))
			}
			sameRows(t, got, stored)
			u, err := store.Usage(ctx, "ten_g", audit.UsageQuery{From: at.Add(-48 * time.Hour), To: at.Add(48 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if u.Calls != int64(len(stored)) {
				t.Fatalf("%d calls counted, want %d", u.Calls, len(stored))
			}
		}
		// The first half, then all of it: the second batch replays the
		// first half's rows.
		half := append([]audit.Entry(nil), want[:len(want)/2]...)
		if err := store.Insert(ctx, half); err != nil {
			t.Fatal(err)
		}
		check(want[:len(want)/2])
		if err := store.Insert(ctx, append([]audit.Entry(nil), want...)); err != nil {
			t.Fatal(err)
		}
		check(want)
	})
}

// sameRows reports each row of want that got, the stored rows by ID, does
// not hold with the same values.
func sameRows(t *testing.T, got map[string]audit.Entry, want []audit.Entry) {
	t.Helper()
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
}
