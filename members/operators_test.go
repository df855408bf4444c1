package members_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// TestOperatorSessions checks the operator's browser door on both stores:
// a link works once and within its lifetime only (an expired one is spent
// too), its session has no tenant and is not a member's session, it ends
// after idle time, at its absolute expiry, at sign-out and at sign-out
// everywhere, and each step is audited with its actor and subject.
func TestOperatorSessions(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		s := f.store
		for _, ttl := range []time.Duration{-time.Second, members.MaxOperatorLinkLifetime + time.Second} {
			_, _, err := s.CreateOperatorLink(ctx, "operator", ttl)
			wantCode(t, err, "invalid_lifetime")
		}
		link, token, err := s.CreateOperatorLink(ctx, "cli", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(token.Reveal(), members.OperatorLinkTokenPrefix) || !link.ExpiresAt.Equal(link.CreatedAt.Add(members.DefaultOperatorLinkLifetime)) {
			t.Fatalf("link %+v", link)
		}
		// A member's link token is not an operator link, nor the reverse.
		_, _, err = s.RedeemOperatorLink(ctx, "sbi_"+strings.TrimPrefix(token.Reveal(), members.OperatorLinkTokenPrefix))
		wantCode(t, err, "invalid_link")
		_, err = s.Redeem(ctx, token.Reveal())
		wantCode(t, err, "invalid_link")

		sess, cookie, err := s.RedeemOperatorLink(ctx, token.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		if !sess.Operator || sess.Tenant != "" || sess.UserID != members.ActorOperator || !members.IsOperatorSession(cookie.Reveal()) {
			t.Fatalf("operator session %+v", sess)
		}
		_, _, err = s.RedeemOperatorLink(ctx, token.Reveal())
		wantCode(t, err, "invalid_link") // single use
		if _, err := s.ResolveSession(ctx, cookie.Reveal()); err == nil {
			t.Fatal("the operator session resolves as a member's session")
		}
		if got, err := s.ResolveOperatorSession(ctx, cookie.Reveal()); err != nil || got.ID != sess.ID || !got.Operator {
			t.Fatalf("resolving: %+v, %v", got, err)
		}

		// Expired: refused, and spent.
		_, late, err := s.CreateOperatorLink(ctx, "operator", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Add(time.Minute)
		_, _, err = s.RedeemOperatorLink(ctx, late.Reveal())
		wantCode(t, err, "invalid_link")
		f.clock.Add(-time.Minute)
		_, _, err = s.RedeemOperatorLink(ctx, late.Reveal())
		wantCode(t, err, "invalid_link")

		// Idle: used within the idle time it lives on; unused for the idle
		// time (1 h in the fixture) it ends.
		f.clock.Add(50 * time.Minute)
		if _, err := s.ResolveOperatorSession(ctx, cookie.Reveal()); err != nil {
			t.Fatal(err)
		}
		f.clock.Add(50 * time.Minute)
		if _, err := s.ResolveOperatorSession(ctx, cookie.Reveal()); err != nil {
			t.Fatalf("a session used 50 minutes ago: %v", err)
		}
		f.clock.Add(time.Hour)
		_, err = s.ResolveOperatorSession(ctx, cookie.Reveal())
		wantCode(t, err, "invalid_session")

		// Absolute: 10 h in the fixture, however busy.
		_, t2, _ := s.CreateOperatorLink(ctx, "operator", 0)
		_, busy, err := s.RedeemOperatorLink(ctx, t2.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			f.clock.Add(59 * time.Minute)
			if _, err := s.ResolveOperatorSession(ctx, busy.Reveal()); err != nil {
				t.Fatalf("a busy session before its absolute expiry: %v", err)
			}
		}
		f.clock.Add(11 * time.Minute)
		_, err = s.ResolveOperatorSession(ctx, busy.Reveal())
		wantCode(t, err, "invalid_session")

		// Sign-out, and sign-out everywhere.
		var live []string
		for range 3 {
			_, tok, _ := s.CreateOperatorLink(ctx, "operator", 0)
			_, c, err := s.RedeemOperatorLink(ctx, tok.Reveal())
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, c.Reveal())
		}
		if err := s.SignOut(ctx, live[0]); err != nil {
			t.Fatal(err)
		}
		_, err = s.ResolveOperatorSession(ctx, live[0])
		wantCode(t, err, "invalid_session")
		// Two live, and the two that expired above without being revoked.
		if n, err := s.RevokeOperatorSessions(ctx, "operator"); err != nil || n != 4 {
			t.Fatalf("revoking every operator session: %d, %v", n, err)
		}
		for _, c := range live[1:] {
			_, err = s.ResolveOperatorSession(ctx, c)
			wantCode(t, err, "invalid_session")
		}

		got := strings.Join(f.auditActions(t, ""), "\n")
		for _, want := range []string{
			"cli operator_link.create " + link.ID,
			"cli operator_session.create:" + link.ID + " " + sess.ID,
			"operator operator_session.revoke ",
			"operator operator_session.revoke_all operator",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("audit lacks %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, token.Reveal()) || strings.Contains(got, cookie.Reveal()) {
			t.Error("a token is in the audit rows")
		}
	})
}

// TestFirstStartLink checks the first start's operator sign-in link on
// both stores: minted once per store (a second call, as a restart or a
// replica makes, mints nothing, whether the first is used or not), valid
// for FirstStartLinkLifetime and not a second more, single use, and
// audited without its token.
func TestFirstStartLink(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		s := f.store
		link, token, err := s.FirstStartLink(ctx, "serve")
		if err != nil || token.IsZero() {
			t.Fatalf("first start: %+v, %v", link, err)
		}
		if link.ID != members.FirstStartLinkID || !link.ExpiresAt.Equal(link.CreatedAt.Add(members.FirstStartLinkLifetime)) ||
			!members.IsOperatorLink(token.Reveal()) {
			t.Fatalf("first start's link %+v", link)
		}
		if _, again, err := s.FirstStartLink(ctx, "serve"); err != nil || !again.IsZero() {
			t.Fatalf("a second first start minted a link (%v)", err)
		}
		// A minted link does not stop the first start's from working.
		if _, _, err := s.CreateOperatorLink(ctx, "cli", 0); err != nil {
			t.Fatal(err)
		}
		f.clock.Add(members.FirstStartLinkLifetime - time.Second)
		if _, _, err := s.RedeemOperatorLink(ctx, token.Reveal()); err != nil {
			t.Fatalf("the first start's link a second before its end: %v", err)
		}
		_, _, err = s.RedeemOperatorLink(ctx, token.Reveal())
		wantCode(t, err, "invalid_link")
		if _, again, err := s.FirstStartLink(ctx, "serve"); err != nil || !again.IsZero() {
			t.Fatalf("a start after the link was used minted another (%v)", err)
		}

		// Unused, it ends with its lifetime.
		g := newFixture(t, dbtest.SQLite(t))
		_, late, err := g.store.FirstStartLink(ctx, "serve")
		if err != nil {
			t.Fatal(err)
		}
		g.clock.Add(members.FirstStartLinkLifetime)
		_, _, err = g.store.RedeemOperatorLink(ctx, late.Reveal())
		wantCode(t, err, "invalid_link")

		got := strings.Join(f.auditActions(t, ""), "\n")
		if !strings.Contains(got, "serve operator_link.create "+members.FirstStartLinkID) || strings.Count(got, members.FirstStartLinkID) != 2 {
			t.Errorf("audit of the first start's link (created once, used once):\n%s", got)
		}
		if strings.Contains(got, token.Reveal()) {
			t.Error("the link's token is in the audit rows")
		}
	})
}
