package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

func newSecrets(t *testing.T, db *database.DB) *secrets.Store {
	t.Helper()
	keys, err := secrets.NewKeyring(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return secrets.NewStore(db, keys)
}

func newAuthStore(t *testing.T, db *database.DB) (*auth.Store, *tenants.Tenant) {
	t.Helper()
	sec := newSecrets(t, db)
	tn, err := tenants.NewStore(db, sec).CreateTenant(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return auth.NewStore(db, sec), tn
}

// TestStoreGrantContract is the grant half of auth's store contract, on
// both backends: a lock creates the instance's own grant, tokens saved
// under it commit together and bump the version, a rolled-back lock writes
// nothing, MarkStale only touches the version it names, and deleting a
// user's grants removes their rows and token rows.
func TestStoreGrantContract(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		st, tn := newAuthStore(t, db)
		now := time.Now().UTC().Truncate(time.Second)
		id := auth.GrantID{Tenant: tn.ID, Fingerprint: "fp1", Instance: "in_1", User: "u1", Mode: "oauth"}

		if g, err := st.Grant(ctx, id); err != nil || g != nil {
			t.Fatalf("Grant before = %v, %v; want nil, nil", g, err)
		}
		// Without create, a missing grant stays missing.
		if err := st.LockGrant(ctx, id, false, now, func(g *auth.LockedGrant) error {
			if g.Row != nil {
				t.Errorf("Row = %+v, want nil", g.Row)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		expiry := now.Add(time.Hour)
		v, err := st.ConnectGrant(ctx, id, secrets.New("refresh-1"), secrets.New("access-1"), expiry, now)
		if err != nil || v != 1 {
			t.Fatalf("ConnectGrant = %d, %v", v, err)
		}
		g, err := st.Grant(ctx, id)
		if err != nil || g == nil || g.Status != auth.StatusActive || g.Version != 1 || !g.ExpiresAt.Equal(expiry) {
			t.Fatalf("Grant = %+v, %v", g, err)
		}
		if tok, err := st.Token(ctx, id, "refresh_token"); err != nil || tok.Reveal() != "refresh-1" {
			t.Fatalf("refresh token = %v", err)
		}

		// A failed function rolls everything back.
		boom := errors.New("boom")
		err = st.LockGrant(ctx, id, false, now, func(g *auth.LockedGrant) error {
			if _, err := g.SaveTokens(ctx, secrets.New("refresh-2"), secrets.New("access-2"), expiry); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("LockGrant = %v, want boom", err)
		}
		if tok, _ := st.Token(ctx, id, "access_token"); tok.Reveal() != "access-1" {
			t.Fatalf("a rolled-back save changed the access token")
		}

		// A zero refresh token keeps the stored one.
		if err := st.LockGrant(ctx, id, false, now, func(g *auth.LockedGrant) error {
			v, err := g.SaveTokens(ctx, secrets.Secret{}, secrets.New("access-3"), expiry)
			if v != 2 {
				t.Errorf("version = %d, want 2", v)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if tok, _ := st.Token(ctx, id, "refresh_token"); tok.Reveal() != "refresh-1" {
			t.Fatalf("refresh token changed without a rotation")
		}

		if err := st.MarkStale(ctx, id, 1); err != nil {
			t.Fatal(err)
		}
		if g, _ := st.Grant(ctx, id); !g.ExpiresAt.Equal(expiry) {
			t.Fatalf("MarkStale of an old version expired the current token")
		}
		if err := st.MarkStale(ctx, id, 2); err != nil {
			t.Fatal(err)
		}
		if g, _ := st.Grant(ctx, id); g.ExpiresAt.After(now) {
			t.Fatalf("MarkStale of the current version left it fresh: %v", g.ExpiresAt)
		}

		if err := st.LockGrant(ctx, id, false, now, func(g *auth.LockedGrant) error { return g.MarkReconnect(ctx) }); err != nil {
			t.Fatal(err)
		}
		if g, _ := st.Grant(ctx, id); g.Status != auth.StatusReconnectRequired {
			t.Fatalf("status = %s", g.Status)
		}

		// The instance's own grant is created by the lock.
		own := auth.GrantID{Tenant: tn.ID, Fingerprint: "fp2", Instance: "in_1", Mode: "clientCredentials"}
		if err := st.LockGrant(ctx, own, true, now, func(g *auth.LockedGrant) error {
			if g.Row == nil || g.Row.Version != 0 {
				t.Errorf("created row = %+v", g.Row)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		fps, err := st.DeleteUserGrants(ctx, tn.ID, "in_1", "u1")
		if err != nil || len(fps) != 1 || fps[0] != "fp1" {
			t.Fatalf("DeleteUserGrants = %v, %v", fps, err)
		}
		if n := dbtest.Count(t, db, "secrets", "owner = $1", "grant:in_1:u1"); n != 0 {
			t.Fatalf("%d token rows left", n)
		}
		if g, _ := st.Grant(ctx, own); g == nil {
			t.Fatalf("deleting a user's grants deleted the instance's own")
		}
	})
}

// TestStoreLockSerialises: two lockers of one grant never overlap, on
// either backend.
func TestStoreLockSerialises(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		st, tn := newAuthStore(t, db)
		id := auth.GrantID{Tenant: tn.ID, Fingerprint: "fp", Instance: "in_1", Mode: "clientCredentials"}
		var mu sync.Mutex
		inside, overlap := 0, false
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := st.LockGrant(ctx, id, true, time.Now().UTC(), func(g *auth.LockedGrant) error {
					mu.Lock()
					inside++
					overlap = overlap || inside > 1
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					mu.Lock()
					inside--
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if overlap {
			t.Fatal("two holders of one grant's lock overlapped")
		}
	})
}

// TestProvidersConcurrentFirstPut: concurrent first PUTs of one provider
// all succeed (one creates, the others update), and a PUT naming a stale
// revision is a conflict that changes nothing.
func TestProvidersConcurrentFirstPut(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		ps := auth.NewProviders(db, newSecrets(t, db), "http://127.0.0.1:1")
		req := auth.ProviderRequest{AuthorizeURL: "https://id.example.test/authorize", TokenURL: "https://id.example.test/token"}
		const n = 30
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, c, err := ps.Put(ctx, "acme-id", req)
				if err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if c {
					mu.Lock()
					created++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if created != 1 {
			t.Fatalf("%d PUTs say they created the provider, want 1", created)
		}
		v, err := ps.View(ctx, "acme-id")
		if err != nil || v.Revision != n {
			t.Fatalf("View = %+v, %v; want revision %d", v, err, n)
		}
		stale := int64(1)
		req.Name = "renamed"
		req.Revision = &stale
		if _, _, err := ps.Put(ctx, "acme-id", req); !errors.Is(err, switchboard.ErrConflict) {
			t.Fatalf("Put with a stale revision = %v, want a conflict", err)
		}
		if v, _ := ps.View(ctx, "acme-id"); v.Name == "renamed" || v.Revision != n {
			t.Fatalf("a refused PUT changed the provider: %+v", v)
		}
		cur := int64(n)
		req.Revision = &cur
		if _, _, err := ps.Put(ctx, "acme-id", req); err != nil {
			t.Fatalf("Put with the current revision = %v", err)
		}
	})
}
