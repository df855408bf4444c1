package members

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// SessionTokenPrefix starts every session token (the cookie's value).
const SessionTokenPrefix = "sbs_"

// SessionTouchInterval is how often, at most, a session's last use is
// written: idle expiry is exact to within it.
const SessionTouchInterval = time.Minute

// Session is a signed-in member's session: what a handler needs to act
// for them. Its token is never stored, only its SHA-256.
type Session struct {
	// ID names the session (to list or revoke it); it is not the token.
	ID     string               `json:"id"`
	Tenant switchboard.TenantID `json:"tenant_id"`
	UserID string               `json:"user_id"`
	// Role is the member's current role.
	Role       Role      `json:"role"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	// ExpiresAt is the absolute end of the session.
	ExpiresAt time.Time `json:"expires_at"`
	// Stale reports that the member's role changed since the session was
	// issued: rotate it (RotateSession) before acting on it, so that a
	// privilege change always comes with a new session token.
	Stale bool `json:"-"`
	// Identity is what the session was signed in with: an OpenID Connect
	// identity, or none (a one-time link). See identity.go.
	Identity Identity `json:"-"`
	// Operator marks the platform operator's session (operators.go): no
	// tenant, no role, UserID ActorOperator.
	Operator bool `json:"operator,omitempty"`
}

// errInvalidSession is the one answer to a session token that is unknown,
// revoked or expired.
var errInvalidSession = switchboard.E(switchboard.ErrUnauthorized, "invalid_session",
	"the session is not valid (signed out, expired or revoked): sign in again")

// CSRFToken returns the anti-forgery token of a session token: derived
// from it by a one-way function, so a page that knows the session cookie's
// value (only the server and the browser do) can compute it and a
// cross-site page cannot.
func CSRFToken(sessionToken string) string {
	h := sha256.Sum256([]byte("switchboard csrf\x00" + sessionToken))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// CreateSession starts a session for the tenant's member userID and
// returns it with its token, to be set as a cookie; member_not_found when
// there is no such member.
func (s *Store) CreateSession(ctx context.Context, tenant switchboard.TenantID, userID string) (Session, secrets.Secret, error) {
	var (
		sess  Session
		token secrets.Secret
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		m, err := s.lockMember(ctx, tx, tenant, userID)
		if err != nil {
			return err
		}
		now := s.now()
		sess, token, err = s.insertSession(ctx, tx, m, Identity{}, now, now.Add(s.opts.SessionMax))
		return err
	})
	if err != nil {
		return Session{}, secrets.Secret{}, err
	}
	s.record(tenant, userID, userID, "session.create")
	return sess, token, nil
}

func (s *Store) insertSession(ctx context.Context, q database.Querier, m Member, id Identity, now, expires time.Time) (Session, secrets.Secret, error) {
	sess := Session{ID: switchboard.NewID("ses_"), Tenant: m.Tenant, UserID: m.UserID, Role: m.Role,
		CreatedAt: now, LastSeenAt: now, ExpiresAt: expires, Identity: id}
	token := tenants.NewToken(SessionTokenPrefix)
	if _, err := q.ExecContext(ctx, `INSERT INTO member_sessions
		(id, tenant_id, user_id, role, token_hash, created_at, last_seen_at, expires_at, oidc_issuer, oidc_subject)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		sess.ID, string(m.Tenant), m.UserID, string(m.Role), tenants.HashToken(token), now, now, expires, id.Issuer, id.Subject); err != nil {
		return Session{}, secrets.Secret{}, fmt.Errorf("storing the session: %w", err)
	}
	return sess, secrets.New(token), nil
}

const sessionColumns = `s.id, s.tenant_id, s.user_id, s.role, m.role, s.created_at, s.last_seen_at, s.expires_at, s.revoked_at,
	s.oidc_issuer, s.oidc_subject`

func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var (
		sess                 Session
		tenant, issued, role string
		revoked              sql.NullTime
	)
	if err := row.Scan(&sess.ID, &tenant, &sess.UserID, &issued, &role, &sess.CreatedAt, &sess.LastSeenAt, &sess.ExpiresAt, &revoked,
		&sess.Identity.Issuer, &sess.Identity.Subject); err != nil {
		return Session{}, err
	}
	if revoked.Valid {
		return Session{}, errInvalidSession
	}
	sess.Tenant, sess.Role, sess.Stale = switchboard.TenantID(tenant), Role(role), issued != role
	sess.CreatedAt, sess.LastSeenAt, sess.ExpiresAt = sess.CreatedAt.UTC(), sess.LastSeenAt.UTC(), sess.ExpiresAt.UTC()
	return sess, nil
}

// live reports whether sess is within both its absolute and idle expiry.
func (s *Store) live(sess Session, now time.Time) bool {
	return now.Before(sess.ExpiresAt) && now.Before(sess.LastSeenAt.Add(s.opts.SessionIdle))
}

// ResolveSession returns the live session of token, with its member's
// current role, and records its use (at most once per
// SessionTouchInterval). It reads the store on every call, so a session
// revoked or a member removed on any replica is refused at once. A token
// that is unknown, revoked, idle too long or past its absolute expiry
// fails with invalid_session. When the session is Stale, rotate it.
func (s *Store) ResolveSession(ctx context.Context, token string) (Session, error) {
	if token == "" || len(token) > maxToken {
		return Session{}, errInvalidSession
	}
	sess, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionColumns+`
		FROM member_sessions s JOIN members m ON m.tenant_id = s.tenant_id AND m.user_id = s.user_id
		WHERE s.token_hash = $1`, tenants.HashToken(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, errInvalidSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("loading session: %w", err)
	}
	now := s.now()
	if !s.live(sess, now) {
		return Session{}, errInvalidSession
	}
	if now.Sub(sess.LastSeenAt) >= SessionTouchInterval {
		if _, err := s.db.ExecContext(ctx, `UPDATE member_sessions SET last_seen_at = $1 WHERE id = $2`, now, sess.ID); err != nil {
			return Session{}, fmt.Errorf("recording session use: %w", err)
		}
		sess.LastSeenAt = now
	}
	return sess, nil
}

// RotateSession replaces the live session of token with a new one (new id
// and token, the member's current role, the same absolute expiry) and
// revokes the old one; the caller sets the new token as the cookie. Use
// it when a session is Stale (a privilege change).
func (s *Store) RotateSession(ctx context.Context, token string) (Session, secrets.Secret, error) {
	_, sess, fresh, err := s.replaceSession(ctx, token, func(_ *sql.Tx, old Session) (Member, error) {
		return Member{Tenant: old.Tenant, UserID: old.UserID, Role: old.Role}, nil
	})
	if err != nil {
		return Session{}, secrets.Secret{}, err
	}
	s.record(sess.Tenant, sess.UserID, sess.UserID, "session.rotate:"+string(sess.Role))
	return sess, fresh, nil
}

// replaceSession ends the live session of token and starts one, in one
// transaction, for the member that next returns given the old session
// (an error from next changes nothing), with the old session's identity
// and absolute expiry. It returns the old and the new session and the
// new token.
func (s *Store) replaceSession(ctx context.Context, token string, next func(tx *sql.Tx, old Session) (Member, error)) (Session, Session, secrets.Secret, error) {
	if token == "" || len(token) > maxToken {
		return Session{}, Session{}, secrets.Secret{}, errInvalidSession
	}
	var (
		old, sess Session
		fresh     secrets.Secret
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var (
			now time.Time
			err error
		)
		if old, now, err = s.lockLiveSession(ctx, tx, token); err != nil {
			return err
		}
		m, err := next(tx, old)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE member_sessions SET revoked_at = $1 WHERE id = $2`, now, old.ID); err != nil {
			return fmt.Errorf("revoking the old session: %w", err)
		}
		sess, fresh, err = s.insertSession(ctx, tx, m, old.Identity, now, old.ExpiresAt)
		return err
	})
	if err != nil {
		return Session{}, Session{}, secrets.Secret{}, err
	}
	return old, sess, fresh, nil
}

// lockLiveSession loads the live session of token inside tx, locking its
// row, and returns it with the time it was read at; invalid_session when
// it is unknown, revoked or expired.
func (s *Store) lockLiveSession(ctx context.Context, tx *sql.Tx, token string) (Session, time.Time, error) {
	sess, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+`
		FROM member_sessions s JOIN members m ON m.tenant_id = s.tenant_id AND m.user_id = s.user_id
		WHERE s.token_hash = $1`+s.db.Dialect.LockRow(), tenants.HashToken(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, time.Time{}, errInvalidSession
	}
	if err != nil {
		return Session{}, time.Time{}, fmt.Errorf("loading session: %w", err)
	}
	now := s.now()
	if !s.live(sess, now) {
		return Session{}, time.Time{}, errInvalidSession
	}
	return sess, now, nil
}

// SignOut revokes the session of token (sign-out of this browser), a
// member's or the operator's. An invalid token is not an error: the
// browser is signed out either way.
func (s *Store) SignOut(ctx context.Context, token string) error {
	if token == "" || len(token) > maxToken {
		return nil
	}
	if IsOperatorSession(token) {
		return s.signOutOperator(ctx, token)
	}
	var tenant, userID string
	err := s.db.QueryRowContext(ctx, `UPDATE member_sessions SET revoked_at = $1
		WHERE token_hash = $2 AND revoked_at IS NULL RETURNING tenant_id, user_id`, s.now(), tenants.HashToken(token)).Scan(&tenant, &userID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signing out: %w", err)
	}
	s.record(switchboard.TenantID(tenant), userID, userID, "session.revoke")
	return nil
}

// RevokeSession revokes the tenant's session with id (not its token);
// session_not_found when there is no live one.
func (s *Store) RevokeSession(ctx context.Context, actor string, tenant switchboard.TenantID, id string) error {
	userID, err := s.revokeOne(ctx, `UPDATE member_sessions SET revoked_at = $1
		WHERE tenant_id = $2 AND id = $3 AND revoked_at IS NULL RETURNING user_id`, tenant, id,
		switchboard.E(switchboard.ErrNotFound, "session_not_found", "no live session %q", clip(id)))
	if err != nil {
		return err
	}
	s.record(tenant, actor, userID, "session.revoke")
	return nil
}

// RevokeSessions revokes every session of the tenant's member userID
// (sign-out everywhere) and returns how many rows it revoked (sessions
// that had expired but were not yet revoked included).
func (s *Store) RevokeSessions(ctx context.Context, actor string, tenant switchboard.TenantID, userID string) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE member_sessions SET revoked_at = $1
		WHERE tenant_id = $2 AND user_id = $3 AND revoked_at IS NULL`, s.now(), string(tenant), userID)
	if err != nil {
		return 0, fmt.Errorf("revoking sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("revoking sessions: %w", err)
	}
	s.record(tenant, actor, userID, "session.revoke_all")
	return int(n), nil
}

// Sessions lists the live sessions of the tenant's member userID, newest
// first.
func (s *Store) Sessions(ctx context.Context, tenant switchboard.TenantID, userID string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+`
		FROM member_sessions s JOIN members m ON m.tenant_id = s.tenant_id AND m.user_id = s.user_id
		WHERE s.tenant_id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL ORDER BY s.created_at DESC, s.id`, string(tenant), userID)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	defer rows.Close()
	now := s.now()
	out := []Session{}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("listing sessions: %w", err)
		}
		if s.live(sess, now) {
			out = append(out, sess)
		}
	}
	return out, rows.Err()
}

// tenantOrWrapped turns a foreign-key violation on tenant_id into
// tenant_not_found and wraps any other error with what was being done.
func tenantOrWrapped(err error, tenant switchboard.TenantID, doing string) error {
	if database.IsForeignKeyViolation(err) {
		return switchboard.E(switchboard.ErrNotFound, "tenant_not_found", "tenant %q not found", string(tenant))
	}
	return fmt.Errorf("%s: %w", doing, err)
}
