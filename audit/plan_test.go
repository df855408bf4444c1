package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// The embedded store reads every listing of the audit page from an index
// in the page's order, newest first or (a cursor to newer rows) oldest
// first, without sorting the tenant's rows: SQLite's plan names the index
// the filter matches and no temporary B-tree. The indexes are ascending
// (migration 0025, cheaper to insert into); SQLite walks them backwards
// for the newest-first order.
func TestSQLiteListingsReadTheirIndex(t *testing.T) {
	db := dbtest.SQLite(t)
	older := &cursor{at: time.Unix(1_700_000_000, 0).UTC(), id: "aud_x"}
	newer := &cursor{newer: true, at: older.at, id: older.id}
	for _, c := range []struct {
		name  string
		q     Query
		cur   *cursor
		index string
	}{
		{"tenant", Query{}, nil, "audit_log_tenant_at"},
		{"tenant, older page", Query{}, older, "audit_log_tenant_at"},
		{"tenant, newer page", Query{}, newer, "audit_log_tenant_at"},
		{"tenant, time range", Query{From: older.at.Add(-time.Hour), To: older.at}, nil, "audit_log_tenant_at"},
		{"instance", Query{Instance: "gh"}, nil, "audit_log_tenant_instance_at"},
		{"instance, older page", Query{Instance: "gh"}, older, "audit_log_tenant_instance_at"},
		{"instance, newer page", Query{Instance: "gh"}, newer, "audit_log_tenant_instance_at"},
		{"agent", Query{Agent: "bot"}, nil, "audit_log_tenant_agent_at"},
		{"agent, older page", Query{Agent: "bot"}, older, "audit_log_tenant_agent_at"},
	} {
		query, args := pageQuery("acme", c.q, c.cur)
		rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "INDEX "+c.index+" ") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a walk of %s without a sort", c.name, got, c.index)
		}
	}
}
