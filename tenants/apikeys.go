package tenants

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
)

// APIKeyPrefix starts every tenant API key, so that a leaked one is
// recognisable by secret scanners.
const APIKeyPrefix = "sbk_"

// APIKeyTouchInterval is how often, at most, a key's last_used_at is
// written: a key used continuously costs one extra write a minute, not
// one per request.
const APIKeyTouchInterval = time.Minute

// maxAPIKeyLen bounds what Verify hashes.
const maxAPIKeyLen = 256

// maxAPIKeyLifetime bounds an API key's expiry.
const maxAPIKeyLifetime = 2 * 366 * 24 * time.Hour

// APIKey is the record of a tenant API key: automation acting in one
// tenant with a role. The key itself is never stored, only its SHA-256.
type APIKey struct {
	ID       string               `json:"id"`
	TenantID switchboard.TenantID `json:"tenant_id"`
	Name     string               `json:"name"`
	Role     switchboard.Role     `json:"role"`
	// UserID is the member a key acts as (its own grants and audit rows);
	// empty for keys that act as no one.
	UserID string `json:"user_id,omitempty"`
	// CreatedBy is who created the key: "operator", a member's user id,
	// or another key's id.
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// APIKeyRequest asks for a new tenant API key.
type APIKeyRequest struct {
	// Name says what the key is for (1 to 100 printable characters).
	Name string `json:"name"`
	// Role is admin or member.
	Role switchboard.Role `json:"role"`
	// UserID is the member the key acts as; optional.
	UserID string `json:"user_id,omitempty"`
	// ExpiresAt, when set, must be in the future and within two years.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// APIKeys stores tenant API keys. A key is checked against the store on
// every use (one indexed read), so a revocation, on any replica, holds
// for the next request everywhere without a cache to invalidate; the
// admin API is not the hot path of the gateway.
type APIKeys struct {
	db  *database.DB
	now func() time.Time
}

// NewAPIKeys returns the API key store over db.
func NewAPIKeys(db *database.DB) *APIKeys {
	return &APIKeys{db: db, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// WithClock replaces the clock (tests move it past expiry and
// APIKeyTouchInterval) and returns k.
func (k *APIKeys) WithClock(now func() time.Time) *APIKeys {
	k.now = now
	return k
}

var errInvalidAPIKey = switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the API key is not valid")

func errAPIKeyNotFound(id string) error {
	return switchboard.E(switchboard.ErrNotFound, "api_key_not_found", "API key %q not found", truncate(id, 64))
}

// Create issues a key in tenant for req, created by createdBy, and returns
// it with the key itself, which is shown once and cannot be shown again.
func (k *APIKeys) Create(ctx context.Context, tenant switchboard.TenantID, req APIKeyRequest, createdBy string) (*APIKey, secrets.Secret, error) {
	name := strings.TrimSpace(req.Name)
	now := k.now()
	switch {
	case name == "" || len(name) > 100 || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return nil, secrets.Secret{}, invalid("invalid_name", "an API key needs a name of 1 to 100 printable characters")
	case req.Role != switchboard.RoleAdmin && req.Role != switchboard.RoleMember:
		return nil, secrets.Secret{}, invalid("invalid_role", "an API key's role is admin or member")
	case len(req.UserID) > 128 || strings.IndexFunc(req.UserID, unicode.IsControl) >= 0:
		return nil, secrets.Secret{}, invalid("invalid_user_id", "user_id is at most 128 printable characters")
	case req.ExpiresAt != nil && (!req.ExpiresAt.After(now) || req.ExpiresAt.Sub(now) > maxAPIKeyLifetime):
		return nil, secrets.Secret{}, invalid("invalid_expiry", "expires_at must be in the future and within two years")
	}
	key := &APIKey{ID: switchboard.NewID("key_"), TenantID: tenant, Name: name, Role: req.Role, UserID: req.UserID,
		CreatedBy: createdBy, CreatedAt: now}
	var expires sql.NullTime
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.UTC().Truncate(time.Microsecond)
		key.ExpiresAt, expires = &t, sql.NullTime{Time: t, Valid: true}
	}
	token := NewToken(APIKeyPrefix)
	_, err := k.db.ExecContext(ctx, `INSERT INTO api_keys (id, tenant_id, name, role, user_id, created_by, token_hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		key.ID, string(tenant), key.Name, string(key.Role), key.UserID, createdBy, HashToken(token), now, expires)
	if database.IsForeignKeyViolation(err) {
		return nil, secrets.Secret{}, notFound("tenant", string(tenant))
	}
	if err != nil {
		return nil, secrets.Secret{}, fmt.Errorf("creating API key: %w", err)
	}
	return key, secrets.New(token), nil
}

const apiKeyColumns = `id, tenant_id, name, role, user_id, created_by, created_at, expires_at, last_used_at, revoked_at`

func scanAPIKey(row interface{ Scan(...any) error }) (*APIKey, error) {
	var (
		key                    APIKey
		expires, used, revoked sql.NullTime
		tenant, role           string
	)
	if err := row.Scan(&key.ID, &tenant, &key.Name, &role, &key.UserID, &key.CreatedBy, &key.CreatedAt, &expires, &used, &revoked); err != nil {
		return nil, err
	}
	key.TenantID, key.Role = switchboard.TenantID(tenant), switchboard.Role(role)
	key.CreatedAt = key.CreatedAt.UTC()
	for _, t := range []struct {
		src sql.NullTime
		dst **time.Time
	}{{expires, &key.ExpiresAt}, {used, &key.LastUsedAt}, {revoked, &key.RevokedAt}} {
		if t.src.Valid {
			v := t.src.Time.UTC()
			*t.dst = &v
		}
	}
	return &key, nil
}

// Verify returns the live key whose value is token: not revoked, not
// expired. Anything else is ErrUnauthorized "unauthorized", the same for
// every reason. The use is recorded (last_used_at) when the last record
// is older than APIKeyTouchInterval.
func (k *APIKeys) Verify(ctx context.Context, token string) (*APIKey, error) {
	if !strings.HasPrefix(token, APIKeyPrefix) || len(token) > maxAPIKeyLen {
		return nil, errInvalidAPIKey
	}
	key, err := scanAPIKey(k.db.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE token_hash = $1`, HashToken(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errInvalidAPIKey
	}
	if err != nil {
		return nil, fmt.Errorf("looking up API key: %w", err)
	}
	now := k.now()
	if key.RevokedAt != nil || (key.ExpiresAt != nil && !now.Before(*key.ExpiresAt)) {
		return nil, errInvalidAPIKey
	}
	if key.LastUsedAt == nil || now.Sub(*key.LastUsedAt) >= APIKeyTouchInterval {
		// Best effort: a key whose use cannot be recorded still works.
		if _, err := k.db.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2`, now, key.ID); err == nil {
			key.LastUsedAt = &now
		}
	}
	return key, nil
}

// List returns the tenant's keys, revoked and expired ones included,
// newest first.
func (k *APIKeys) List(ctx context.Context, tenant switchboard.TenantID) ([]*APIKey, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]*APIKey, string, error) { return k.Page(ctx, tenant, q) })
}

// Page returns one page of the tenant's keys, revoked and expired ones
// included, newest first, and the cursor of the next page.
func (k *APIKeys) Page(ctx context.Context, tenant switchboard.TenantID, q switchboard.PageQuery) ([]*APIKey, string, error) {
	return database.Page(ctx, k.db, "api_keys:"+string(tenant), database.NewestFirst, q,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE tenant_id = $1`, []any{string(tenant)},
		scanAPIKey, func(key *APIKey) []any { return []any{key.CreatedAt, key.ID} })
}

// Revoke revokes one of the tenant's keys; revoking twice is fine. The
// key is refused from the next request on, on every replica.
func (k *APIKeys) Revoke(ctx context.Context, tenant switchboard.TenantID, id string) (*APIKey, error) {
	res, err := k.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND tenant_id = $3`,
		k.now(), id, string(tenant))
	if err != nil {
		return nil, fmt.Errorf("revoking API key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, errAPIKeyNotFound(id)
	}
	key, err := scanAPIKey(k.db.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1 AND tenant_id = $2`, id, string(tenant)))
	if err != nil {
		return nil, fmt.Errorf("revoking API key: %w", err)
	}
	return key, nil
}

// RevokeUser revokes every live key of the tenant that acts as user or
// was created by them (a removed member's automation stops with them) and
// returns how many it revoked.
func (k *APIKeys) RevokeUser(ctx context.Context, tenant switchboard.TenantID, user string) (int, error) {
	if user == "" {
		return 0, nil
	}
	res, err := k.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = $1
		WHERE tenant_id = $2 AND (user_id = $3 OR created_by = $3) AND revoked_at IS NULL`, k.now(), string(tenant), user)
	if err != nil {
		return 0, fmt.Errorf("revoking the API keys of a user: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
