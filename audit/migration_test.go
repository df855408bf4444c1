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
		if m.Version >= 28 {
			break
		}
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, '')`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
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
	listAll := func() map[string][][]string {
		t.Helper()
		out := map[string][][]string{}
		for _, tenant := range []string{"ten_a", "ten_b", ""} {
			for _, q := range queries {
				var ids []string
				q.Limit = 97
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
	before := listAll()

	ran, err := db.Migrate(ctx)
	if err != nil || len(ran) == 0 || ran[0] != 28 {
		t.Fatalf("migrating from 0027: ran %v, %v", ran, err)
	}
	if n := dbtest.Count(t, db, "audit_log", "1=1"); n != len(all) {
		t.Fatalf("audit_log holds %d rows after 0028, want %d", n, len(all))
	}
	after := listAll()
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
