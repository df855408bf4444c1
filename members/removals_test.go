package members_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// TestRemovalIsNotifiedOnlyWhenCommitted removes members on one replica
// while another listens: a removal whose transaction fails at commit (a
// deferred trigger refuses it, after the NOTIFY was queued) leaves the
// member and is heard by no one; the next, committed, removal is the
// next one heard.
func TestRemovalIsNotifiedOnlyWhenCommitted(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	f := newFixture(t, replicas[0])
	b := members.NewStore(replicas[1], f.audit, members.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu         sync.Mutex
		local, got []members.Removal
	)
	f.store.OnRemoval(func(r members.Removal) { mu.Lock(); defer mu.Unlock(); local = append(local, r) })
	b.OnRemoval(func(r members.Removal) { mu.Lock(); defer mu.Unlock(); got = append(got, r) })
	go b.Listen(ctx, func(error) {})
	heard := func(n int) []members.Removal {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			out := append([]members.Removal(nil), got...)
			mu.Unlock()
			if len(out) >= n {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("B heard %+v, want %d removals", out, n)
			}
		}
	}
	heard(1) // the first connection's Removal{All: true}
	if _, err := f.store.AddMember(ctx, members.ActorOperator, f.acme, "owner@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	kept, err := f.store.AddMember(ctx, members.ActorOperator, f.acme, "kept@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := f.store.AddMember(ctx, members.ActorOperator, f.acme, "gone@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION refuse_removal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'removal refused'; END $$`,
		`CREATE CONSTRAINT TRIGGER refuse_removal AFTER DELETE ON members DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (OLD.user_id = '` + kept.UserID + `') EXECUTE FUNCTION refuse_removal()`,
	} {
		if _, err := replicas[0].ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.RemoveMember(ctx, members.ActorOperator, f.acme, kept.UserID); err == nil {
		t.Fatal("a removal refused at commit succeeded")
	}
	if _, err := f.store.Member(ctx, f.acme, kept.UserID); err != nil {
		t.Fatalf("the refused removal removed the member: %v", err)
	}
	if err := f.store.RemoveMember(ctx, members.ActorOperator, f.acme, gone.UserID); err != nil {
		t.Fatal(err)
	}
	all := heard(2)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	want := members.Removal{Tenant: f.acme, UserID: gone.UserID}
	if len(got) != 2 || all[1] != want {
		t.Errorf("B heard %+v, want only its first connection's and %+v", got, want)
	}
	if len(local) != 1 || local[0] != want {
		t.Errorf("delivered locally %+v, want %+v", local, want)
	}
}
