package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// The embedded store reads every listing of the audit page from an index
// in the page's order, newest first or (a cursor to newer rows) oldest
// first, without sorting the tenant's rows: SQLite's plan names the index
// the filter matches and no temporary B-tree. The indexes are ascending
// (migration 0025, cheaper to insert into); SQLite walks them backwards
// for the newest-first order. The table itself is keyed (tenant_id, at,
// id) (migration 0028): its primary key is the tenant's listing, and the
// filters without an index of their own (user, outcome, kind) walk it.
func TestSQLiteListingsReadTheirIndex(t *testing.T) {
	db := dbtest.SQLite(t)
	older := &cursor{at: time.Unix(1_700_000_000, 0).UTC(), id: "aud_x"}
	newer := &cursor{newer: true, at: older.at, id: older.id}
	const pk = "PRIMARY KEY"
	for _, c := range []struct {
		name  string
		q     Query
		cur   *cursor
		index string
	}{
		{"tenant", Query{}, nil, pk},
		{"tenant, older page", Query{}, older, pk},
		{"tenant, newer page", Query{}, newer, pk},
		{"tenant, time range", Query{From: older.at.Add(-time.Hour), To: older.at}, nil, pk},
		{"instance", Query{Instance: "gh"}, nil, "INDEX audit_log_tenant_instance_at"},
		{"instance, older page", Query{Instance: "gh"}, older, "INDEX audit_log_tenant_instance_at"},
		{"instance, newer page", Query{Instance: "gh"}, newer, "INDEX audit_log_tenant_instance_at"},
		{"instance, time range", Query{Instance: "gh", From: older.at.Add(-time.Hour), To: older.at}, nil, "INDEX audit_log_tenant_instance_at"},
		{"agent", Query{Agent: "bot"}, nil, "INDEX audit_log_tenant_agent_at"},
		{"agent, older page", Query{Agent: "bot"}, older, "INDEX audit_log_tenant_agent_at"},
		{"agent, newer page", Query{Agent: "bot"}, newer, "INDEX audit_log_tenant_agent_at"},
		{"agent and instance", Query{Agent: "bot", Instance: "gh"}, older, "INDEX audit_log_tenant_agent_at"},
		{"failed calls", Query{Outcome: OutcomeFailed, Kind: KindCalls}, nil, pk},
		{"an outcome, newer page", Query{Outcome: "denied"}, newer, pk},
		{"changes", Query{Kind: KindChanges}, older, pk},
	} {
		query, args := pageQuery(db.Dialect, "acme", c.q, c.cur)
		got := queryPlan(t, db, query, args...)
		if !strings.Contains(got, "USING "+c.index+" (tenant_id=?") && !strings.Contains(got, "USING COVERING "+c.index+" (tenant_id=?") ||
			strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a walk of %s without a sort", c.name, got, c.index)
		}
	}
	// A user's rows: the actor's index and the subject's, merged in order.
	for _, c := range []struct {
		name string
		q    Query
		cur  *cursor
	}{
		{"user", Query{User: "usr_1"}, nil},
		{"user, older page", Query{User: "usr_1"}, older},
		{"user, newer page", Query{User: "usr_1"}, newer},
		{"user's failed calls of an agent", Query{User: "usr_1", Agent: "bot", Outcome: OutcomeFailed, Kind: KindCalls}, older},
	} {
		query, args := pageQuery(db.Dialect, "acme", c.q, c.cur)
		got := queryPlan(t, db, query, args...)
		if !strings.HasPrefix(got, "MERGE (UNION ALL)") || strings.Contains(got, "TEMP B-TREE") ||
			!strings.Contains(got, "INDEX audit_log_tenant_actor_at (tenant_id=? AND actor=?") ||
			!strings.Contains(got, "INDEX audit_log_tenant_subject_at (tenant_id=? AND subject=?") {
			t.Errorf("%s: plan %q, want the actor's and the subject's indexes merged without a sort", c.name, got)
		}
	}
}

// Retention on the embedded store finds each tenant's oldest row with one
// seek of the primary key and deletes a batch from the start of the
// tenant's range: no scan, no sort.
func TestSQLiteRetentionReadsThePrimaryKey(t *testing.T) {
	db := dbtest.SQLite(t)
	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"first tenant", retainFirst, []any{""}},
		{"next tenant", retainNext, []any{"acme"}},
		{"a batch", retainDelete, []any{"acme", time.Unix(1_700_000_000, 0).UTC(), retainBatch}},
	} {
		got := queryPlan(t, db, c.query, c.args...)
		if !strings.Contains(got, "USING PRIMARY KEY (tenant_id") || strings.Contains(got, "SCAN") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want seeks of the primary key", c.name, got)
		}
	}
}

// queryPlan is SQLite's plan of query, its steps joined by "; ".
func queryPlan(t *testing.T, db *database.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
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
		t.Fatalf("%s: %v", query, err)
	}
	return strings.Join(plan, "; ")
}
