// Package members holds the people of a tenant and how they sign in:
// members (a user id, an email and one role), invitations and one-time
// sign-in links (single use, expiring, stored hashed), and server-side
// sessions (an opaque token stored hashed, with idle and absolute expiry,
// revocable one by one or all of a member's at once).
//
// Every change is recorded in the audit log with its actor (who made it:
// "operator", or the acting member's user id) and its subject (the member
// it concerns). Tokens are returned once, as secrets.Secret, and only
// their SHA-256 is stored.
package members

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
)

// Role is what a member may do in their tenant (switchboard.Role, which
// orders them).
type Role = switchboard.Role

// The roles, from most to least privileged.
const (
	RoleOwner  = switchboard.RoleOwner
	RoleAdmin  = switchboard.RoleAdmin
	RoleMember = switchboard.RoleMember
)

// ParseRole parses "owner", "admin" or "member".
func ParseRole(s string) (Role, error) {
	r := Role(strings.TrimSpace(s))
	if !r.Valid() {
		return "", switchboard.E(switchboard.ErrInvalid, "invalid_role", "role %q: want owner, admin or member", clip(s))
	}
	return r, nil
}

// ActorOperator is the actor recorded for changes made with an operator
// token (the admin API or the CLI).
const ActorOperator = "operator"

// Member is a person of a tenant.
type Member struct {
	Tenant switchboard.TenantID `json:"tenant_id"`
	// UserID is opaque and stable: what grants, audit rows and callers'
	// user assertions name.
	UserID string `json:"user_id"`
	// Email is lower-cased and unique in the tenant.
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Options tunes a Store.
type Options struct {
	// InvitationLifetime is how long an invitation or sign-in link
	// stays usable when its creator names no lifetime. Default 24 h.
	InvitationLifetime time.Duration
	// SessionIdle ends a session not used for this long. Default 8 h.
	SessionIdle time.Duration
	// SessionMax ends a session this long after sign-in, however busy.
	// Default 7 days.
	SessionMax time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultInvitationLifetime = 24 * time.Hour
	DefaultSessionIdle        = 8 * time.Hour
	DefaultSessionMax         = 7 * 24 * time.Hour
	// MaxInvitationLifetime bounds a lifetime asked for.
	MaxInvitationLifetime = 30 * 24 * time.Hour
)

// Store keeps members, invitations and sessions in the database, and
// records every change in the audit log.
type Store struct {
	db    *database.DB
	audit audit.Recorder
	opts  Options

	// Removals are announced to onRemoval (see OnRemoval).
	removalMu sync.RWMutex
	onRemoval []func(Removal)
	// removals hears the removals other replicas log.
	removals *database.ChangeListener
}

// NewStore returns the store over db, auditing through rec.
func NewStore(db *database.DB, rec audit.Recorder, opts Options) *Store {
	if opts.InvitationLifetime <= 0 {
		opts.InvitationLifetime = DefaultInvitationLifetime
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.SessionMax <= 0 {
		opts.SessionMax = DefaultSessionMax
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{db: db, audit: rec, opts: opts, removals: db.NewChangeListener(RemovalsChannel)}
}

// Options returns the store's options with their defaults filled in.
func (s *Store) Options() Options { return s.opts }

func (s *Store) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }

// record writes the audit row of a change.
func (s *Store) record(tenant switchboard.TenantID, actor, subject, action string) {
	s.audit.Record(audit.Entry{Tenant: tenant, Actor: actor, Subject: subject, Tool: "members", Action: action, Outcome: "ok"})
}

// maxEmail bounds an email address (RFC 5321's path limit).
const maxEmail = 254

// NormalizeEmail returns addr trimmed and lower-cased, or an invalid_email
// error unless it is one plain address (no display name).
func NormalizeEmail(addr string) (string, error) {
	addr = strings.ToLower(strings.TrimSpace(addr))
	bad := switchboard.E(switchboard.ErrInvalid, "invalid_email", "%q is not an email address", clip(addr))
	if addr == "" || len(addr) > maxEmail {
		return "", bad
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Name != "" || a.Address != addr {
		return "", bad
	}
	return addr, nil
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

func notFound(userID string) error {
	return switchboard.E(switchboard.ErrNotFound, "member_not_found", "member %q not found", clip(userID))
}

const memberColumns = `tenant_id, user_id, email, role, created_at, updated_at`

func scanMember(row interface{ Scan(...any) error }) (Member, error) {
	var m Member
	var tenant, role string
	if err := row.Scan(&tenant, &m.UserID, &m.Email, &role, &m.CreatedAt, &m.UpdatedAt); err != nil {
		return Member{}, err
	}
	m.Tenant, m.Role = switchboard.TenantID(tenant), Role(role)
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return m, nil
}

// AddMember adds a member with a new user id. It fails with member_exists
// when the email is already a member of the tenant and tenant_not_found
// for an unknown tenant.
func (s *Store) AddMember(ctx context.Context, actor string, tenant switchboard.TenantID, email string, role Role) (Member, error) {
	var m Member
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		m, err = s.addMember(ctx, tx, tenant, email, role)
		return err
	})
	if err != nil {
		return Member{}, err
	}
	s.record(tenant, actor, m.UserID, "member.add:"+string(role))
	return m, nil
}

func (s *Store) addMember(ctx context.Context, q database.Querier, tenant switchboard.TenantID, email string, role Role) (Member, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Member{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Member{}, err
	}
	now := s.now()
	m := Member{Tenant: tenant, UserID: switchboard.NewID("usr_"), Email: email, Role: role, CreatedAt: now, UpdatedAt: now}
	_, err = q.ExecContext(ctx, `INSERT INTO members (`+memberColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		string(tenant), m.UserID, m.Email, string(m.Role), now, now)
	switch {
	case database.IsForeignKeyViolation(err):
		return Member{}, switchboard.E(switchboard.ErrNotFound, "tenant_not_found", "tenant %q not found", string(tenant))
	case database.IsUniqueViolation(err):
		return Member{}, switchboard.E(switchboard.ErrConflict, "member_exists", "%s is already a member of the tenant", email)
	case err != nil:
		return Member{}, fmt.Errorf("adding member: %w", err)
	}
	return m, nil
}

// Member returns the tenant's member with userID, or member_not_found.
func (s *Store) Member(ctx context.Context, tenant switchboard.TenantID, userID string) (Member, error) {
	m, err := scanMember(s.db.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM members WHERE tenant_id = $1 AND user_id = $2`,
		string(tenant), userID))
	if errors.Is(err, sql.ErrNoRows) {
		return Member{}, notFound(userID)
	}
	if err != nil {
		return Member{}, fmt.Errorf("loading member: %w", err)
	}
	return m, nil
}

// MemberByEmail returns the tenant's member with email, or member_not_found.
func (s *Store) MemberByEmail(ctx context.Context, tenant switchboard.TenantID, email string) (Member, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Member{}, err
	}
	return s.memberByEmail(ctx, s.db, tenant, email)
}

func (s *Store) memberByEmail(ctx context.Context, q database.Querier, tenant switchboard.TenantID, email string) (Member, error) {
	m, err := scanMember(q.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM members WHERE tenant_id = $1 AND email = $2`,
		string(tenant), email))
	if errors.Is(err, sql.ErrNoRows) {
		return Member{}, notFound(email)
	}
	if err != nil {
		return Member{}, fmt.Errorf("loading member: %w", err)
	}
	return m, nil
}

// Membership is one tenant a person is a member of: their member row
// and the tenant's slug and name.
type Membership struct {
	Member
	TenantSlug string `json:"tenant_slug"`
	TenantName string `json:"tenant_name"`
}

// Memberships lists the tenants email is a member of, by tenant slug (a
// sign-in that names no tenant finds its tenant here).
func (s *Store) Memberships(ctx context.Context, email string) ([]Membership, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	return s.memberships(ctx, `m.email = $1`, email)
}

// memberships lists the member rows (m) that match where, with their
// tenants (t), by tenant slug.
func (s *Store) memberships(ctx context.Context, where string, args ...any) ([]Membership, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT m.tenant_id, m.user_id, m.email, m.role, m.created_at, m.updated_at, t.slug, t.name
		FROM members m JOIN tenants t ON t.id = m.tenant_id WHERE `+where+` ORDER BY t.slug`, args...)
	if err != nil {
		return nil, fmt.Errorf("listing memberships: %w", err)
	}
	defer rows.Close()
	out := []Membership{}
	for rows.Next() {
		var ms Membership
		var tenant, role string
		if err := rows.Scan(&tenant, &ms.UserID, &ms.Email, &role, &ms.CreatedAt, &ms.UpdatedAt, &ms.TenantSlug, &ms.TenantName); err != nil {
			return nil, fmt.Errorf("listing memberships: %w", err)
		}
		ms.Tenant, ms.Role = switchboard.TenantID(tenant), Role(role)
		ms.CreatedAt, ms.UpdatedAt = ms.CreatedAt.UTC(), ms.UpdatedAt.UTC()
		out = append(out, ms)
	}
	return out, rows.Err()
}

// Members lists the tenant's members by email.
func (s *Store) Members(ctx context.Context, tenant switchboard.TenantID) ([]Member, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]Member, string, error) { return s.MembersPage(ctx, tenant, q) })
}

// MembersPage returns one page of the tenant's members, by email, and the
// cursor of the next page.
func (s *Store) MembersPage(ctx context.Context, tenant switchboard.TenantID, q switchboard.PageQuery) ([]Member, string, error) {
	return database.Page(ctx, s.db, "members:"+string(tenant), database.By("email"), q,
		`SELECT `+memberColumns+` FROM members WHERE tenant_id = $1`, []any{string(tenant)},
		scanMember, func(m Member) []any { return []any{m.Email} })
}

// errLastOwner refuses a change that would leave a tenant without an owner.
var errLastOwner = switchboard.E(switchboard.ErrConflict, "last_owner",
	"the tenant's last owner cannot be removed or demoted; make another member owner first")

// lastOwner reports whether m is the only owner of their tenant. It runs
// inside the changing transaction, which holds the store's write lock on
// SQLite; on Postgres the owners' rows are locked.
func (s *Store) lastOwner(ctx context.Context, tx *sql.Tx, m Member) (bool, error) {
	if m.Role != RoleOwner {
		return false, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT user_id FROM members WHERE tenant_id = $1 AND role = $2`+s.db.Dialect.LockRow(),
		string(m.Tenant), string(RoleOwner))
	if err != nil {
		return false, fmt.Errorf("counting owners: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("counting owners: %w", err)
	}
	return n <= 1, nil
}

// SetRole changes a member's role. Their sessions are rotated at their
// next request (see ResolveSession). Demoting the last owner fails with
// last_owner.
func (s *Store) SetRole(ctx context.Context, actor string, tenant switchboard.TenantID, userID string, role Role) (Member, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return Member{}, err
	}
	var m Member
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if m, err = s.lockMember(ctx, tx, tenant, userID); err != nil {
			return err
		}
		if m.Role == role {
			return nil
		}
		if role != RoleOwner {
			if last, err := s.lastOwner(ctx, tx, m); err != nil {
				return err
			} else if last {
				return errLastOwner
			}
		}
		m.Role, m.UpdatedAt = role, s.now()
		if _, err := tx.ExecContext(ctx, `UPDATE members SET role = $1, updated_at = $2 WHERE tenant_id = $3 AND user_id = $4`,
			string(role), m.UpdatedAt, string(tenant), userID); err != nil {
			return fmt.Errorf("changing role: %w", err)
		}
		return nil
	})
	if err != nil {
		return Member{}, err
	}
	s.record(tenant, actor, userID, "member.role:"+string(role))
	return m, nil
}

func (s *Store) lockMember(ctx context.Context, tx *sql.Tx, tenant switchboard.TenantID, userID string) (Member, error) {
	m, err := scanMember(tx.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM members WHERE tenant_id = $1 AND user_id = $2`+
		s.db.Dialect.LockRow(), string(tenant), userID))
	if errors.Is(err, sql.ErrNoRows) {
		return Member{}, notFound(userID)
	}
	if err != nil {
		return Member{}, fmt.Errorf("loading member: %w", err)
	}
	return m, nil
}

// RemoveMember removes a member and ends all their sessions (their
// session rows go with them, so no replica accepts them afterwards),
// deletes their own values of user-scope fields on every instance, and
// announces the removal (see OnRemoval) to what caches memberships.
// Removing the last owner fails with last_owner.
func (s *Store) RemoveMember(ctx context.Context, actor string, tenant switchboard.TenantID, userID string) error {
	removal := Removal{Tenant: tenant, UserID: userID}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		m, err := s.lockMember(ctx, tx, tenant, userID)
		if err != nil {
			return err
		}
		if last, err := s.lastOwner(ctx, tx, m); err != nil {
			return err
		} else if last {
			return errLastOwner
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM member_sessions WHERE tenant_id = $1 AND user_id = $2`, string(tenant), userID); err != nil {
			return fmt.Errorf("ending sessions: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM members WHERE tenant_id = $1 AND user_id = $2`, string(tenant), userID); err != nil {
			return fmt.Errorf("removing member: %w", err)
		}
		// Their own values of user-scope fields go with them, in the
		// removal's transaction.
		if _, err := secrets.DeleteUserRows(ctx, tx, tenant, userID); err != nil {
			return err
		}
		return s.publish(ctx, tx, removal)
	})
	if err != nil {
		return err
	}
	s.record(tenant, actor, userID, "member.remove")
	s.deliver(removal)
	return nil
}
