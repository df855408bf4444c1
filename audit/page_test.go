package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// Paging with small pages through many rows that share a handful of
// times returns every row exactly once, newest first by (time, id), going
// older and then back newer; the former before= time cursor skipped the
// rows sharing the time of a page's last row.
func TestPagingVisitsEveryRowOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		var all []audit.Entry
		for i := range 1003 {
			all = append(all, audit.Entry{
				ID: fmt.Sprintf("aud_%05d", (i*7919)%1003), Tenant: "ten_a",
				// Five distinct times (one of them with microseconds), so
				// that hundreds of rows share each.
				Time:     base.Add(time.Duration(i%5) * (time.Second + 250*time.Microsecond)),
				Instance: []string{"crm", "gh"}[i%2], Agent: "bot", Outcome: "ok",
			})
		}
		// Another tenant's rows at the same times are never listed.
		for i := range 20 {
			all = append(all, audit.Entry{ID: fmt.Sprintf("aud_other_%d", i), Tenant: "ten_b", Time: base, Instance: "crm", Outcome: "ok"})
		}
		for i := 0; i < len(all); i += 300 {
			if err := store.Insert(ctx, all[i:min(i+300, len(all))]); err != nil {
				t.Fatal(err)
			}
		}
		want := func(instance string) []string {
			var rows []audit.Entry
			for _, e := range all {
				if e.Tenant == "ten_a" && (instance == "" || e.Instance == instance) {
					rows = append(rows, e)
				}
			}
			slices.SortFunc(rows, func(a, b audit.Entry) int {
				if c := b.Time.Compare(a.Time); c != 0 {
					return c
				}
				return strings.Compare(b.ID, a.ID)
			})
			ids := make([]string, len(rows))
			for i, e := range rows {
				ids[i] = e.ID
			}
			return ids
		}
		for _, instance := range []string{"", "crm"} {
			var older []string
			q := audit.Query{Limit: 7, Instance: instance}
			for pages := 0; ; pages++ {
				if pages > 1000 {
					t.Fatal("paging does not end")
				}
				p, err := store.Page(ctx, "ten_a", q)
				if err != nil {
					t.Fatal(err)
				}
				if pages == 0 && p.Newer != "" {
					t.Errorf("the first page has a newer cursor")
				}
				if pages > 0 && p.Newer == "" {
					t.Errorf("page %d has no newer cursor", pages)
				}
				for _, e := range p.Entries {
					older = append(older, e.ID)
				}
				if p.Older == "" {
					break
				}
				q.Cursor = p.Older
			}
			if instance == "" {
				// The former before= time cursor, on the same rows, skips
				// those that share the time of a page's last row.
				legacy := 0
				for q := (audit.Query{Limit: 7}); ; {
					rows, err := store.List(ctx, "ten_a", q)
					if err != nil {
						t.Fatal(err)
					}
					legacy += len(rows)
					if len(rows) < 7 {
						break
					}
					q.Before = rows[len(rows)-1].Time
				}
				if legacy >= 1003 {
					t.Errorf("paging by before= reached %d of 1003 rows: the rows do not share times as this test needs", legacy)
				}
			}
			if w := want(instance); !slices.Equal(older, w) {
				t.Fatalf("instance %q: walked %d rows (%d distinct), want %d in (time, id) order",
					instance, len(older), len(slices.Compact(slices.Sorted(slices.Values(older)))), len(w))
			}
			// Back from the last page to the first, newer each time.
			var newer []string
			last, err := store.Page(ctx, "ten_a", audit.Query{Limit: 7, Instance: instance, Cursor: q.Cursor})
			if err != nil {
				t.Fatal(err)
			}
			newer = append(newer, ids(last.Entries)...)
			for cur := last.Newer; cur != ""; {
				p, err := store.Page(ctx, "ten_a", audit.Query{Limit: 7, Instance: instance, Cursor: cur})
				if err != nil {
					t.Fatal(err)
				}
				if p.Older == "" {
					t.Fatal("a page reached going newer has no older cursor")
				}
				newer = append(ids(p.Entries), newer...)
				cur = p.Newer
			}
			if !slices.Equal(newer, older) {
				t.Fatalf("instance %q: walking back newer gave %d rows, want the %d walked older", instance, len(newer), len(older))
			}
		}
	})
}

func ids(es []audit.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// Filters keep exactly their rows, the former before= time still works,
// and a cursor the server did not give out is refused with a typed error.
func TestPageFilters(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := audit.NewStore(db)
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		rows := []audit.Entry{
			{ID: "a1", Time: base, Instance: "crm", Agent: "bot", Actor: "usr_a", Subject: "usr_a", Outcome: "ok"},
			{ID: "a2", Time: base.Add(time.Minute), Instance: "crm", Agent: "other", Actor: "usr_b", Subject: "usr_b", Outcome: "rate_limited"},
			{ID: "a3", Time: base.Add(2 * time.Minute), Instance: "gh", Agent: "bot", Actor: "usr_p", Subject: "usr_a", Outcome: "ok"},
			{ID: "a4", Time: base.Add(3 * time.Minute), Instance: "gh", Agent: "bot", Actor: "usr_b", Subject: "usr_b", Outcome: "upstream_error"},
			{ID: "c1", Time: base.Add(-time.Minute), Actor: "operator", Subject: "usr_a", Tool: "members", Action: "member.add:owner", Outcome: "ok"},
		}
		for i := range rows {
			rows[i].Tenant = "ten_a"
		}
		if err := store.Insert(ctx, rows); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			q    audit.Query
			want []string
		}{
			{"all", audit.Query{}, []string{"a4", "a3", "a2", "a1", "c1"}},
			{"instance", audit.Query{Instance: "crm"}, []string{"a2", "a1"}},
			{"agent", audit.Query{Agent: "bot"}, []string{"a4", "a3", "a1"}},
			{"user as actor or subject", audit.Query{User: "usr_a"}, []string{"a3", "a1", "c1"}},
			{"outcome ok", audit.Query{Outcome: "ok"}, []string{"a3", "a1", "c1"}},
			{"failed", audit.Query{Outcome: audit.OutcomeFailed}, []string{"a4", "a2"}},
			{"one code", audit.Query{Outcome: "rate_limited"}, []string{"a2"}},
			{"from inclusive", audit.Query{From: base.Add(2 * time.Minute)}, []string{"a4", "a3"}},
			{"to exclusive", audit.Query{To: base.Add(2 * time.Minute)}, []string{"a2", "a1", "c1"}},
			{"before", audit.Query{Before: base.Add(time.Minute)}, []string{"a1", "c1"}},
			{"combined", audit.Query{Agent: "bot", User: "usr_b", From: base}, []string{"a4"}},
			{"nothing", audit.Query{Instance: "none"}, []string{}},
			{"calls", audit.Query{Kind: audit.KindCalls, Instance: "crm"}, []string{"a2", "a1"}},
			{"changes", audit.Query{Kind: audit.KindChanges}, []string{"c1"}},
		} {
			p, err := store.Page(ctx, "ten_a", tc.q)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := ids(p.Entries); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
		for _, bad := range []string{"x", "bnwx", "%%%", "bnw", strings.Repeat("A", 5000)} {
			_, err := store.Page(ctx, "ten_a", audit.Query{Cursor: bad})
			if switchboard.CodeOf(err) != "invalid_cursor" {
				t.Errorf("cursor %q: %v, want invalid_cursor", bad, err)
			}
		}
	})
}
