package audit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/migrations"
)

// Migration 0028 rebuilds the embedded store's audit log as a WITHOUT
// ROWID table keyed (tenant_id, at, id): on a database populated under the
// schema before it, every row is still there, listed in the same order by
// every filter, and a replay of stored rows writes nothing.
func TestSQLiteMigration0028KeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sqliteBefore(t, 28)
	// Rows of three tenants (one of them the operator's, ''), many sharing
	// a time, one in ten made for another user (subject not actor),
	// written as the store wrote them before 0028.
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var all []audit.Entry
	for i := range 3000 {
		all = append(all, audit.Entry{ID: fmt.Sprintf("aud_%05d", (i*7919)%3000), Tenant: switchboardTenant([]string{"ten_a", "ten_b", ""}[i%3]),
			Time: base.Add(time.Duration(i%40) * 1500 * time.Microsecond), Instance: []string{"crm", "gh"}[i%2],
			Caller: "cal_1", Agent: []string{"bot", "cron", "sync"}[i%5%3], Actor: fmt.Sprintf("usr_%d", i%4), Subject: fmt.Sprintf("usr_%d", (i+i%10/9)%4),
			Tool: "contacts", Action: "list", Outcome: []string{"ok", "denied"}[i%7/6], Status: 200, LatencyUs: int64(i)})
	}
	for _, e := range all {
		if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action,
			outcome, status, latency_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			e.ID, e.Time, string(e.Tenant), e.Instance, e.Caller, e.Agent, e.Actor, e.Subject, e.Tool, e.Action, e.Outcome, e.Status, e.LatencyUs); err != nil {
			t.Fatal(err)
		}
	}
	store := audit.NewStore(db)
	queries := []audit.Query{{}, {Instance: "gh"}, {Agent: "cron"}, {User: "usr_2"}, {Outcome: audit.OutcomeFailed}, {Agent: "bot", Instance: "crm"}}
	// limit is the page size: before 0029 the store's time is text, which
	// a cursor (bound as 0029's integer) does not continue, so the listing
	// before the migrations is one page of each tenant's 1,000 rows.
	listAll := func(limit int) map[string][][]string {
		t.Helper()
		out := map[string][][]string{}
		for _, tenant := range []string{"ten_a", "ten_b", ""} {
			for _, q := range queries {
				var ids []string
				q.Limit = limit
				for {
					p, err := store.Page(ctx, switchboardTenant(tenant), q)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range p.Entries {
						ids = append(ids, e.ID+"|"+e.Time.Format(time.RFC3339Nano)+"|"+e.Agent+"|"+e.Actor+"|"+e.Subject+"|"+fmt.Sprint(e.LatencyUs))
					}
					if p.Older == "" {
						break
					}
					q.Cursor = p.Older
				}
				out[tenant] = append(out[tenant], ids)
			}
		}
		return out
	}
	before := listAll(audit.MaxLimit)

	ran, err := db.Migrate(ctx)
	if err != nil || len(ran) == 0 || ran[0] != 28 {
		t.Fatalf("migrating from 0027: ran %v, %v", ran, err)
	}
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != len(all) {
		t.Fatalf("audit_log holds %d rows after 0028, want %d", n, len(all))
	}
	after := listAll(97)
	for tenant, lists := range before {
		for i, ids := range lists {
			if len(ids) == 0 && queries[i].Instance == "" && queries[i].Agent == "" && queries[i].User == "" && queries[i].Outcome == "" {
				t.Fatalf("tenant %q listed no rows before 0028", tenant)
			}
			if !slices.Equal(ids, after[tenant][i]) {
				t.Errorf("tenant %q, query %+v: %d rows after 0028, %d before, or in another order", tenant, queries[i], len(after[tenant][i]), len(ids))
			}
		}
	}
	if _, err := db.ExecContext(ctx, `SELECT rowid FROM audit_log`); err == nil {
		t.Error("audit_log still has a rowid")
	}
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	// A replay of stored rows (a spooled batch written again) adds none.
	replay := slices.Clone(all[:500])
	if err := store.Insert(ctx, replay); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != len(all) {
		t.Fatalf("audit_log holds %d rows after a replay, want %d", n, len(all))
	}
}

// Migration 0029 stores the embedded store's audit times as integers
// (nanoseconds since the Unix epoch): every time written as the driver's
// text before it (any fraction, or none, and any offset) reads back as
// the same instant to the nanosecond, in the same order, and a replay of
// stored rows (from the journal or the spool, with the times of their
// first write) writes nothing.
func TestSQLiteMigration0029KeepsEveryTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sqliteBefore(t, 29)
	east, west := time.FixedZone("east", 5*3600+30*60), time.FixedZone("west", -7*3600)
	base := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	times := []time.Time{base, base.Add(time.Nanosecond), base.Add(100 * time.Millisecond), base.Add(123456789),
		base.Add(999999999), base.Add(time.Second + 120*time.Microsecond), base.In(east).Add(7), base.In(west).Add(3 * time.Millisecond),
		time.Date(1970, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 5e8, time.UTC), time.Date(2200, 2, 29, 1, 2, 3, 4, time.UTC)}
	var all []audit.Entry
	for i, at := range times {
		all = append(all, audit.Entry{ID: fmt.Sprintf("aud_%05d", i), Tenant: "ten_a", Time: at, Instance: "crm",
			Caller: "cal_1", Agent: "bot", Actor: "usr_1", Subject: "usr_1", Tool: "contacts", Action: "list", Outcome: "ok", Status: 200, LatencyUs: int64(i)})
	}
	// Written as the store wrote them before 0029: the driver's text of
	// the time in its own zone.
	for _, e := range all {
		if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action,
			outcome, status, latency_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			e.ID, e.Time, string(e.Tenant), e.Instance, e.Caller, e.Agent, e.Actor, e.Subject, e.Tool, e.Action, e.Outcome, e.Status, e.LatencyUs); err != nil {
			t.Fatal(err)
		}
	}
	ran, err := db.Migrate(ctx)
	if err != nil || len(ran) == 0 || ran[0] != 29 {
		t.Fatalf("migrating from 0028: ran %v, %v", ran, err)
	}
	if n := dbtest.Count(t, db, "audit_log", "typeof(at) = 'integer'"); n != len(all) {
		t.Fatalf("%d integer times after 0029, want %d", n, len(all))
	}
	store := audit.NewStore(db)
	var got []audit.Entry
	q := audit.Query{Limit: 3}
	for {
		p, err := store.Page(ctx, "ten_a", q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Entries...)
		if p.Older == "" {
			break
		}
		q.Cursor = p.Older
	}
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b audit.Entry) int { return b.Time.Compare(a.Time) })
	if len(got) != len(want) {
		t.Fatalf("%d rows after 0029, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].Time.Equal(want[i].Time) || got[i].Time.Location() != time.UTC {
			t.Errorf("row %d after 0029: %s at %v, want %s at %v", i, got[i].ID, got[i].Time, want[i].ID, want[i].Time.UTC())
		}
	}
	// The time filters compare instants as before.
	from, to := base.Add(100*time.Millisecond), base.Add(time.Second)
	p, err := store.Page(ctx, "ten_a", audit.Query{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if ids := ids(p.Entries); !slices.Equal(ids, []string{"aud_00004", "aud_00003", "aud_00002"}) {
		t.Errorf("rows from %v to %v: %v", from, to, ids)
	}
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	if err := store.Insert(ctx, slices.Clone(all)); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != len(all) {
		t.Fatalf("audit_log holds %d rows after a replay, want %d", n, len(all))
	}
}

// sqliteBefore is a new embedded store with the migrations before version
// applied.
func sqliteBefore(t *testing.T, version int) *database.DB {
	t.Helper()
	ctx := context.Background()
	db, err := database.OpenSQLite(ctx, t.TempDir()+"/"+database.FileName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := migrations.List(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, '')`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
