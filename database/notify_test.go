package database_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// A payload published on one connection pool reaches a listener opened on
// another (as between two replicas); the listener resynchronises once on
// connecting. The embedded store has nothing to listen to.
func TestNotifyReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	a, b := replicas[0], replicas[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 4)
	var resyncs atomic.Int32
	ready := make(chan struct{})
	go b.Listen(ctx, "test_changes", func(p string) { got <- p }, func() error {
		if resyncs.Add(1) == 1 {
			close(ready)
		}
		return nil
	}, func(err error) { t.Logf("listen: %v", err) })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not connect")
	}
	if err := a.Notify(context.Background(), "test_changes", `{"caller":"cal_1"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != `{"caller":"cal_1"}` {
			t.Fatalf("payload = %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the notification did not arrive")
	}
	if n := resyncs.Load(); n != 1 {
		t.Errorf("resyncs = %d, want 1 (on connecting)", n)
	}

	s := dbtest.SQLite(t)
	if err := s.Notify(context.Background(), "test_changes", "x"); err != nil {
		t.Fatalf("Notify on the embedded store: %v", err)
	}
	done := make(chan struct{})
	go func() { s.Listen(ctx, "test_changes", func(string) {}, nil, nil); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Listen on the embedded store did not return")
	}
}
