package members

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// The platform operator's browser sessions. The operator has no password
// and no tenant: a single-use, short-lived operator sign-in link, minted
// with an operator token (the admin API) or on the store (the CLI), is
// opened and confirmed in a browser, which starts an operator session.
// It is a server-side row like a member's session (token stored hashed,
// the same cookie, CSRF token, idle and absolute expiry), in its own
// table, so that nothing that resolves members' sessions (ResolveSession)
// ever takes the operator for a member of some tenant.

// Token prefixes of operator sign-in links and operator sessions, distinct
// from members' (sbi_, sbs_), so that a token says which table it is in.
const (
	OperatorLinkTokenPrefix    = "sbol_"
	OperatorSessionTokenPrefix = "sbos_"
)

// Lifetimes of operator sign-in links: short, since a link is a bearer
// credential in transit (a terminal, a chat) until it is used.
const (
	DefaultOperatorLinkLifetime = 15 * time.Minute
	MaxOperatorLinkLifetime     = time.Hour
)

// OperatorLink is the record of an operator sign-in link; its token is
// never stored, only its SHA-256.
type OperatorLink struct {
	ID        string     `json:"id"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
}

// IsOperatorLink reports whether token is an operator sign-in link's.
func IsOperatorLink(token string) bool { return strings.HasPrefix(token, OperatorLinkTokenPrefix) }

// IsOperatorSession reports whether token is an operator session's.
func IsOperatorSession(token string) bool {
	return strings.HasPrefix(token, OperatorSessionTokenPrefix)
}

// record writes an audit row of the operator's sign-in, which belongs to
// no tenant.
func (s *Store) recordOperator(actor, subject, action string) { s.record("", actor, subject, action) }

// CreateOperatorLink mints a single-use operator sign-in link usable
// within ttl (0: DefaultOperatorLinkLifetime; at most
// MaxOperatorLinkLifetime), created by actor (who minted it: an operator
// token, the CLI), and returns it with its token, which is shown once.
func (s *Store) CreateOperatorLink(ctx context.Context, actor string, ttl time.Duration) (OperatorLink, secrets.Secret, error) {
	switch {
	case ttl == 0:
		ttl = DefaultOperatorLinkLifetime
	case ttl < 0 || ttl > MaxOperatorLinkLifetime:
		return OperatorLink{}, secrets.Secret{}, switchboard.E(switchboard.ErrInvalid, "invalid_lifetime",
			"an operator sign-in link's lifetime is between 1s and %s", MaxOperatorLinkLifetime)
	}
	l, token, err := s.insertOperatorLink(ctx, switchboard.NewID("osl_"), actor, ttl)
	if err == nil && token.IsZero() {
		err = errors.New("storing the operator sign-in link: the generated id already exists")
	}
	return l, token, err
}

// FirstStartLinkID is the id of the first start's operator sign-in link:
// fixed, so that a store holds at most one, whichever process (or
// replica) minted it.
const FirstStartLinkID = "osl_first_start"

// FirstStartLinkLifetime is the first start's operator sign-in link's
// lifetime: longer than a minted link's (MaxOperatorLinkLifetime), since
// whoever runs `switchboard serve` for the first time may open the
// console later in the day; it is still single use and stored hashed.
const FirstStartLinkLifetime = 24 * time.Hour

// FirstStartLink mints the operator sign-in link a first start prints,
// usable once within FirstStartLinkLifetime, once per store: when a first
// start's link was ever minted (used, expired or live), it returns the
// zero Secret and mints nothing, so a restart never prints another (mint
// one with CreateOperatorLink: `switchboard admin login-link --operator`).
func (s *Store) FirstStartLink(ctx context.Context, actor string) (OperatorLink, secrets.Secret, error) {
	return s.insertOperatorLink(ctx, FirstStartLinkID, actor, FirstStartLinkLifetime)
}

// insertOperatorLink stores an operator sign-in link under id, usable
// within ttl, and audits it; it returns the zero Secret and writes
// nothing when id exists.
func (s *Store) insertOperatorLink(ctx context.Context, id, actor string, ttl time.Duration) (OperatorLink, secrets.Secret, error) {
	now := s.now()
	l := OperatorLink{ID: id, CreatedBy: clip(actor), CreatedAt: now, ExpiresAt: now.Add(ttl)}
	token := tenants.NewToken(OperatorLinkTokenPrefix)
	res, err := s.db.ExecContext(ctx, `INSERT INTO operator_sign_in_links (id, token_hash, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, l.ID, tenants.HashToken(token), l.CreatedBy, now, l.ExpiresAt)
	if err != nil {
		return OperatorLink{}, secrets.Secret{}, fmt.Errorf("storing the operator sign-in link: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return OperatorLink{}, secrets.Secret{}, fmt.Errorf("storing the operator sign-in link: %w", err)
	} else if n == 0 {
		return OperatorLink{}, secrets.Secret{}, nil
	}
	s.recordOperator(l.CreatedBy, l.ID, "operator_link.create")
	return l, secrets.New(token), nil
}

// RedeemOperatorLink spends the operator sign-in link of token and starts
// an operator session, returned with its token (the cookie's value). A
// token that is unknown, used or expired fails with invalid_link, and a
// used token is spent even when it had expired.
func (s *Store) RedeemOperatorLink(ctx context.Context, token string) (Session, secrets.Secret, error) {
	if !IsOperatorLink(token) || len(token) > maxToken {
		return Session{}, secrets.Secret{}, errInvalidLink
	}
	var (
		linkID, createdBy string
		expires           time.Time
		sess              Session
		sessToken         secrets.Secret
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		err := tx.QueryRowContext(ctx, `UPDATE operator_sign_in_links SET used_at = $1
			WHERE token_hash = $2 AND used_at IS NULL RETURNING id, created_by, expires_at`, now, tenants.HashToken(token)).
			Scan(&linkID, &createdBy, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return errInvalidLink
		}
		if err != nil {
			return fmt.Errorf("using the operator sign-in link: %w", err)
		}
		if !now.Before(expires) {
			return errExpiredLink
		}
		sess = Session{ID: switchboard.NewID("oses_"), UserID: ActorOperator, Operator: true,
			CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(s.opts.SessionMax)}
		t := tenants.NewToken(OperatorSessionTokenPrefix)
		if _, err := tx.ExecContext(ctx, `INSERT INTO operator_sessions (id, link_id, token_hash, created_at, last_seen_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, sess.ID, linkID, tenants.HashToken(t), now, now, sess.ExpiresAt); err != nil {
			return fmt.Errorf("storing the operator session: %w", err)
		}
		sessToken = secrets.New(t)
		return nil
	})
	if errors.Is(err, errExpiredLink) {
		// The link is spent: commit its use, answer as for any bad link.
		_, _ = s.db.ExecContext(ctx, `UPDATE operator_sign_in_links SET used_at = $1 WHERE id = $2`, s.now(), linkID)
		return Session{}, secrets.Secret{}, errInvalidLink
	}
	if err != nil {
		return Session{}, secrets.Secret{}, err
	}
	s.recordOperator(createdBy, sess.ID, "operator_session.create:"+linkID)
	return sess, sessToken, nil
}

// ResolveOperatorSession returns the live operator session of token and
// records its use (at most once per SessionTouchInterval), reading the
// store on every call as ResolveSession does. A token that is unknown,
// revoked, idle too long or past its absolute expiry fails with
// invalid_session.
func (s *Store) ResolveOperatorSession(ctx context.Context, token string) (Session, error) {
	if !IsOperatorSession(token) || len(token) > maxToken {
		return Session{}, errInvalidSession
	}
	sess := Session{UserID: ActorOperator, Operator: true}
	var revoked sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT id, created_at, last_seen_at, expires_at, revoked_at
		FROM operator_sessions WHERE token_hash = $1`, tenants.HashToken(token)).
		Scan(&sess.ID, &sess.CreatedAt, &sess.LastSeenAt, &sess.ExpiresAt, &revoked)
	if errors.Is(err, sql.ErrNoRows) || revoked.Valid {
		return Session{}, errInvalidSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("loading the operator session: %w", err)
	}
	sess.CreatedAt, sess.LastSeenAt, sess.ExpiresAt = sess.CreatedAt.UTC(), sess.LastSeenAt.UTC(), sess.ExpiresAt.UTC()
	now := s.now()
	if !s.live(sess, now) {
		return Session{}, errInvalidSession
	}
	if now.Sub(sess.LastSeenAt) >= SessionTouchInterval {
		if _, err := s.db.ExecContext(ctx, `UPDATE operator_sessions SET last_seen_at = $1 WHERE id = $2`, now, sess.ID); err != nil {
			return Session{}, fmt.Errorf("recording operator session use: %w", err)
		}
		sess.LastSeenAt = now
	}
	return sess, nil
}

// signOutOperator revokes the operator session of token.
func (s *Store) signOutOperator(ctx context.Context, token string) error {
	var id string
	err := s.db.QueryRowContext(ctx, `UPDATE operator_sessions SET revoked_at = $1
		WHERE token_hash = $2 AND revoked_at IS NULL RETURNING id`, s.now(), tenants.HashToken(token)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signing out: %w", err)
	}
	s.recordOperator(ActorOperator, id, "operator_session.revoke")
	return nil
}

// RevokeOperatorSessions revokes every operator session (sign-out
// everywhere for the operator) and returns how many it revoked.
func (s *Store) RevokeOperatorSessions(ctx context.Context, actor string) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE operator_sessions SET revoked_at = $1 WHERE revoked_at IS NULL`, s.now())
	if err != nil {
		return 0, fmt.Errorf("revoking operator sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("revoking operator sessions: %w", err)
	}
	s.recordOperator(actor, ActorOperator, "operator_session.revoke_all")
	return int(n), nil
}

// MemberCounts returns the number of members of every tenant that has
// any, by tenant id (the operator's tenants overview).
func (s *Store) MemberCounts(ctx context.Context) (map[switchboard.TenantID]int, error) {
	counts, err := database.Counts[switchboard.TenantID](ctx, s.db, `SELECT tenant_id, count(*) FROM members GROUP BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("counting members: %w", err)
	}
	return counts, nil
}
