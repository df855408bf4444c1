package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// memberList is the members of every tenant, by user id: the consumer's
// side of auth.Members, for tests that are about callers, not members.
type memberList map[string]bool

func (m memberList) IsMember(_ context.Context, _ switchboard.TenantID, user string) (bool, error) {
	return m[user], nil
}

// Each user mode establishes the user as it says, and every named user is
// a member or an external subject of the caller.
func TestCallerUserModes(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		store, svc := tenantService(t, db, "acme", "globex")
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		callers := auth.NewCallers(store)
		t.Cleanup(callers.Wait)
		callers.SetJWT(&auth.CallerJWT{Issuer: "https://platform.test", Audience: "switchboard", Keys: []crypto.PublicKey{&key.PublicKey}})
		callers.SetMembers(memberList{"alice": true, "bob": true})
		issue := func(req tenants.CallerRequest) string {
			_, tok, err := svc.CreateCaller(ctx, "acme", req)
			if err != nil {
				t.Fatal(err)
			}
			return "Bearer " + tok.Reveal()
		}
		assertion := func(tenant, sub string) string {
			s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "https://platform.test", "aud": "switchboard",
				"sub": sub, "tenant": tenant, "exp": time.Now().Add(time.Minute).Unix()}).SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		fixed := issue(tenants.CallerRequest{Name: "svc", Kind: tenants.KindCron, UserID: "svc-account"})
		header := issue(tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform, Trusted: true,
			UserMode: tenants.UserHeader, ExternalSubjects: []string{"ext-1"}})
		perJWT := issue(tenants.CallerRequest{Name: "signed", Kind: tenants.KindAgentPlatform, UserMode: tenants.UserJWT})

		for _, c := range []struct {
			name   string
			header []string
			user   string
			code   string
		}{
			{"fixed acts as its user", []string{"Authorization", fixed}, "svc-account", ""},
			{"fixed refuses X-User-Id", []string{"Authorization", fixed, "X-User-Id", "alice"}, "", "user_assertion_refused"},
			{"header member", []string{"Authorization", header, "X-User-Id", "alice"}, "alice", ""},
			{"header external subject", []string{"Authorization", header, "X-User-Id", "ext-1"}, "ext-1", ""},
			{"header non-member", []string{"Authorization", header, "X-User-Id", "mallory"}, "", "user_not_found"},
			{"header without a user", []string{"Authorization", header}, "", ""},
			{"jwt user from the JWT", []string{"Authorization", perJWT, auth.HeaderUserAssertion, assertion("acme", "bob")}, "bob", ""},
			{"jwt refuses X-User-Id", []string{"Authorization", perJWT, auth.HeaderUserAssertion, assertion("acme", "bob"), "X-User-Id", "alice"}, "", "user_assertion_refused"},
			{"jwt of another tenant", []string{"Authorization", perJWT, auth.HeaderUserAssertion, assertion("globex", "bob")}, "", "invalid_user_assertion"},
			{"jwt forged", []string{"Authorization", perJWT, auth.HeaderUserAssertion, assertion("acme", "bob") + "x"}, "", "invalid_user_assertion"},
			{"jwt non-member", []string{"Authorization", perJWT, auth.HeaderUserAssertion, assertion("acme", "mallory")}, "", "user_not_found"},
		} {
			p, err := callers.Authenticate(ctx, request("", c.header...), "acme")
			if got := switchboard.CodeOf(err); err != nil && got != c.code || err == nil && c.code != "" {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.code)
				continue
			}
			if err == nil && p.UserID != c.user {
				t.Errorf("%s: user = %q, want %q", c.name, p.UserID, c.user)
			}
		}

		// A trusted caller's targetUserId must name a member too.
		p, err := callers.Authenticate(ctx, request("", "Authorization", header, "X-User-Id", "alice"), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if err := callers.CheckTarget(ctx, p.WithTarget("bob")); err != nil {
			t.Errorf("target member: %v", err)
		}
		if err := callers.CheckTarget(ctx, p.WithTarget("mallory")); switchboard.CodeOf(err) != "user_not_found" {
			t.Errorf("target non-member: err = %v, want user_not_found", err)
		}
	})
}
