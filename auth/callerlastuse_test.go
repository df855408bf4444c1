package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestCallerLastUse checks that a caller's accepted call is recorded as
// its last use (off the call's path, so the test waits for it), that a
// refused one is not, and that a server records a caller's use at most
// once per CallerTouchInterval; TouchCaller never moves the time back.
func TestCallerLastUse(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store, svc := tenantService(t, db, "acme")
		callers := auth.NewCallers(store)
		t.Cleanup(callers.Wait)
		caller, token, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "c", Kind: tenants.KindCron, UserID: "svc-1"})
		if err != nil {
			t.Fatal(err)
		}
		lastUse := func() *time.Time {
			t.Helper()
			list, err := svc.ListCallers(ctx, "acme")
			if err != nil || len(list) != 1 {
				t.Fatalf("callers: %d, %v", len(list), err)
			}
			return list[0].LastUsedAt
		}

		// Refused (a fixed-user caller naming a user): no use recorded.
		if _, err := callers.Authenticate(ctx, request("Bearer "+token.Reveal(), "X-User-Id", "u-2"), "acme"); err == nil {
			t.Fatal("a fixed-user caller naming a user was accepted")
		}
		time.Sleep(200 * time.Millisecond)
		if got := lastUse(); got != nil {
			t.Fatalf("a refused call was recorded as a use: %v", got)
		}

		if _, err := callers.Authenticate(ctx, request("Bearer "+token.Reveal()), "acme"); err != nil {
			t.Fatal(err)
		}
		var first *time.Time
		for deadline := time.Now().Add(30 * time.Second); first == nil; time.Sleep(20 * time.Millisecond) {
			if first = lastUse(); first == nil && time.Now().After(deadline) {
				t.Fatal("an accepted call was never recorded as the caller's use")
			}
		}
		// Within the interval a second call writes nothing.
		if _, err := callers.Authenticate(ctx, request("Bearer "+token.Reveal()), "acme"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if got := lastUse(); got == nil || !got.Equal(*first) {
			t.Errorf("a second call within %s moved the last use from %v to %v", tenants.CallerTouchInterval, first, got)
		}
		// Another server's older touch does not move it back; a newer one does.
		if err := store.TouchCaller(ctx, caller.ID, first.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := lastUse(); !got.Equal(*first) {
			t.Errorf("an older touch moved the last use back to %v", got)
		}
		later := first.Add(time.Hour)
		if err := store.TouchCaller(ctx, caller.ID, later); err != nil {
			t.Fatal(err)
		}
		if got := lastUse(); !got.Equal(later.UTC().Truncate(time.Microsecond)) {
			t.Errorf("a newer touch: last use %v, want %v", got, later)
		}
	})
}

// tenantService returns the tenant store and service over db, with the
// tenants slugs created.
func tenantService(t *testing.T, db *database.DB, slugs ...string) (*tenants.Store, *tenants.Service) {
	t.Helper()
	keys, err := secrets.NewKeyring(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	store := tenants.NewStore(db, secrets.NewStore(db, keys))
	svc := tenants.NewService(store, noCatalog{})
	for _, slug := range slugs {
		if _, err := svc.CreateTenant(context.Background(), slug, ""); err != nil {
			t.Fatal(err)
		}
	}
	return store, svc
}
