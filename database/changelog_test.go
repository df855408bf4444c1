package database_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// A change listener whose log position was marked replays, on its first
// connection, the changes logged since the mark (of its own channel only)
// instead of calling all, and not those the mark saw committed: a replica
// caches only after the mark, so they are in what it caches, and
// delivering them would drop warm cache entries for nothing (when the
// listener connects late, just before the store goes away, the replica
// could then serve nobody from its caches). A change whose sequence was
// taken before the mark but that committed after it is replayed. One
// never marked calls all on its first connection. A notification without
// a sequence is reported and skipped. After its connection is cut, the
// listener reconnects and delivers no change a second time.
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
	names := func(h *heard) []string {
		var out []string
		for _, p := range h.payloads {
			var c struct {
				N string `json:"n"`
			}
			if err := json.Unmarshal([]byte(p), &c); err != nil || !strings.HasPrefix(p, `{"seq":`) {
				t.Fatalf("payload %q: %v, want a JSON object with its sequence first", p, err)
			}
			out = append(out, c.N)
		}
		return out
	}
	logChange("test_a", `{"n":"before the mark"}`)
	// Its sequence is taken now; it commits after the mark.
	late, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.LogChangeTx(ctx, late, "test_a", []byte(`{"n":"committed after the mark"}`)); err != nil {
		t.Fatal(err)
	}
	logChange("test_a", `{"n":"committed before the mark"}`)
	marked := db.NewChangeListener("test_a")
	if err := marked.Mark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	logChange("test_a", `{"n":"after the mark"}`)
	logChange("test_b", `{"n":"another channel"}`)
	logChange("test_a", `{}`)
	m := listen(marked)
	u := listen(db.NewChangeListener("test_a"))
	wait(u, func() bool { return u.all == 1 })
	// The replay: three changes. What follows is heard live.
	wait(m, func() bool { return len(m.payloads) >= 3 })
	logChange("test_a", `{"n":"live"}`)
	if err := db.Notify(ctx, "test_a", `{"n":"no sequence"}`); err != nil {
		t.Fatal(err)
	}
	wait(m, func() bool {
		return len(m.errs) == 1 && len(m.payloads) > 0 && strings.Contains(m.payloads[len(m.payloads)-1], "live")
	})
	m.mu.Lock()
	got := names(m)
	all := m.all
	m.mu.Unlock()
	want := []string{"committed after the mark", "after the mark", "", "live"}
	if all != 0 || !slices.Equal(got, want) {
		t.Errorf("the marked listener heard %q and all %d times; want %q: the changes since the mark on its channel, once", got, all, want)
	}

	// Cut the listeners' connections: they reconnect and replay what
	// they have not heard (nothing), then hear what comes next.
	listeners := func() []int {
		t.Helper()
		rows, err := db.QueryContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%' ORDER BY pid`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var pids []int
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return pids
	}
	old := listeners()
	for _, pid := range old {
		if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pids := listeners()
		if len(old) == 2 && len(pids) == 2 && !slices.Contains(old, pids[0]) && !slices.Contains(old, pids[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listeners did not reconnect: %v before, %v now", old, pids)
		}
	}
	logChange("test_a", `{"n":"after the reconnection"}`)
	wait(m, func() bool { return slices.Contains(names(m), "after the reconnection") })
	m.mu.Lock()
	defer m.mu.Unlock()
	want = append(want, "after the reconnection")
	if got := names(m); m.all != 0 || !slices.Equal(got, want) {
		t.Errorf("after a reconnection the marked listener heard %q and all %d times; want %q", got, m.all, want)
	}
}
