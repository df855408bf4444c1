package auth

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
)

// Store is auth's storage: per-grant token rows (auth_grants), OAuth flows
// in progress (oauth_states) and the platform provider registry
// (oauth_providers), each with its secret rows. Every statement of the
// package is in this file (operator tokens aside, in operator.go, and
// connect links, in connectlinks.go). The exported methods open their own
// transaction; the unexported helpers take it.
type Store struct {
	db      *database.DB
	secrets *secrets.Store
}

// NewStore returns auth's store over db, sealing secret rows with sec.
func NewStore(db *database.DB, sec *secrets.Store) *Store {
	return &Store{db: db, secrets: sec}
}

// GrantsChannel is the Postgres NOTIFY channel on which a replica tells
// the others which grants' cached state to drop (a disconnect, a
// reconnect).
const GrantsChannel = "switchboard_grants"

// grantChange is a change of grants, as logged and announced on
// GrantsChannel: their fingerprints.
type grantChange struct {
	Fingerprints []string `json:"fingerprints"`
}

// announceTx logs the change of the grants fps inside tx, the change's
// own transaction, so that the other replicas are told when it commits
// and never if it rolls back (database.DB.LogChangeTx), and a replica
// whose listener was away reads it from the log.
func (s *Store) announceTx(ctx context.Context, tx *sql.Tx, fps []string) error {
	payload, err := json.Marshal(grantChange{Fingerprints: fps})
	if err != nil {
		return err
	}
	_, err = s.db.LogChangeTx(ctx, tx, GrantsChannel, payload)
	return err
}

// grantListener hears the grant changes other replicas log.
func (s *Store) grantListener() *database.ChangeListener {
	return s.db.NewChangeListener(GrantsChannel)
}

// GrantID names one grant: a tenant's row of one fingerprint, with what
// the row records about it.
type GrantID struct {
	Tenant      switchboard.TenantID
	Fingerprint string
	Instance    switchboard.InstanceID
	// User is the grant's user; empty for the instance's own grant
	// (clientCredentials, jwt without a user).
	User string
	Mode string
}

// Grant is a grant's row.
type Grant struct {
	Status    string
	Version   int64
	ExpiresAt time.Time
	UpdatedAt time.Time
	// Failures counts the token requests that failed in a row; RetryAt
	// (zero: none) is when the next may be sent; Failure is the last
	// failure's code.
	Failures int
	RetryAt  time.Time
	Failure  string
}

// Names of a grant's secret rows (after the fingerprint and a colon).
const (
	tokenAccess  = "access_token"
	tokenRefresh = "refresh_token"
)

func grantOwner(instance switchboard.InstanceID, user string) string {
	return "grant:" + string(instance) + ":" + user
}

// tokenRef names one of a grant's secret rows.
func (g GrantID) tokenRef(name string) secrets.Ref {
	return secrets.Ref{Tenant: g.Tenant, Owner: grantOwner(g.Instance, g.User), Name: g.Fingerprint + ":" + name}
}

// Grant returns the grant's row, or nil when there is none.
func (s *Store) Grant(ctx context.Context, id GrantID) (*Grant, error) {
	return s.grant(ctx, s.db, id, false)
}

func (s *Store) grant(ctx context.Context, q database.Querier, id GrantID, lock bool) (*Grant, error) {
	query := `SELECT status, version, expires_at, updated_at, failures, retry_at, failure FROM auth_grants WHERE tenant_id = $1 AND fingerprint = $2`
	if lock {
		query += s.db.Dialect.LockRow()
	}
	var g Grant
	var retry sql.NullTime
	err := q.QueryRowContext(ctx, query, string(id.Tenant), id.Fingerprint).Scan(&g.Status, &g.Version, &g.ExpiresAt, &g.UpdatedAt,
		&g.Failures, &retry, &g.Failure)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading grant: %w", err)
	}
	g.ExpiresAt, g.UpdatedAt = g.ExpiresAt.UTC(), g.UpdatedAt.UTC()
	if retry.Valid {
		g.RetryAt = retry.Time.UTC()
	}
	return &g, nil
}

// Token returns one of the grant's stored tokens (access_token or
// refresh_token), or an error wrapping switchboard.ErrNotFound.
func (s *Store) Token(ctx context.Context, id GrantID, name string) (secrets.Secret, error) {
	return s.secrets.Get(ctx, id.tokenRef(name))
}

// LockedGrant is a grant's row locked for a refresh: on Postgres by
// SELECT ... FOR UPDATE, on the embedded store by its write lock. Its
// writes commit together when the function given to LockGrant returns
// nil.
type LockedGrant struct {
	s   *Store
	tx  *sql.Tx
	id  GrantID
	now time.Time
	// Row is the grant's row as read under the lock; nil when the grant
	// does not exist.
	Row *Grant
}

// LockGrant opens a transaction, creates the grant's row first when create
// is set (an instance's own grant exists as soon as it is used), locks the
// row and runs fn with it. fn's writes commit when it returns nil.
func (s *Store) LockGrant(ctx context.Context, id GrantID, create bool, now time.Time, fn func(g *LockedGrant) error) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		if create {
			if err := s.createGrant(ctx, tx, id, now); err != nil {
				return err
			}
		}
		row, err := s.grant(ctx, tx, id, true)
		if err != nil {
			return err
		}
		return fn(&LockedGrant{s: s, tx: tx, id: id, now: now, Row: row})
	})
}

func (s *Store) createGrant(ctx context.Context, tx *sql.Tx, id GrantID, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO auth_grants (tenant_id, fingerprint, instance_id, user_id, mode, status, version, expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7, $7) ON CONFLICT (tenant_id, fingerprint) DO NOTHING`,
		string(id.Tenant), id.Fingerprint, string(id.Instance), id.User, id.Mode, StatusActive, now); err != nil {
		return fmt.Errorf("creating grant: %w", err)
	}
	return nil
}

// Reread reads the row again, under the lock already held, without the
// effect of this transaction's own writes being in question: it sees what
// another replica committed before the lock was taken.
func (g *LockedGrant) Reread(ctx context.Context) (*Grant, error) {
	return g.s.grant(ctx, g.tx, g.id, false)
}

// MarkReconnect sets the grant to reconnect_required.
func (g *LockedGrant) MarkReconnect(ctx context.Context) error {
	if _, err := g.tx.ExecContext(ctx, `UPDATE auth_grants SET status = $3, updated_at = $4 WHERE tenant_id = $1 AND fingerprint = $2`,
		string(g.id.Tenant), g.id.Fingerprint, StatusReconnectRequired, g.now); err != nil {
		return fmt.Errorf("marking grant: %w", err)
	}
	return nil
}

// RecordFailure counts a failed token request (code is its client-safe
// code) and defers the next one until retryAt.
func (g *LockedGrant) RecordFailure(ctx context.Context, code string, retryAt time.Time) error {
	if _, err := g.tx.ExecContext(ctx, `UPDATE auth_grants SET failures = failures + 1, retry_at = $3, failure = $4
		WHERE tenant_id = $1 AND fingerprint = $2`, string(g.id.Tenant), g.id.Fingerprint, retryAt, code); err != nil {
		return fmt.Errorf("recording a failed token request: %w", err)
	}
	return nil
}

// SaveTokens writes a new token: the rotated refresh token first (when
// not zero), then the access token, then the row (version + 1, active,
// expiry). It returns the new version.
func (g *LockedGrant) SaveTokens(ctx context.Context, refresh, access secrets.Secret, expiry time.Time) (int64, error) {
	return g.s.saveTokens(ctx, g.tx, g.id, g.Row.Version, refresh, access, expiry, g.now)
}

func (s *Store) saveTokens(ctx context.Context, tx *sql.Tx, id GrantID, version int64, refresh, access secrets.Secret, expiry, now time.Time) (int64, error) {
	if !refresh.IsZero() {
		if err := s.secrets.PutTx(ctx, tx, id.tokenRef(tokenRefresh), refresh); err != nil {
			return 0, err
		}
	}
	if err := s.secrets.PutTx(ctx, tx, id.tokenRef(tokenAccess), access); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE auth_grants SET version = $3, expires_at = $4, status = $5, updated_at = $6,
		failures = 0, retry_at = NULL, failure = ''
		WHERE tenant_id = $1 AND fingerprint = $2`, string(id.Tenant), id.Fingerprint, version+1, expiry, StatusActive, now); err != nil {
		return 0, fmt.Errorf("updating grant: %w", err)
	}
	return version + 1, nil
}

// ConnectGrant stores a user's grant after a completed authorization-code
// flow: the row is created (or reactivated) and the tokens written.
func (s *Store) ConnectGrant(ctx context.Context, id GrantID, refresh, access secrets.Secret, expiry, now time.Time) (int64, error) {
	var version int64
	err := s.LockGrant(ctx, id, true, now, func(g *LockedGrant) error {
		if g.Row == nil {
			return errors.New("grant row vanished")
		}
		var err error
		if version, err = g.SaveTokens(ctx, refresh, access, expiry); err != nil {
			return err
		}
		// Other replicas may remember the grant as needing a reconnect:
		// they drop what they hold of it and read the new grant.
		return s.announceTx(ctx, g.tx, []string{id.Fingerprint})
	})
	return version, err
}

// MarkStale expires the grant's stored access token if it is still at
// version, so that the next call obtains a new one.
func (s *Store) MarkStale(ctx context.Context, id GrantID, version int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE auth_grants SET expires_at = $4 WHERE tenant_id = $1 AND fingerprint = $2 AND version = $3`,
		string(id.Tenant), id.Fingerprint, version, time.Unix(0, 0).UTC())
	if err != nil {
		return fmt.Errorf("marking a token stale: %w", err)
	}
	return nil
}

// DeleteUserGrants deletes every grant of user on instance (every
// fingerprint) with their token rows, and returns their fingerprints; it
// announces them, with also, to the other replicas in the same
// transaction.
func (s *Store) DeleteUserGrants(ctx context.Context, tenant switchboard.TenantID, instance switchboard.InstanceID, user string, also ...string) ([]string, error) {
	var fps []string
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT fingerprint FROM auth_grants WHERE tenant_id = $1 AND instance_id = $2 AND user_id = $3`,
			string(tenant), string(instance), user)
		if err != nil {
			return err
		}
		for rows.Next() {
			var fp string
			if err := rows.Scan(&fp); err != nil {
				rows.Close()
				return err
			}
			fps = append(fps, fp)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM auth_grants WHERE tenant_id = $1 AND instance_id = $2 AND user_id = $3`,
			string(tenant), string(instance), user); err != nil {
			return err
		}
		if err := s.secrets.DeleteOwnerTx(ctx, tx, tenant, grantOwner(instance, user)); err != nil {
			return err
		}
		return s.announceTx(ctx, tx, append(slices.Clone(fps), also...))
	})
	if err != nil {
		return nil, fmt.Errorf("deleting grants: %w", err)
	}
	return fps, nil
}

func stateOwner(stateHash string) string { return "oauthstate:" + stateHash }

func (f *FlowState) verifierRef() secrets.Ref {
	return secrets.Ref{Tenant: f.Tenant, Owner: stateOwner(f.stateHash), Name: "pkce_verifier"}
}

// StartFlow records a new flow and its PKCE verifier, sweeping every
// expired flow as it goes.
func (s *Store) StartFlow(ctx context.Context, f *FlowState, verifier secrets.Secret, now time.Time) error {
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE owner IN (SELECT 'oauthstate:' || state_hash FROM oauth_states WHERE expires_at < $1)`, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_states WHERE expires_at < $1`, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_states (state_hash, tenant_id, tenant_slug, instance_id, instance_slug, user_id, mode,
			fingerprint, token_url, redirect_uri, binding_hash, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			f.stateHash, string(f.Tenant), f.TenantSlug, string(f.InstanceID), f.InstanceSlug, f.User, f.Mode,
			f.Fingerprint, f.TokenURL, f.RedirectURI, f.bindingHash, f.expiresAt, now); err != nil {
			return err
		}
		return s.secrets.PutTx(ctx, tx, f.verifierRef(), verifier)
	})
	if err != nil {
		return fmt.Errorf("starting an OAuth flow: %w", err)
	}
	return nil
}

// ConsumeFlow deletes the flow of stateHash and its verifier row and
// returns it, verifier included; an unknown flow is ErrStateInvalid.
func (s *Store) ConsumeFlow(ctx context.Context, stateHash string) (*FlowState, error) {
	f := &FlowState{stateHash: stateHash}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var tenant, instance string
		err := tx.QueryRowContext(ctx, `DELETE FROM oauth_states WHERE state_hash = $1
			RETURNING tenant_id, tenant_slug, instance_id, instance_slug, user_id, mode, fingerprint, token_url, redirect_uri, binding_hash, expires_at`, stateHash).
			Scan(&tenant, &f.TenantSlug, &instance, &f.InstanceSlug, &f.User, &f.Mode, &f.Fingerprint, &f.TokenURL, &f.RedirectURI, &f.bindingHash, &f.expiresAt)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrStateInvalid
		}
		if err != nil {
			return err
		}
		f.Tenant, f.InstanceID = switchboard.TenantID(tenant), switchboard.InstanceID(instance)
		if f.verifier, err = s.secrets.Get(ctx, f.verifierRef()); err != nil {
			return ErrStateInvalid
		}
		return s.secrets.DeleteOwnerTx(ctx, tx, f.Tenant, stateOwner(stateHash))
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func providerOwner(slug string) string { return "provider:" + slug }

// PutProvider creates or updates the provider's row (one upsert, so that
// concurrent first writes of one slug do not collide) and its secret rows:
// values maps a row name to its value, "" deleting it; a nil client value
// keeps the stored one. ifRevision, when not nil, is the revision the
// write expects to find (0: none yet); another is ErrConflict. It returns
// whether the row was created.
func (s *Store) PutProvider(ctx context.Context, slug, name string, ifRevision *int64, values map[string]string, client map[string]*secrets.Secret, now time.Time) (bool, error) {
	var revision int64
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `INSERT INTO oauth_providers (slug, name, revision, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)
			ON CONFLICT (slug) DO UPDATE SET name = excluded.name, revision = oauth_providers.revision + 1, updated_at = excluded.updated_at
			RETURNING revision`, slug, name, now).Scan(&revision); err != nil {
			return err
		}
		if ifRevision != nil && *ifRevision != revision-1 {
			return errProviderRevision
		}
		owner := providerOwner(slug)
		for n, v := range values {
			ref := secrets.Ref{Owner: owner, Name: n}
			var err error
			if v == "" {
				err = s.secrets.DeleteTx(ctx, tx, ref)
			} else {
				err = s.secrets.PutTx(ctx, tx, ref, secrets.New(v))
			}
			if err != nil {
				return err
			}
		}
		for n, v := range client {
			if v == nil {
				continue
			}
			ref := secrets.Ref{Owner: owner, Name: n}
			var err error
			if v.IsZero() {
				err = s.secrets.DeleteTx(ctx, tx, ref)
			} else {
				err = s.secrets.PutTx(ctx, tx, ref, *v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return revision == 1, nil
}

var errProviderRevision = switchboard.E(switchboard.ErrConflict, "revision_mismatch",
	"the provider was changed by someone else meanwhile; read it again and retry")

// Provider reads the provider's row and secret rows; an unknown slug is
// errNoProvider.
func (s *Store) Provider(ctx context.Context, slug string) (*Provider, map[string]secrets.Secret, error) {
	p := &Provider{Slug: slug}
	err := s.db.QueryRowContext(ctx, `SELECT name, revision, created_at, updated_at FROM oauth_providers WHERE slug = $1`, slug).
		Scan(&p.Name, &p.Revision, &p.CreatedAt, &p.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, errNoProvider
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading provider %s: %w", slug, err)
	}
	vals, err := s.secrets.GetAll(ctx, "", providerOwner(slug))
	if err != nil {
		return nil, nil, err
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, vals, nil
}

// ProviderSlugsPage lists one page of the providers' slugs, in order, and
// the cursor of the next page.
func (s *Store) ProviderSlugsPage(ctx context.Context, q switchboard.PageQuery) ([]string, string, error) {
	return database.Page(ctx, s.db, "providers", database.By("slug"), q,
		`SELECT slug FROM oauth_providers WHERE TRUE`, nil,
		func(row database.Row) (slug string, err error) { return slug, row.Scan(&slug) },
		func(slug string) []any { return []any{slug} })
}

// DeleteProvider removes the provider and its secret rows; an unknown slug
// is errNoProvider.
func (s *Store) DeleteProvider(ctx context.Context, slug string) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM oauth_providers WHERE slug = $1`, slug)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errNoProvider
		}
		return s.secrets.DeleteOwnerTx(ctx, tx, "", providerOwner(slug))
	})
}
