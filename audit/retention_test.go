package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// addTenants stores tenants rows for the ids (audit_retention refers to
// them).
func addTenants(t *testing.T, db *database.DB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := db.ExecContext(context.Background(), `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $2, $3)`,
			id, strings.TrimPrefix(id, "ten_"), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
}

// rows makes n call rows of a tenant at a time, ids unique by prefix.
func rows(tenant, prefix string, at time.Time, n int) []audit.Entry {
	out := make([]audit.Entry, n)
	for i := range out {
		out[i] = audit.Entry{ID: fmt.Sprintf("aud_%s_%05d", prefix, i), Tenant: switchboard.TenantID(tenant), Time: at,
			Instance: []string{"crm", "gh"}[i%2], Agent: "bot", Caller: "cal_1", Tool: "crm_contacts",
			Action: "list", Outcome: []string{"ok", "ok", "upstream_error"}[i%3]}
	}
	return out
}

func insert(t *testing.T, store *audit.Store, entries []audit.Entry) {
	t.Helper()
	for i := 0; i < len(entries); i += 1000 {
		if err := store.Insert(context.Background(), entries[i:min(i+1000, len(entries))]); err != nil {
			t.Fatal(err)
		}
	}
}

// Retention deletes the rows older than the operator's retention (on
// PostgreSQL by dropping the months past it, on SQLite in batches), and a
// tenant's older than its own shorter one in batches; it keeps every
// newer row, and the usage rollup follows. The rollup counts each row
// once, also when a batch is written again (a replay from the spool), and
// never counts people's changes.
func TestRetentionAndUsage(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		store.RetentionDays = 400
		addTenants(t, db, "ten_a", "ten_b")
		now := time.Now().UTC()
		old := now.AddDate(0, 0, -450)
		if db.Dialect == database.Postgres {
			// The month of the oldest rows has its partition, as it would
			// have had when they were written.
			m := time.Date(old.Year(), old.Month(), 1, 0, 0, 0, 0, time.UTC)
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE audit_log_p%s PARTITION OF audit_log FOR VALUES FROM ('%s') TO ('%s')`,
				m.Format("200601"), m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339))); err != nil {
				t.Fatal(err)
			}
		}
		insert(t, store, rows("ten_a", "old_a", old, 6000))
		insert(t, store, rows("ten_b", "old_b", old, 30))
		// Past the operator's retention, in a month without a partition
		// (the default partition on PostgreSQL).
		insert(t, store, rows("ten_a", "dflt", now.AddDate(0, 0, -420).Add(-40*24*time.Hour), 7))
		insert(t, store, rows("ten_a", "mid_a", now.AddDate(0, 0, -200), 40))
		mid := rows("ten_b", "mid_b", now.AddDate(0, 0, -200), 5100)
		insert(t, store, mid)
		recent := append(rows("ten_a", "new_a", now.Add(-time.Hour), 12), rows("ten_b", "new_b", now.Add(-time.Hour), 9)...)
		insert(t, store, recent)
		// A change row is audited but is not a call.
		insert(t, store, []audit.Entry{{ID: "aud_change", Tenant: "ten_b", Time: now.Add(-time.Hour), Tool: "admin", Action: "api_key.create", Outcome: "ok"}})

		span := audit.UsageQuery{From: now.AddDate(0, 0, -600), To: now}
		usage := func(tenant string, q audit.UsageQuery) audit.Usage {
			t.Helper()
			u, err := store.Usage(ctx, switchboard.TenantID(tenant), q)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		if u := usage("ten_b", span); u.Calls != 30+5100+9 || u.OK+u.Failed != u.Calls || u.Failed != 10+1700+3 {
			t.Fatalf("ten_b usage = %+v, want %d calls (%d failed)", u, 30+5100+9, 10+1700+3)
		}
		// Written again (a replayed batch): counted once.
		insert(t, store, mid[:500])
		insert(t, store, recent)
		if u := usage("ten_b", span); u.Calls != 30+5100+9 {
			t.Fatalf("after a replay, ten_b usage = %d calls, want %d", u.Calls, 30+5100+9)
		}
		byQ := span
		byQ.By = []string{audit.ByInstance, audit.ByOutcome}
		u := usage("ten_a", byQ)
		if u.Calls != 6000+7+40+12 || len(u.Rows) != 4 {
			t.Fatalf("ten_a usage by instance and outcome = %+v", u)
		}
		var sum int64
		for _, r := range u.Rows {
			if r.Day != "" || r.Agent != "" || r.Instance == "" || r.Outcome == "" {
				t.Errorf("row %+v: want instance and outcome only", r)
			}
			sum += r.Calls
		}
		if sum != u.Calls {
			t.Errorf("rows sum to %d, total %d", sum, u.Calls)
		}
		list, _, _, more, err := store.UsageByTenant(ctx, span, "", 1)
		if err != nil || len(list) != 1 || list[0].Tenant != "ten_a" || list[0].Calls != u.Calls || !more {
			t.Fatalf("usage by tenant, first page = %+v more=%v err=%v", list, more, err)
		}
		list, _, _, more, err = store.UsageByTenant(ctx, span, "ten_a", 1)
		if err != nil || len(list) != 1 || list[0].Tenant != "ten_b" || more {
			t.Fatalf("usage by tenant, second page = %+v more=%v err=%v", list, more, err)
		}

		// ten_b keeps its rows 30 days; more than the operator's is refused.
		if err := store.SetTenantRetention(ctx, "ten_b", 401); !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("401 days = %v, want invalid", err)
		}
		if err := store.SetTenantRetention(ctx, "ten_b", 30); err != nil {
			t.Fatal(err)
		}
		if r, err := store.TenantRetention(ctx, "ten_b"); err != nil || r != (audit.Retention{Days: 30, OperatorDays: 400, Own: true}) {
			t.Fatalf("ten_b retention = %+v, %v", r, err)
		}
		// A tenant since deleted (no tenants row) and the operator's own
		// rows (no tenant) are kept by the operator's retention too.
		insert(t, store, rows("ten_gone", "gone", old, 25))
		insert(t, store, rows("", "op_old", old, 3))
		insert(t, store, rows("", "op_new", now.Add(-time.Hour), 2))
		st, err := store.Retain(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", db.Dialect, st)
		count := func(tenant, prefix string) int {
			return dbtest.Count(t, db, "audit_log", "tenant_id = $1 AND id LIKE $2", tenant, "aud_"+prefix+"%")
		}
		for _, c := range []struct {
			tenant, prefix string
			want           int
		}{{"ten_a", "old_a", 0}, {"ten_b", "old_b", 0}, {"ten_a", "dflt", 0}, {"ten_a", "mid_a", 40},
			{"ten_b", "mid_b", 0}, {"ten_a", "new_a", 12}, {"ten_b", "new_b", 9}, {"ten_b", "change", 1},
			{"ten_gone", "gone", 0}, {"", "op_old", 0}, {"", "op_new", 2}} {
			if n := count(c.tenant, c.prefix); n != c.want {
				t.Errorf("%s rows %s: %d left, want %d", c.tenant, c.prefix, n, c.want)
			}
		}
		if db.Dialect == database.Postgres {
			if st.PartitionsDropped < 1 || dbtest.Count(t, db, "pg_class", "relname = $1", "audit_log_p"+old.Format("200601")) != 0 {
				t.Errorf("the old month's partition was not dropped: %+v", st)
			}
			// This month's and the next have their partitions.
			for _, m := range []time.Time{now, time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)} {
				if dbtest.Count(t, db, "pg_class", "relname = $1", "audit_log_p"+m.Format("200601")) != 1 {
					t.Errorf("no partition of %s", m.Format("2006-01"))
				}
			}
			// ten_b's 5,100 rows went in batches of at most 5,000.
			if st.RowsDeleted != 7+5100 || st.Batches < 3 {
				t.Errorf("deleted %d rows in %d batches, want %d rows in 2 or more batches (plus the default partition's)", st.RowsDeleted, st.Batches, 7+5100)
			}
		} else if want := 6000 + 30 + 25 + 3 + 7 + 5100; st.RowsDeleted != int64(want) || st.Batches < 4 {
			t.Errorf("deleted %d rows in %d batches, want %d in batches of at most 5,000", st.RowsDeleted, st.Batches, want)
		}
		if u := usage("ten_b", span); u.Calls != 9 {
			t.Errorf("ten_b usage after retention = %d calls, want the 9 recent ones", u.Calls)
		}
		if u := usage("ten_a", span); u.Calls != 40+12 {
			t.Errorf("ten_a usage after retention = %d calls, want %d", u.Calls, 40+12)
		}
		// A second run finds nothing more.
		if st, err := store.Retain(ctx, now); err != nil || st.RowsDeleted != 0 || st.PartitionsDropped != 0 {
			t.Errorf("second retention = %+v, %v", st, err)
		}
		if _, err := audit.ParseUsageQuery("", "", "day,tenant"); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("by=tenant: %v, want invalid", err)
		}
		if _, err := audit.ParseUsageQuery("2026-13-01", "", ""); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("from=2026-13-01: %v, want invalid", err)
		}
	})
}

// Export writes every row the query keeps exactly once, one JSON object
// a line, newest first, across many pages of rows that share a time.
func TestExportEveryRowOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		all := rows("ten_x", "x", at, 2300)
		all = append(all, rows("ten_x", "y", at.Add(time.Second), 150)...)
		all = append(all, rows("ten_z", "z", at, 10)...)
		insert(t, store, all)
		var buf bytes.Buffer
		flushes := 0
		n, err := store.Export(ctx, "ten_x", audit.Query{Limit: 3, Instance: "gh"}, &buf, func() { flushes++ })
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var prev audit.Entry
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var e audit.Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if seen[e.ID] || e.Tenant != "ten_x" || e.Instance != "gh" {
				t.Fatalf("row %+v: repeated, or not kept by the query", e)
			}
			if prev.ID != "" && (e.Time.After(prev.Time) || (e.Time.Equal(prev.Time) && e.ID > prev.ID)) {
				t.Fatalf("row %s after %s: not newest first", e.ID, prev.ID)
			}
			seen[e.ID], prev = true, e
		}
		if want := (2300 + 150) / 2; len(seen) != want || n != int64(want) || flushes < 2 {
			t.Fatalf("exported %d rows (said %d, %d flushes), want %d over several pages", len(seen), n, flushes, want)
		}
	})
}
