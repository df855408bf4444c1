package members

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// Identity is the proven identity a session was signed in with: the
// issuer and subject of a verified OpenID Connect ID token. The zero
// Identity is a session signed in with a one-time link or invitation,
// which proves only that its bearer held the link: the link's token is
// shown to whoever created it, so it says nothing about who the person
// is beyond this one member row.
//
// A member row is bound to the Identity of its first OpenID Connect
// sign-in, and keeps it. The tenant picker lets a session switch only to
// a member row bound to the session's own Identity: a row that the same
// identity provider account signed in to before, in another tenant.
// Emails alone never link tenants (an admin of one tenant can invite any
// email and open the invitation link themself).
type Identity struct {
	// Issuer is the ID token's iss, Subject its sub.
	Issuer, Subject string
}

// Proven reports an OpenID Connect identity (not a one-time link).
func (i Identity) Proven() bool { return i.Issuer != "" && i.Subject != "" }

// maxIdentity bounds an issuer or subject (OpenID Connect: sub is at
// most 255 ASCII characters).
const maxIdentity = 512

// Picker is what the tenant picker shows a session.
type Picker struct {
	// Proven reports a session signed in with an OpenID Connect identity;
	// a one-time link's session is shown no other tenant.
	Proven bool
	// Switch lists the other tenants whose member row is bound to the
	// session's identity: the session may switch to them (SwitchSession).
	Switch []Membership
	// SignInNeeded lists the other tenants with a member of the session's
	// verified email whose row is not bound to this identity (it joined by
	// an invitation link, or signed in with another account): whoever
	// held that link may have used it, so a switch is refused and the
	// person signs in there directly.
	SignInNeeded []Membership
}

var (
	errSwitchRefused = switchboard.E(switchboard.ErrForbidden, "switch_refused",
		"you cannot switch to that tenant from this session: it has no member signed in with your identity provider account; sign in to it directly")
	errSwitchLink = switchboard.E(switchboard.ErrForbidden, "switch_refused",
		"this session was signed in with a one-time link, which proves nothing about your other tenants: open a sign-in link of the other tenant, or sign in with your identity provider")
)

// CreateSessionAs starts a session, as CreateSession, signed in with id
// (an OpenID Connect identity). It binds the member row to id when the
// row has no identity yet; a row bound to another identity keeps its
// own (the session still signs in, by its verified email, but the picker
// will not treat that row as this identity's).
func (s *Store) CreateSessionAs(ctx context.Context, tenant switchboard.TenantID, userID string, id Identity) (Session, secrets.Secret, error) {
	if !id.Proven() || len(id.Issuer) > maxIdentity || len(id.Subject) > maxIdentity {
		return Session{}, secrets.Secret{}, switchboard.E(switchboard.ErrInvalid, "invalid_identity", "the sign-in's identity is not usable")
	}
	var (
		sess  Session
		token secrets.Secret
		bound bool
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		m, err := s.lockMember(ctx, tx, tenant, userID)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE members SET oidc_issuer = $1, oidc_subject = $2
			WHERE tenant_id = $3 AND user_id = $4 AND oidc_subject = ''`, id.Issuer, id.Subject, string(tenant), userID)
		if err != nil {
			return fmt.Errorf("binding the member's identity: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("binding the member's identity: %w", err)
		}
		bound = n == 1
		now := s.now()
		sess, token, err = s.insertSession(ctx, tx, m, id, now, now.Add(s.opts.SessionMax))
		return err
	})
	if err != nil {
		return Session{}, secrets.Secret{}, err
	}
	if bound {
		s.record(tenant, userID, userID, "member.identity_bind")
	}
	s.record(tenant, userID, userID, "session.create")
	return sess, token, nil
}

// Picker returns what the tenant picker shows sess: nothing for a
// one-time link's session; for an OpenID Connect session, the other
// tenants whose member row is bound to its identity (Switch) and, when
// the session's own member row is bound to it (so that its email is the
// one the identity provider verified), the other tenants with a member
// of that email not bound to it (SignInNeeded).
func (s *Store) Picker(ctx context.Context, sess Session) (Picker, error) {
	p := Picker{Proven: sess.Identity.Proven(), Switch: []Membership{}, SignInNeeded: []Membership{}}
	if !p.Proven {
		return p, nil
	}
	id := sess.Identity
	var err error
	if p.Switch, err = s.memberships(ctx, `m.oidc_issuer = $1 AND m.oidc_subject = $2 AND m.tenant_id <> $3`,
		id.Issuer, id.Subject, string(sess.Tenant)); err != nil {
		return Picker{}, err
	}
	var email string
	err = s.db.QueryRowContext(ctx, `SELECT email FROM members WHERE tenant_id = $1 AND user_id = $2 AND oidc_issuer = $3 AND oidc_subject = $4`,
		string(sess.Tenant), sess.UserID, id.Issuer, id.Subject).Scan(&email)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return p, nil
	case err != nil:
		return Picker{}, fmt.Errorf("loading the session's member: %w", err)
	}
	p.SignInNeeded, err = s.memberships(ctx, `m.email = $1 AND m.tenant_id <> $2 AND NOT (m.oidc_issuer = $3 AND m.oidc_subject = $4)`,
		email, string(sess.Tenant), id.Issuer, id.Subject)
	if err != nil {
		return Picker{}, err
	}
	return p, nil
}

// SwitchSession ends the live session of token and starts one in tenant
// for the member row bound to the same identity, without a new sign-in:
// the new session has a new id and token, the target member's current
// role, the same identity and the old session's absolute expiry (a
// switch never extends a sign-in). It fails with switch_refused, changing
// nothing, for a one-time link's session and for a tenant without a
// member bound to the session's identity (whether or not the tenant
// exists, so that a refusal tells nothing about other tenants), and with
// invalid_session for a session that is not live.
func (s *Store) SwitchSession(ctx context.Context, token string, tenant switchboard.TenantID) (Session, secrets.Secret, error) {
	old, sess, fresh, err := s.replaceSession(ctx, token, func(tx *sql.Tx, old Session) (Member, error) {
		if !old.Identity.Proven() {
			return Member{}, errSwitchLink
		}
		if tenant == old.Tenant {
			return Member{}, errSwitchRefused
		}
		m, err := scanMember(tx.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM members
			WHERE tenant_id = $1 AND oidc_issuer = $2 AND oidc_subject = $3`+s.db.Dialect.LockRow(),
			string(tenant), old.Identity.Issuer, old.Identity.Subject))
		if errors.Is(err, sql.ErrNoRows) {
			return Member{}, errSwitchRefused
		}
		if err != nil {
			return Member{}, fmt.Errorf("loading the member to switch to: %w", err)
		}
		return m, nil
	})
	if err != nil {
		return Session{}, secrets.Secret{}, err
	}
	// Each tenant's row names only its own member: neither tenant's audit
	// log learns the other tenant.
	s.record(old.Tenant, old.UserID, old.UserID, "session.switch_out")
	s.record(sess.Tenant, sess.UserID, sess.UserID, "session.switch_in")
	return sess, fresh, nil
}
