package tenants_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestAPIKeysContract runs the API key store's contract on both backends:
// a key is shown once and stored hashed, verifies until revoked or
// expired, is scoped to its tenant, and records its use at most once per
// APIKeyTouchInterval.
func TestAPIKeysContract(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store := tenants.NewStore(db, nil)
		acme, err := store.CreateTenant(ctx, "acme", "Acme")
		if err != nil {
			t.Fatal(err)
		}
		other, err := store.CreateTenant(ctx, "other", "Other")
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64
		clock.Store(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC).UnixMicro())
		now := func() time.Time { return time.UnixMicro(clock.Load()).UTC() }
		advance := func(d time.Duration) { clock.Add(d.Microseconds()) }
		keys := tenants.NewAPIKeys(db).WithClock(now)

		for _, tc := range []struct {
			name string
			req  tenants.APIKeyRequest
			code string
		}{
			{"no name", tenants.APIKeyRequest{Role: switchboard.RoleAdmin}, "invalid_name"},
			{"control character", tenants.APIKeyRequest{Name: "a\nb", Role: switchboard.RoleAdmin}, "invalid_name"},
			{"owner role", tenants.APIKeyRequest{Name: "ci", Role: switchboard.RoleOwner}, "invalid_role"},
			{"no role", tenants.APIKeyRequest{Name: "ci"}, "invalid_role"},
			{"past expiry", tenants.APIKeyRequest{Name: "ci", Role: switchboard.RoleAdmin, ExpiresAt: new(now().Add(-time.Second))}, "invalid_expiry"},
			{"far expiry", tenants.APIKeyRequest{Name: "ci", Role: switchboard.RoleAdmin, ExpiresAt: new(now().Add(3 * 366 * 24 * time.Hour))}, "invalid_expiry"},
		} {
			_, _, err := keys.Create(ctx, acme.ID, tc.req, "operator")
			if switchboard.CodeOf(err) != tc.code {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			}
		}
		if n := dbtest.Count(t, db, "api_keys", ""); n != 0 {
			t.Fatalf("refused requests stored %d keys", n)
		}
		if _, _, err := keys.Create(ctx, "ten_missing", tenants.APIKeyRequest{Name: "ci", Role: switchboard.RoleAdmin}, "operator"); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("key of a missing tenant: %v", err)
		}

		exp := now().Add(time.Hour)
		key, token, err := keys.Create(ctx, acme.ID, tenants.APIKeyRequest{Name: " terraform ", Role: switchboard.RoleAdmin, ExpiresAt: &exp}, "operator")
		if err != nil {
			t.Fatal(err)
		}
		if key.Name != "terraform" || key.Role != switchboard.RoleAdmin || key.CreatedBy != "operator" || !strings.HasPrefix(token.Reveal(), tenants.APIKeyPrefix) {
			t.Fatalf("created %+v", key)
		}
		if n := dbtest.Count(t, db, "api_keys", "token_hash = $1", tenants.HashToken(token.Reveal())); n != 1 {
			t.Fatal("the key's hash is not stored")
		}
		if n := dbtest.Count(t, db, "api_keys", "token_hash = $1", token.Reveal()); n != 0 {
			t.Fatal("the key itself is stored")
		}
		member, memberToken, err := keys.Create(ctx, acme.ID, tenants.APIKeyRequest{Name: "bot", Role: switchboard.RoleMember, UserID: "usr_ann"}, "usr_boss")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := keys.Create(ctx, other.ID, tenants.APIKeyRequest{Name: "theirs", Role: switchboard.RoleAdmin}, "operator"); err != nil {
			t.Fatal(err)
		}

		// Verify records the use, then at most once per interval.
		got, err := keys.Verify(ctx, token.Reveal())
		if err != nil || got.ID != key.ID || got.TenantID != acme.ID || got.LastUsedAt == nil || !got.LastUsedAt.Equal(now()) {
			t.Fatalf("Verify = %+v, %v", got, err)
		}
		first := now()
		advance(30 * time.Second)
		if _, err := keys.Verify(ctx, token.Reveal()); err != nil {
			t.Fatal(err)
		}
		list, err := keys.List(ctx, acme.ID)
		if err != nil || len(list) != 2 {
			t.Fatalf("List = %v, %v", list, err)
		}
		for _, k := range list {
			if k.ID == key.ID && !k.LastUsedAt.Equal(first) {
				t.Fatalf("last_used_at moved within the interval: %v", k.LastUsedAt)
			}
		}
		advance(time.Minute)
		if got, _ := keys.Verify(ctx, token.Reveal()); got == nil || !got.LastUsedAt.Equal(now()) {
			t.Fatalf("last_used_at not recorded after the interval: %+v", got)
		}

		for _, bad := range []string{"", "sbk_nope", token.Reveal() + "x", strings.ToUpper(token.Reveal()), strings.Repeat("sbk_", 100)} {
			if _, err := keys.Verify(ctx, bad); switchboard.CodeOf(err) != "unauthorized" {
				t.Errorf("Verify(%.12q) = %v", bad, err)
			}
		}
		// Tenant scoping: another tenant cannot revoke acme's key.
		if _, err := keys.Revoke(ctx, other.ID, key.ID); switchboard.CodeOf(err) != "api_key_not_found" {
			t.Fatalf("cross-tenant revoke: %v", err)
		}
		// Expiry.
		advance(time.Hour)
		if _, err := keys.Verify(ctx, token.Reveal()); switchboard.CodeOf(err) != "unauthorized" {
			t.Fatalf("expired key verified: %v", err)
		}
		// Revocation, twice; and by user.
		if _, err := keys.Verify(ctx, memberToken.Reveal()); err != nil {
			t.Fatal(err)
		}
		n, err := keys.RevokeUser(ctx, acme.ID, "usr_ann")
		if err != nil || n != 1 {
			t.Fatalf("RevokeUser = %d, %v", n, err)
		}
		if _, err := keys.Verify(ctx, memberToken.Reveal()); switchboard.CodeOf(err) != "unauthorized" {
			t.Fatalf("revoked key verified: %v", err)
		}
		r1, err := keys.Revoke(ctx, acme.ID, member.ID)
		if err != nil || r1.RevokedAt == nil {
			t.Fatalf("Revoke = %+v, %v", r1, err)
		}
		advance(time.Minute)
		r2, err := keys.Revoke(ctx, acme.ID, member.ID)
		if err != nil || !r2.RevokedAt.Equal(*r1.RevokedAt) {
			t.Fatalf("second Revoke moved revoked_at: %+v, %v", r2, err)
		}
		if _, err := keys.Revoke(ctx, acme.ID, "key_missing"); switchboard.CodeOf(err) != "api_key_not_found" {
			t.Fatalf("revoke of a missing key: %v", err)
		}
	})
}
