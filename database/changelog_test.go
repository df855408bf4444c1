package database_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// A change listener whose log position was marked replays, on its first
// connection, the changes logged since the mark (of its own channel only)
// instead of calling all; one never marked calls all on its first
// connection. A notification without a sequence is reported and skipped.
func TestChangeListenerFirstConnection(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logChange := func(channel, payload string) {
		t.Helper()
		if err := db.InTx(ctx, func(tx *sql.Tx) error {
			_, err := db.LogChangeTx(ctx, tx, channel, []byte(payload))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	type heard struct {
		mu       sync.Mutex
		payloads []string
		all      int
		errs     []string
	}
	listen := func(l *database.ChangeListener) *heard {
		h := &heard{}
		go l.Listen(ctx, func(p string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.payloads = append(h.payloads, p)
		}, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.all++
		}, func(err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.errs = append(h.errs, err.Error())
		})
		return h
	}
	wait := func(h *heard, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			h.mu.Lock()
			done := ok()
			h.mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				h.mu.Lock()
				defer h.mu.Unlock()
				t.Fatalf("heard %q, all %d, errors %q", h.payloads, h.all, h.errs)
			}
		}
	}
	logChange("test_a", `{"n":"before the mark"}`)
	marked := db.NewChangeListener("test_a")
	if err := marked.Mark(ctx); err != nil {
		t.Fatal(err)
	}
	logChange("test_a", `{"n":"after the mark"}`)
	logChange("test_b", `{"n":"another channel"}`)
	logChange("test_a", `{}`)
	m := listen(marked)
	u := listen(db.NewChangeListener("test_a"))
	wait(m, func() bool { return len(m.payloads) >= 3 })
	wait(u, func() bool { return u.all == 1 })
	// Heard live, after the replay.
	logChange("test_a", `{"n":"live"}`)
	if err := db.Notify(ctx, "test_a", `{"n":"no sequence"}`); err != nil {
		t.Fatal(err)
	}
	wait(m, func() bool { return len(m.errs) == 1 && strings.Contains(m.payloads[len(m.payloads)-1], "live") })
	m.mu.Lock()
	defer m.mu.Unlock()
	got := strings.Join(m.payloads, " ")
	if m.all != 0 || strings.Contains(got, "another channel") || !strings.Contains(got, `"n":"after the mark"`) ||
		!strings.Contains(got, `{"seq":`) || strings.Contains(got, "no sequence") {
		t.Errorf("the marked listener heard %q and all %d times; want the changes since the mark on its channel, with their sequence", m.payloads, m.all)
	}
}
