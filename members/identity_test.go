package members_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// slugs lists the tenants of memberships.
func slugs(ms []members.Membership) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.TenantSlug+":"+string(m.Role))
	}
	return out
}

// TestSwitchSession checks the tenant picker's rule: a session signed in
// with an OpenID Connect identity switches only to member rows that the
// same identity signed in to before; a one-time link's session switches
// nowhere; an admin of one tenant who invites the email of another
// tenant's owner and opens the invitation themself gains nothing of that
// tenant, and the owner loses nothing.
func TestSwitchSession(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		alice := members.Identity{Issuer: "https://idp.test", Subject: "alice-sub"}
		mallory := members.Identity{Issuer: "https://idp.test", Subject: "mallory-sub"}

		// Alice owns acme and is a member of globex; she signed in to both
		// with her identity provider account.
		aliceA, err := f.store.AddMember(ctx, members.ActorOperator, f.acme, "alice@corp.test", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		aliceG, err := f.store.AddMember(ctx, members.ActorOperator, f.globex, "alice@corp.test", members.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.store.CreateSessionAs(ctx, f.globex, aliceG.UserID, alice); err != nil {
			t.Fatal(err)
		}
		start := f.clock.Now()
		sessA, tokA, err := f.store.CreateSessionAs(ctx, f.acme, aliceA.UserID, alice)
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.store.Picker(ctx, sessA)
		if err != nil || !p.Proven || len(p.Switch) != 1 || p.Switch[0].TenantSlug != "globex" || p.Switch[0].Role != members.RoleMember || len(p.SignInNeeded) != 0 {
			t.Fatalf("Alice's picker in acme: %+v %v", p, err)
		}

		// She switches: a new session in globex, the old one ended, the
		// same absolute expiry, her globex role.
		f.clock.Add(time.Minute)
		sessG, tokG, err := f.store.SwitchSession(ctx, tokA.Reveal(), f.globex)
		if err != nil {
			t.Fatal(err)
		}
		if sessG.Tenant != f.globex || sessG.UserID != aliceG.UserID || sessG.Role != members.RoleMember || sessG.ID == sessA.ID ||
			!sessG.ExpiresAt.Equal(sessA.ExpiresAt) || sessG.Identity != alice || tokG.Reveal() == tokA.Reveal() {
			t.Fatalf("switched session %+v (from %+v)", sessG, sessA)
		}
		if !sessA.ExpiresAt.Equal(start.Add(10 * time.Hour)) {
			t.Errorf("expiry %v", sessA.ExpiresAt)
		}
		wantCode(t, resolveErr(f, tokA.Reveal()), "invalid_session")
		if s, err := f.store.ResolveSession(ctx, tokG.Reveal()); err != nil || s.Tenant != f.globex {
			t.Fatalf("the new session: %+v %v", s, err)
		}
		// Back again, and a switch to the tenant it is in is refused.
		_, tokA2, err := f.store.SwitchSession(ctx, tokG.Reveal(), f.acme)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = f.store.SwitchSession(ctx, tokA2.Reveal(), f.acme)
		wantCode(t, err, "switch_refused")

		// Mallory, owner of a third tenant, invites Alice's email there and
		// opens the invitation herself.
		third := f.tenant(t, "initech")
		mal, err := f.store.AddMember(ctx, members.ActorOperator, third, "mallory@evil.test", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		_, inv, err := f.store.Invite(ctx, mal.UserID, third, "alice@corp.test", members.RoleAdmin, 0)
		if err != nil {
			t.Fatal(err)
		}
		fake, err := f.store.Redeem(ctx, inv.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		fakeSess, fakeTok, err := f.store.CreateSession(ctx, third, fake.UserID)
		if err != nil {
			t.Fatal(err)
		}
		// Her link session sees no other tenant and switches nowhere.
		if p, err := f.store.Picker(ctx, fakeSess); err != nil || p.Proven || len(p.Switch)+len(p.SignInNeeded) != 0 {
			t.Errorf("the link session's picker: %+v %v", p, err)
		}
		for _, tn := range []switchboard.TenantID{f.acme, f.globex, "ten_nonexistent"} {
			_, _, err := f.store.SwitchSession(ctx, fakeTok.Reveal(), tn)
			wantCode(t, err, "switch_refused")
		}
		// With her own identity provider account she switches nowhere
		// either.
		_, malTok, err := f.store.CreateSessionAs(ctx, third, mal.UserID, mallory)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range []switchboard.TenantID{f.acme, f.globex} {
			_, _, err := f.store.SwitchSession(ctx, malTok.Reveal(), tn)
			wantCode(t, err, "switch_refused")
		}
		// Alice: still owner of acme, her session live; initech appears
		// only as "sign in there", never as a switch.
		sessA2, err := f.store.ResolveSession(ctx, tokA2.Reveal())
		if err != nil || sessA2.Role != members.RoleOwner {
			t.Fatalf("Alice after the attack: %+v %v", sessA2, err)
		}
		p, err = f.store.Picker(ctx, sessA2)
		if err != nil || len(p.Switch) != 1 || p.Switch[0].TenantSlug != "globex" || len(p.SignInNeeded) != 1 || p.SignInNeeded[0].TenantSlug != "initech" {
			t.Fatalf("Alice's picker after the attack: switch %v, sign in %v, %v", slugs(p.Switch), slugs(p.SignInNeeded), err)
		}
		_, _, err = f.store.SwitchSession(ctx, tokA2.Reveal(), third)
		wantCode(t, err, "switch_refused")
		if s, err := f.store.ResolveSession(ctx, tokA2.Reveal()); err != nil || s.ID != sessA2.ID {
			t.Errorf("a refused switch ended the session: %v", err)
		}

		// A later sign-in to a row bound to another identity does not
		// rebind it: Mallory's account signing in as the initech row
		// (were her provider to vouch for Alice's email) leaves it hers.
		if _, _, err := f.store.CreateSessionAs(ctx, third, fake.UserID, mallory); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.store.CreateSessionAs(ctx, third, fake.UserID, alice); err != nil {
			t.Fatal(err)
		}
		p, _ = f.store.Picker(ctx, sessA2)
		if len(p.Switch) != 1 {
			t.Errorf("a row bound to another identity became switchable: %v", slugs(p.Switch))
		}
		// A session of an expired sign-in cannot switch.
		f.clock.Add(11 * time.Hour)
		_, _, err = f.store.SwitchSession(ctx, tokA2.Reveal(), f.globex)
		wantCode(t, err, "invalid_session")
	})
}

func resolveErr(f *fixture, token string) error {
	_, err := f.store.ResolveSession(context.Background(), token)
	return err
}

// tenant creates another tenant.
func (f *fixture) tenant(t *testing.T, slug string) switchboard.TenantID {
	t.Helper()
	if _, err := f.db.ExecContext(context.Background(), `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, $4)`,
		"ten_"+slug, slug, slug, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	return switchboard.TenantID("ten_" + slug)
}
