package members_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a store over a fresh database with two tenants.
type fixture struct {
	db     *database.DB
	store  *members.Store
	audit  *audit.Writer
	rows   *audit.Store
	clock  *clock
	acme   switchboard.TenantID
	globex switchboard.TenantID
}

func newFixture(t *testing.T, db *database.DB) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{db: db, rows: audit.NewStore(db), clock: &clock{t: time.Now().UTC().Truncate(time.Second)}}
	var err error
	if f.audit, err = audit.NewWriter(f.rows, audit.WriterOptions{Interval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.audit.Close(context.Background()) })
	f.store = members.NewStore(db, f.audit, members.Options{Now: f.clock.Now, SessionIdle: time.Hour, SessionMax: 10 * time.Hour})
	ts := tenants.NewStore(db, nil)
	for _, slug := range []string{"acme", "globex"} {
		tn, err := ts.CreateTenant(ctx, slug, slug)
		if err != nil {
			t.Fatal(err)
		}
		if slug == "acme" {
			f.acme = tn.ID
		} else {
			f.globex = tn.ID
		}
	}
	return f
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := switchboard.CodeOf(err); got != code {
		t.Fatalf("got %s (%v), want %s", got, err, code)
	}
}

// auditActions returns the tenant's member audit rows as
// "actor action subject", oldest first.
func (f *fixture) auditActions(t *testing.T, tenant switchboard.TenantID) []string {
	t.Helper()
	f.audit.Flush(context.Background())
	rows, err := f.rows.List(context.Background(), tenant, audit.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Tool == "members" {
			out = append(out, rows[i].Actor+" "+rows[i].Action+" "+rows[i].Subject)
		}
	}
	return out
}

func TestMembers(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		s := f.store

		owner, err := s.AddMember(ctx, members.ActorOperator, f.acme, "  Ann@Example.COM ", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		if owner.Email != "ann@example.com" || owner.Role != members.RoleOwner || !strings.HasPrefix(owner.UserID, "usr_") {
			t.Fatalf("added %+v", owner)
		}
		got, err := s.Member(ctx, f.acme, owner.UserID)
		if err != nil || got.Email != owner.Email || got.Role != members.RoleOwner || !got.CreatedAt.Equal(owner.CreatedAt) {
			t.Fatalf("Member = %+v, %v; want %+v", got, err, owner)
		}
		if got, err := s.MemberByEmail(ctx, f.acme, "ANN@example.com"); err != nil || got.UserID != owner.UserID {
			t.Fatalf("MemberByEmail = %+v, %v", got, err)
		}

		// Bad input is refused and writes nothing.
		for _, tc := range []struct {
			tenant switchboard.TenantID
			email  string
			role   members.Role
			code   string
		}{
			{f.acme, "ann@example.com", members.RoleMember, "member_exists"},
			{f.acme, "Ann <x@example.com>", members.RoleMember, "invalid_email"},
			{f.acme, "not an address", members.RoleMember, "invalid_email"},
			{f.acme, "", members.RoleMember, "invalid_email"},
			{f.acme, "bob@example.com", "root", "invalid_role"},
			{"ten_missing", "bob@example.com", members.RoleMember, "tenant_not_found"},
		} {
			_, err := s.AddMember(ctx, members.ActorOperator, tc.tenant, tc.email, tc.role)
			wantCode(t, err, tc.code)
		}
		if n := dbtest.Count(t, db, "members", ""); n != 1 {
			t.Fatalf("%d members after refused adds, want 1", n)
		}

		// The same email may be a member of another tenant; tenants do
		// not see each other's members.
		other, err := s.AddMember(ctx, members.ActorOperator, f.globex, "ann@example.com", members.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Member(ctx, f.acme, other.UserID)
		wantCode(t, err, "member_not_found")

		bob, err := s.AddMember(ctx, owner.UserID, f.acme, "bob@example.com", members.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.Members(ctx, f.acme)
		if err != nil || len(list) != 2 || list[0].UserID != owner.UserID || list[1].UserID != bob.UserID {
			t.Fatalf("Members = %+v, %v", list, err)
		}

		// The last owner can be neither demoted nor removed.
		_, err = s.SetRole(ctx, owner.UserID, f.acme, owner.UserID, members.RoleAdmin)
		wantCode(t, err, "last_owner")
		wantCode(t, s.RemoveMember(ctx, owner.UserID, f.acme, owner.UserID), "last_owner")
		if _, err := s.SetRole(ctx, owner.UserID, f.acme, bob.UserID, members.RoleOwner); err != nil {
			t.Fatal(err)
		}
		if m, err := s.SetRole(ctx, bob.UserID, f.acme, owner.UserID, members.RoleAdmin); err != nil || m.Role != members.RoleAdmin {
			t.Fatalf("demoting a second owner: %+v, %v", m, err)
		}
		_, err = s.SetRole(ctx, owner.UserID, f.acme, bob.UserID, "king")
		wantCode(t, err, "invalid_role")
		_, err = s.SetRole(ctx, owner.UserID, f.globex, bob.UserID, members.RoleMember)
		wantCode(t, err, "member_not_found")
		if err := s.RemoveMember(ctx, bob.UserID, f.acme, owner.UserID); err != nil {
			t.Fatal(err)
		}
		_, err = s.Member(ctx, f.acme, owner.UserID)
		wantCode(t, err, "member_not_found")

		want := []string{
			"operator member.add:owner " + owner.UserID,
			owner.UserID + " member.add:member " + bob.UserID,
			owner.UserID + " member.role:owner " + bob.UserID,
			bob.UserID + " member.role:admin " + owner.UserID,
			bob.UserID + " member.remove " + owner.UserID,
		}
		if got := f.auditActions(t, f.acme); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestInvitations(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		s := f.store

		inv, token, err := s.Invite(ctx, members.ActorOperator, f.acme, "Cat@Example.com", members.RoleOwner, 0)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Kind != members.KindInvite || inv.Email != "cat@example.com" || inv.ExpiresAt.Sub(inv.CreatedAt) != 24*time.Hour {
			t.Fatalf("invitation %+v", inv)
		}
		if !strings.HasPrefix(token.Reveal(), members.InvitationTokenPrefix) {
			t.Fatal("the token lacks its prefix")
		}
		if n := dbtest.Count(t, db, "member_invitations", "token_hash = $1", tenants.HashToken(token.Reveal())); n != 1 {
			t.Fatal("the token's hash is not stored")
		}
		if n := dbtest.Count(t, db, "member_invitations", "token_hash = $1", token.Reveal()); n != 0 {
			t.Fatal("the token itself is stored")
		}
		pending, err := s.Invitations(ctx, f.acme)
		if err != nil || len(pending) != 1 || pending[0].ID != inv.ID {
			t.Fatalf("Invitations = %+v, %v", pending, err)
		}

		m, err := s.Redeem(ctx, token.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		if m.Email != "cat@example.com" || m.Role != members.RoleOwner || m.Tenant != f.acme {
			t.Fatalf("redeemed into %+v", m)
		}
		// Single use: a replay is refused.
		_, err = s.Redeem(ctx, token.Reveal())
		wantCode(t, err, "invalid_link")
		_, err = s.Redeem(ctx, "sbi_guess")
		wantCode(t, err, "invalid_link")
		if pending, _ := s.Invitations(ctx, f.acme); len(pending) != 0 {
			t.Fatalf("a used invitation is still pending: %+v", pending)
		}

		// Inviting a member is a conflict; a sign-in link is the way.
		_, _, err = s.Invite(ctx, members.ActorOperator, f.acme, "cat@example.com", members.RoleMember, 0)
		wantCode(t, err, "member_exists")
		_, _, err = s.LoginLink(ctx, members.ActorOperator, f.acme, "nobody@example.com", 0)
		wantCode(t, err, "member_not_found")
		_, _, err = s.Invite(ctx, members.ActorOperator, f.acme, "dan@example.com", members.RoleMember, -time.Second)
		wantCode(t, err, "invalid_lifetime")
		_, _, err = s.Invite(ctx, members.ActorOperator, "ten_missing", "dan@example.com", members.RoleMember, 0)
		wantCode(t, err, "tenant_not_found")

		_, login, err := s.LoginLink(ctx, members.ActorOperator, f.acme, "CAT@example.com", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.Redeem(ctx, login.Reveal())
		if err != nil || again.UserID != m.UserID {
			t.Fatalf("login link signed in %+v, %v; want %s", again, err, m.UserID)
		}
		_, err = s.Redeem(ctx, login.Reveal())
		wantCode(t, err, "invalid_link")

		// Expiry: a link opened after its lifetime is refused, creates
		// nobody and is spent.
		_, late, err := s.Invite(ctx, members.ActorOperator, f.acme, "eve@example.com", members.RoleAdmin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Add(time.Hour)
		_, err = s.Redeem(ctx, late.Reveal())
		wantCode(t, err, "invalid_link")
		if _, err := s.MemberByEmail(ctx, f.acme, "eve@example.com"); switchboard.CodeOf(err) != "member_not_found" {
			t.Fatalf("an expired invitation created a member: %v", err)
		}
		if n := dbtest.Count(t, db, "member_invitations", "token_hash = $1 AND used_at IS NOT NULL", tenants.HashToken(late.Reveal())); n != 1 {
			t.Fatal("an expired link is not spent")
		}

		// A sign-in link of a member removed since is refused.
		_, link, err := s.LoginLink(ctx, members.ActorOperator, f.acme, "cat@example.com", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddMember(ctx, members.ActorOperator, f.acme, "fay@example.com", members.RoleOwner); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMember(ctx, members.ActorOperator, f.acme, m.UserID); err != nil {
			t.Fatal(err)
		}
		_, err = s.Redeem(ctx, link.Reveal())
		wantCode(t, err, "invalid_link")

		// Revoking an invitation makes it unusable, in its tenant only.
		revoked, rtoken, err := s.Invite(ctx, members.ActorOperator, f.acme, "gus@example.com", members.RoleMember, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.RevokeInvitation(ctx, members.ActorOperator, f.globex, revoked.ID), "invitation_not_found")
		if err := s.RevokeInvitation(ctx, members.ActorOperator, f.acme, revoked.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.Redeem(ctx, rtoken.Reveal())
		wantCode(t, err, "invalid_link")

		got := strings.Join(f.auditActions(t, f.acme), "\n")
		for _, want := range []string{
			"operator invitation.create:owner cat@example.com",
			"invitation:" + inv.ID + " member.add:owner " + m.UserID,
			m.UserID + " invite.redeem " + m.UserID,
			"operator login_link.create " + m.UserID,
			m.UserID + " login.redeem " + m.UserID,
			"operator invitation.revoke gus@example.com",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("audit rows lack %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, token.Reveal()) || strings.Contains(got, login.Reveal()) {
			t.Fatal("a token is in the audit log")
		}
	})
}

func TestSessions(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		s := f.store

		ann, err := s.AddMember(ctx, members.ActorOperator, f.acme, "ann@example.com", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		bob, err := s.AddMember(ctx, members.ActorOperator, f.acme, "bob@example.com", members.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.CreateSession(ctx, f.globex, ann.UserID)
		wantCode(t, err, "member_not_found")

		sess, token, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		if n := dbtest.Count(t, db, "member_sessions", "token_hash = $1", token.Reveal()); n != 0 {
			t.Fatal("the session token itself is stored")
		}
		got, err := s.ResolveSession(ctx, token.Reveal())
		if err != nil || got.ID != sess.ID || got.Tenant != f.acme || got.UserID != bob.UserID || got.Role != members.RoleMember || got.Stale {
			t.Fatalf("ResolveSession = %+v, %v", got, err)
		}
		for _, bad := range []string{"", "sbs_guess", strings.Repeat("x", 4096)} {
			_, err := s.ResolveSession(ctx, bad)
			wantCode(t, err, "invalid_session")
		}

		// Idle expiry (1 h here): use keeps the session alive...
		for range 3 {
			f.clock.Add(50 * time.Minute)
			if _, err := s.ResolveSession(ctx, token.Reveal()); err != nil {
				t.Fatalf("a session used every 50 minutes expired: %v", err)
			}
		}
		// ...and an hour without use ends it.
		f.clock.Add(time.Hour)
		_, err = s.ResolveSession(ctx, token.Reveal())
		wantCode(t, err, "invalid_session")

		// Absolute expiry (10 h here) ends even a busy session.
		_, busy, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			f.clock.Add(50 * time.Minute)
			_, err := s.ResolveSession(ctx, busy.Reveal())
			if i < 11 && err != nil {
				t.Fatalf("after %d min: %v", (i+1)*50, err)
			}
			if i == 11 {
				wantCode(t, err, "invalid_session")
			}
		}

		// A privilege change makes the session stale; rotating it gives a
		// new id and token, keeps the absolute expiry and ends the old one.
		old, oldToken, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetRole(ctx, ann.UserID, f.acme, bob.UserID, members.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		stale, err := s.ResolveSession(ctx, oldToken.Reveal())
		if err != nil || !stale.Stale || stale.Role != members.RoleAdmin {
			t.Fatalf("after a role change: %+v, %v; want a stale admin session", stale, err)
		}
		rotated, newToken, err := s.RotateSession(ctx, oldToken.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		if rotated.ID == old.ID || newToken.Reveal() == oldToken.Reveal() || !rotated.ExpiresAt.Equal(old.ExpiresAt) || rotated.Role != members.RoleAdmin {
			t.Fatalf("rotated %+v from %+v", rotated, old)
		}
		_, err = s.ResolveSession(ctx, oldToken.Reveal())
		wantCode(t, err, "invalid_session")
		if cur, err := s.ResolveSession(ctx, newToken.Reveal()); err != nil || cur.Stale {
			t.Fatalf("the rotated session: %+v, %v", cur, err)
		}
		_, _, err = s.RotateSession(ctx, oldToken.Reveal())
		wantCode(t, err, "invalid_session")

		// Sign-out ends one session; sign-out everywhere ends the rest.
		_, second, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		live, err := s.Sessions(ctx, f.acme, bob.UserID)
		if err != nil || len(live) != 2 {
			t.Fatalf("Sessions = %+v, %v; want 2", live, err)
		}
		if err := s.SignOut(ctx, newToken.Reveal()); err != nil {
			t.Fatal(err)
		}
		if err := s.SignOut(ctx, "sbs_unknown"); err != nil {
			t.Fatalf("signing out an unknown session: %v", err)
		}
		_, err = s.ResolveSession(ctx, newToken.Reveal())
		wantCode(t, err, "invalid_session")
		if _, err := s.ResolveSession(ctx, second.Reveal()); err != nil {
			t.Fatalf("signing out one session ended another: %v", err)
		}
		_, third, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.RevokeSessions(ctx, bob.UserID, f.acme, bob.UserID); err != nil || n != 4 {
			// second and third, and the two expired above.
			t.Fatalf("RevokeSessions = %d, %v; want 4", n, err)
		}
		for _, tok := range []string{second.Reveal(), third.Reveal()} {
			_, err = s.ResolveSession(ctx, tok)
			wantCode(t, err, "invalid_session")
		}

		// Revoking one session by id, scoped to its tenant.
		one, oneToken, err := s.CreateSession(ctx, f.acme, ann.UserID)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.RevokeSession(ctx, members.ActorOperator, f.globex, one.ID), "session_not_found")
		if err := s.RevokeSession(ctx, members.ActorOperator, f.acme, one.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.ResolveSession(ctx, oneToken.Reveal())
		wantCode(t, err, "invalid_session")

		// Removing a member ends their sessions.
		_, last, err := s.CreateSession(ctx, f.acme, bob.UserID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMember(ctx, ann.UserID, f.acme, bob.UserID); err != nil {
			t.Fatal(err)
		}
		_, err = s.ResolveSession(ctx, last.Reveal())
		wantCode(t, err, "invalid_session")

		got2 := strings.Join(f.auditActions(t, f.acme), "\n")
		for _, want := range []string{
			bob.UserID + " session.create " + bob.UserID,
			bob.UserID + " session.rotate:admin " + bob.UserID,
			bob.UserID + " session.revoke " + bob.UserID,
			bob.UserID + " session.revoke_all " + bob.UserID,
			"operator session.revoke " + ann.UserID,
		} {
			if !strings.Contains(got2, want) {
				t.Errorf("audit rows lack %q:\n%s", want, got2)
			}
		}
	})
}

func TestCSRFToken(t *testing.T) {
	a, b := members.CSRFToken("sbs_a"), members.CSRFToken("sbs_b")
	if a == b || a != members.CSRFToken("sbs_a") || strings.Contains(a, "sbs_a") {
		t.Fatalf("CSRF tokens %q %q: want distinct, stable, not the session token", a, b)
	}
}
