package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// On PostgreSQL every listing of the audit page reads the index of its
// filter in the page's order, without sorting the tenant's rows: newest
// first is a backward scan of the ascending (tenant_id[, column], at, id)
// index (migration 0030), a cursor to newer rows a forward one. The table
// holds enough rows of several tenants, instances, agents and users, and
// is analysed, so that the planner chooses as it would in production.
func TestPostgresListingsReadTheirIndex(t *testing.T) {
	db := dbtest.Postgres(t)
	ctx := context.Background()
	s := NewStore(db)
	start := time.Now().UTC().Add(-time.Hour)
	batch := make([]Entry, 0, 1000)
	for i := 0; i < 40_000; i++ {
		actor := fmt.Sprintf("usr_%d", i%50)
		subject := actor
		if i%10 == 0 {
			subject = fmt.Sprintf("usr_%d", (i+1)%50)
		}
		outcome := "ok"
		if i%7 == 0 {
			outcome = "denied"
		}
		batch = append(batch, Entry{Time: start.Add(time.Duration(i) * 50 * time.Millisecond),
			Tenant: switchboard.TenantID(fmt.Sprintf("ten_%d", i%4)), Instance: fmt.Sprintf("gh%d", i%20),
			Caller: "cal_1", Agent: fmt.Sprintf("bot%d", i%30), Actor: actor, Subject: subject,
			Tool: "repositories", Action: "get", Outcome: outcome, Status: 200})
		if len(batch) == cap(batch) {
			if err := s.Insert(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := db.ExecContext(ctx, `ANALYZE audit_log`); err != nil {
		t.Fatal(err)
	}
	at := start.Add(20 * time.Minute)
	older := &cursor{at: at, id: NewID(at)}
	newer := &cursor{newer: true, at: older.at, id: older.id}
	for _, c := range []struct {
		name  string
		q     Query
		cur   *cursor
		index string
	}{
		{"tenant", Query{}, nil, "tenant_id_at_id"},
		{"tenant, older page", Query{}, older, "tenant_id_at_id"},
		{"tenant, newer page", Query{}, newer, "tenant_id_at_id"},
		{"tenant, time range", Query{From: older.at.Add(-time.Hour), To: older.at}, nil, "tenant_id_at_id"},
		{"instance", Query{Instance: "gh4"}, nil, "tenant_id_instance_at_id"},
		{"instance, older page", Query{Instance: "gh4"}, older, "tenant_id_instance_at_id"},
		{"instance, newer page", Query{Instance: "gh4"}, newer, "tenant_id_instance_at_id"},
		{"agent", Query{Agent: "bot4"}, nil, "tenant_id_agent_id_at_id"},
		{"agent, older page", Query{Agent: "bot4"}, older, "tenant_id_agent_id_at_id"},
		{"agent, newer page", Query{Agent: "bot4"}, newer, "tenant_id_agent_id_at_id"},
		{"failed calls", Query{Outcome: OutcomeFailed, Kind: KindCalls}, nil, "tenant_id_at_id"},
		{"an outcome, newer page", Query{Outcome: "denied"}, newer, "tenant_id_at_id"},
		{"user", Query{User: "usr_4"}, nil, ""},
		{"user, older page", Query{User: "usr_4"}, older, ""},
	} {
		query, args := pageQuery(db.Dialect, "ten_0", c.q, c.cur)
		rows, err := db.QueryContext(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		t.Logf("%s: %s", c.name, got)
		// Each partition's index is named after its columns.
		if c.index != "" && (!strings.Contains(got, "Index Scan") || !strings.Contains(got, "_"+c.index+"_idx on ") || strings.Contains(got, "Sort  (")) {
			t.Errorf("%s: plan %q, want a walk of %s without a sort", c.name, got, c.index)
		}
	}
}
