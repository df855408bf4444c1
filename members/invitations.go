package members

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// InvitationTokenPrefix starts every invitation and sign-in link token, so
// that a leaked one is recognisable by secret scanners.
const InvitationTokenPrefix = "sbi_"

// Kinds of invitation.
const (
	// KindInvite makes its email a member with its role when used.
	KindInvite = "invite"
	// KindLogin signs an existing member in.
	KindLogin = "login"
)

// Invitation is the record of an invitation or a one-time sign-in link;
// its token is never stored, only its SHA-256.
type Invitation struct {
	ID     string               `json:"id"`
	Tenant switchboard.TenantID `json:"tenant_id"`
	// Kind is KindInvite or KindLogin.
	Kind  string `json:"kind"`
	Email string `json:"email"`
	// Role is the role an invitation grants; empty for a sign-in link.
	Role      Role       `json:"role,omitempty"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
}

// errInvalidLink is the one answer to a link that is unknown, used or
// expired, so that a guess learns nothing.
var errInvalidLink = switchboard.E(switchboard.ErrUnauthorized, "invalid_link",
	"the sign-in link is not valid: it was used already, has expired or never existed; ask for a new one")

func (s *Store) lifetime(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return s.opts.InvitationLifetime, nil
	case ttl < 0 || ttl > MaxInvitationLifetime:
		return 0, switchboard.E(switchboard.ErrInvalid, "invalid_lifetime",
			"a link's lifetime is between 1s and %s", MaxInvitationLifetime)
	}
	return ttl, nil
}

// Invite creates an invitation of email to the tenant with role, usable
// once within ttl (0: the store's default, 24 h), and returns it with its
// token, which is shown once. Inviting an email that is already a member
// fails with member_exists (send them a sign-in link instead).
func (s *Store) Invite(ctx context.Context, actor string, tenant switchboard.TenantID, email string, role Role, ttl time.Duration) (Invitation, secrets.Secret, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	if _, err := s.memberByEmail(ctx, s.db, tenant, email); err == nil {
		return Invitation{}, secrets.Secret{}, switchboard.E(switchboard.ErrConflict, "member_exists",
			"%s is already a member of the tenant; send a sign-in link instead", email)
	} else if switchboard.CodeOf(err) != "member_not_found" {
		return Invitation{}, secrets.Secret{}, err
	}
	inv, token, err := s.insertInvitation(ctx, actor, tenant, KindInvite, email, role, ttl)
	if err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	s.record(tenant, actor, email, "invitation.create:"+string(role))
	return inv, token, nil
}

// LoginLink creates a one-time sign-in link for the tenant's member with
// email, usable once within ttl (0: the store's default), and returns it
// with its token, shown once. An email that is not a member fails with
// member_not_found.
func (s *Store) LoginLink(ctx context.Context, actor string, tenant switchboard.TenantID, email string, ttl time.Duration) (Invitation, secrets.Secret, error) {
	m, err := s.MemberByEmail(ctx, tenant, email)
	if err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	inv, token, err := s.insertInvitation(ctx, actor, tenant, KindLogin, m.Email, "", ttl)
	if err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	s.record(tenant, actor, m.UserID, "login_link.create")
	return inv, token, nil
}

func (s *Store) insertInvitation(ctx context.Context, actor string, tenant switchboard.TenantID, kind, email string, role Role, ttl time.Duration) (Invitation, secrets.Secret, error) {
	ttl, err := s.lifetime(ttl)
	if err != nil {
		return Invitation{}, secrets.Secret{}, err
	}
	now := s.now()
	inv := Invitation{ID: switchboard.NewID("inv_"), Tenant: tenant, Kind: kind, Email: email, Role: role,
		CreatedBy: clip(actor), CreatedAt: now, ExpiresAt: now.Add(ttl)}
	token := tenants.NewToken(InvitationTokenPrefix)
	_, err = s.db.ExecContext(ctx, `INSERT INTO member_invitations
		(id, tenant_id, kind, email, role, token_hash, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		inv.ID, string(tenant), kind, email, string(role), tenants.HashToken(token), inv.CreatedBy, now, inv.ExpiresAt)
	if err != nil {
		return Invitation{}, secrets.Secret{}, tenantOrWrapped(err, tenant, "storing the invitation")
	}
	return inv, secrets.New(token), nil
}

// Redeem uses the invitation or sign-in link of token, once: an
// invitation makes its email a member (or, if it became one meanwhile,
// signs them in with the role they have); a sign-in link signs its member
// in. It returns the member to start a session for. A token that is
// unknown, used or expired fails with invalid_link, and a used token is
// spent even when it had expired.
func (s *Store) Redeem(ctx context.Context, token string) (Member, error) {
	if token == "" || len(token) > maxToken {
		return Member{}, errInvalidLink
	}
	var (
		inv    Invitation
		m      Member
		joined bool
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		var tenant, role string
		err := tx.QueryRowContext(ctx, `UPDATE member_invitations SET used_at = $1
			WHERE token_hash = $2 AND used_at IS NULL
			RETURNING id, tenant_id, kind, email, role, expires_at`, now, tenants.HashToken(token)).
			Scan(&inv.ID, &tenant, &inv.Kind, &inv.Email, &role, &inv.ExpiresAt)
		if errors.Is(err, sql.ErrNoRows) {
			return errInvalidLink
		}
		if err != nil {
			return fmt.Errorf("using the sign-in link: %w", err)
		}
		inv.Tenant, inv.Role = switchboard.TenantID(tenant), Role(role)
		if !now.Before(inv.ExpiresAt) {
			return errExpiredLink
		}
		m, err = s.memberByEmail(ctx, tx, inv.Tenant, inv.Email)
		switch {
		case err == nil:
			return nil
		case switchboard.CodeOf(err) != "member_not_found":
			return err
		case inv.Kind != KindInvite:
			return errInvalidLink // the member was removed after the link was made
		}
		joined = true
		m, err = s.addMember(ctx, tx, inv.Tenant, inv.Email, inv.Role)
		return err
	})
	if errors.Is(err, errExpiredLink) {
		// The link is spent: commit its use, answer as for any bad link.
		_, _ = s.db.ExecContext(ctx, `UPDATE member_invitations SET used_at = $1 WHERE id = $2`, s.now(), inv.ID)
		return Member{}, errInvalidLink
	}
	if err != nil {
		return Member{}, err
	}
	if joined {
		s.record(inv.Tenant, "invitation:"+inv.ID, m.UserID, "member.add:"+string(m.Role))
	}
	s.record(inv.Tenant, m.UserID, m.UserID, inv.Kind+".redeem")
	return m, nil
}

// errExpiredLink rolls back Redeem's transaction for an expired link.
var errExpiredLink = errors.New("expired sign-in link")

// maxToken bounds what is hashed from a request.
const maxToken = 512

// Invitations lists the tenant's invitations and sign-in links that are
// neither used nor expired, newest first.
func (s *Store) Invitations(ctx context.Context, tenant switchboard.TenantID) ([]Invitation, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]Invitation, string, error) {
		return s.InvitationsPage(ctx, tenant, q)
	})
}

// InvitationsPage returns one page of the tenant's invitations and sign-in
// links that are neither used nor expired, newest first, and the cursor
// of the next page.
func (s *Store) InvitationsPage(ctx context.Context, tenant switchboard.TenantID, q switchboard.PageQuery) ([]Invitation, string, error) {
	return database.Page(ctx, s.db, "invitations:"+string(tenant), database.NewestFirst, q,
		`SELECT id, kind, email, role, created_by, created_at, expires_at
		FROM member_invitations WHERE tenant_id = $1 AND used_at IS NULL AND expires_at > $2`, []any{string(tenant), s.now()},
		func(row database.Row) (Invitation, error) {
			inv := Invitation{Tenant: tenant}
			var role string
			err := row.Scan(&inv.ID, &inv.Kind, &inv.Email, &role, &inv.CreatedBy, &inv.CreatedAt, &inv.ExpiresAt)
			inv.Role, inv.CreatedAt, inv.ExpiresAt = Role(role), inv.CreatedAt.UTC(), inv.ExpiresAt.UTC()
			return inv, err
		},
		func(inv Invitation) []any { return []any{inv.CreatedAt, inv.ID} })
}

// RevokeInvitation makes the tenant's unused invitation or link with id
// unusable; invitation_not_found when there is none.
func (s *Store) RevokeInvitation(ctx context.Context, actor string, tenant switchboard.TenantID, id string) error {
	email, err := s.revokeOne(ctx, `UPDATE member_invitations SET used_at = $1
		WHERE tenant_id = $2 AND id = $3 AND used_at IS NULL RETURNING email`, tenant, id,
		switchboard.E(switchboard.ErrNotFound, "invitation_not_found", "no unused invitation %q", clip(id)))
	if err != nil {
		return err
	}
	s.record(tenant, actor, email, "invitation.revoke")
	return nil
}

// revokeOne runs query, an UPDATE of the tenant's row id that sets $1 to
// now and returns one column, and returns that column, or notFound when
// no row matched.
func (s *Store) revokeOne(ctx context.Context, query string, tenant switchboard.TenantID, id string, notFound error) (string, error) {
	var subject string
	err := s.db.QueryRowContext(ctx, query, s.now(), string(tenant), id).Scan(&subject)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound
	}
	if err != nil {
		return "", fmt.Errorf("revoking %s: %w", clip(id), err)
	}
	return subject, nil
}
