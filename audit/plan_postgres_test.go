package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// On PostgreSQL every listing of the audit page reads the index of its
// filter in the page's order, without sorting the tenant's rows: newest
// first is a backward scan of the ascending (tenant_id[, column], at, id)
// index (migration 0030), a cursor to newer rows a forward one. The
// tenant's listing reads the primary key (tenant_id, at, id) and a user's
// the actor's index and the partial subject index (migration 0031). The table
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
	userIndexes := []string{"tenant_id_actor_at_id_idx", "tenant_id_subject_at_id_idx"}
	older := &cursor{at: at, id: NewID(at)}
	newer := &cursor{newer: true, at: older.at, id: older.id}
	for _, c := range []struct {
		name  string
		q     Query
		cur   *cursor
		index []string // each partition's index is named after its columns
	}{
		{"tenant", Query{}, nil, []string{"pkey"}},
		{"tenant, older page", Query{}, older, []string{"pkey"}},
		{"tenant, newer page", Query{}, newer, []string{"pkey"}},
		{"tenant, time range", Query{From: older.at.Add(-time.Hour), To: older.at}, nil, []string{"pkey"}},
		{"instance", Query{Instance: "gh4"}, nil, []string{"tenant_id_instance_at_id_idx"}},
		{"instance, older page", Query{Instance: "gh4"}, older, []string{"tenant_id_instance_at_id_idx"}},
		{"instance, newer page", Query{Instance: "gh4"}, newer, []string{"tenant_id_instance_at_id_idx"}},
		{"agent", Query{Agent: "bot4"}, nil, []string{"tenant_id_agent_id_at_id_idx"}},
		{"agent, older page", Query{Agent: "bot4"}, older, []string{"tenant_id_agent_id_at_id_idx"}},
		{"agent, newer page", Query{Agent: "bot4"}, newer, []string{"tenant_id_agent_id_at_id_idx"}},
		{"failed calls", Query{Outcome: OutcomeFailed, Kind: KindCalls}, nil, []string{"pkey"}},
		{"an outcome, newer page", Query{Outcome: "denied"}, newer, []string{"pkey"}},
		{"user", Query{User: "usr_4"}, nil, userIndexes},
		{"user, older page", Query{User: "usr_4"}, older, userIndexes},
		{"user, newer page", Query{User: "usr_4"}, newer, userIndexes},
		{"user, failed calls", Query{User: "usr_4", Outcome: OutcomeFailed}, nil, userIndexes},
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
		for _, index := range c.index {
			if !strings.Contains(got, "Index Scan") || !strings.Contains(got, "_"+index+" ") {
				t.Errorf("%s: plan %q, want a read of %s", c.name, got, index)
			}
		}
		// A user's two ranges are each read by their index, and may be
		// sorted when they are small (as the single OR before migration
		// 0031 was: a BitmapOr and a sort); every other listing is read in
		// its order.
		if c.index != nil && !slices.Equal(c.index, userIndexes) && strings.Contains(got, "Sort  (") {
			t.Errorf("%s: plan %q, want no sort", c.name, got)
		}
		if strings.Contains(got, "Seq Scan on audit_log_p"+start.Format("200601")) {
			t.Errorf("%s: plan %q reads the whole month", c.name, got)
		}
	}
}
