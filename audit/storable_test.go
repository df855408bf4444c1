package audit_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// Caller-supplied values with a NUL byte, invalid UTF-8 or a multi-byte
// rune across the length bound are still written, on both backends, as
// storable text (the store refuses NUL bytes; PostgreSQL refuses invalid
// UTF-8).
func TestInsertStoresUnsafeText(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		store := audit.NewStore(db)
		long := strings.Repeat("a", 199) + "é" // the rune crosses byte 200
		e := audit.Entry{Tenant: "ten_a", Instance: "crm", Caller: "cal_1", Agent: "bot\x00x", Actor: "al\xffice",
			Subject: long, Tool: "contacts", Action: "li\x00st", Outcome: "ok"}
		if err := store.Insert(context.Background(), []audit.Entry{e}); err != nil {
			t.Fatal(err)
		}
		rows, err := store.List(context.Background(), "ten_a", audit.Query{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("List = %v, %v", rows, err)
		}
		r := rows[0]
		if r.Agent != "bot\uFFFDx" || r.Action != "li\uFFFDst" || r.Actor != "al\uFFFDice" || r.Subject != strings.Repeat("a", 199) {
			t.Errorf("stored %q %q %q %q", r.Agent, r.Action, r.Actor, r.Subject)
		}
		for _, s := range []string{r.Agent, r.Actor, r.Subject, r.Action} {
			if !utf8.ValidString(s) {
				t.Errorf("%q is not valid UTF-8", s)
			}
		}
	})
}

// Audit IDs sort in the order of their times (so that inserts append to
// the primary key's index), and two IDs of one instant differ.
func TestNewIDTimeOrdered(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := ""
	for _, d := range []time.Duration{0, time.Microsecond, time.Millisecond, time.Hour, 24 * 365 * 50 * time.Hour} {
		id := audit.NewID(t0.Add(d))
		if len(id) != 34 || !strings.HasPrefix(id, "aud_") {
			t.Fatalf("NewID = %q", id)
		}
		if id <= prev {
			t.Fatalf("%q sorts before %q", id, prev)
		}
		prev = id
	}
	if a, b := audit.NewID(t0), audit.NewID(t0); a == b {
		t.Fatal("two IDs of one instant are equal")
	}
}
