package tenants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
)

// Store persists tenants, instances and callers; instance field values go
// to the secret store in the same transaction as the instance row.
type Store struct {
	db      *database.DB
	secrets *secrets.Store
	now     func() time.Time
}

// NewStore returns a store over db writing field values to sec.
func NewStore(db *database.DB, sec *secrets.Store) *Store {
	return &Store{db: db, secrets: sec, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// Secrets returns the secret store the tenant store writes field values to.
func (s *Store) Secrets() *secrets.Store { return s.secrets }

func notFound(what, name string) error {
	return switchboard.E(switchboard.ErrNotFound, what+"_not_found", "%s %q does not exist", what, name)
}

// CreateTenant creates a tenant; a taken slug is a conflict.
func (s *Store) CreateTenant(ctx context.Context, slug, name string) (*Tenant, error) {
	t := &Tenant{ID: switchboard.TenantID(switchboard.NewID("ten_")), Slug: slug, Name: name, CreatedAt: s.now()}
	_, err := s.db.ExecContext(ctx, `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, $4)`,
		string(t.ID), t.Slug, t.Name, t.CreatedAt)
	if database.IsUniqueViolation(err) {
		return nil, switchboard.E(switchboard.ErrConflict, "tenant_exists", "tenant %q already exists", slug)
	}
	if err != nil {
		return nil, fmt.Errorf("creating tenant %s: %w", slug, err)
	}
	return t, nil
}

// Tenant returns the tenant with the given slug.
func (s *Store) Tenant(ctx context.Context, slug string) (*Tenant, error) {
	var t Tenant
	err := s.db.QueryRowContext(ctx, `SELECT id, slug, name, created_at FROM tenants WHERE slug = $1`, slug).
		Scan(&t.ID, &t.Slug, &t.Name, &t.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("tenant", slug)
	}
	if err != nil {
		return nil, fmt.Errorf("loading tenant %s: %w", slug, err)
	}
	return &t, nil
}

// ListTenants returns every tenant, by slug.
func (s *Store) ListTenants(ctx context.Context) ([]*Tenant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, slug, name, created_at FROM tenants ORDER BY slug`)
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	defer rows.Close()
	out := []*Tenant{}
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.ID, &t.Slug, &t.Name, &t.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, &t)
	}
	return out, rows.Err()
}

const instanceColumns = `id, tenant_id, slug, connector_id, connector_version, auth_mode, agents, revision, created_at, updated_at,
	auth_state, verify_kind, verify_message, verify_details, verified_at`

func scanInstance(row interface{ Scan(...any) error }) (*Instance, error) {
	var (
		in       Instance
		agents   string
		details  string
		verified sql.NullTime
	)
	if err := row.Scan(&in.ID, &in.TenantID, &in.Slug, &in.ConnectorID, &in.ConnectorVersion, &in.AuthMode,
		&agents, &in.Revision, &in.CreatedAt, &in.UpdatedAt,
		&in.AuthState, &in.Verification.Kind, &in.Verification.Message, &details, &verified); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(agents), &in.Agents); err != nil {
		return nil, fmt.Errorf("decoding agents of %s: %w", in.Slug, err)
	}
	if details != "" {
		if err := json.Unmarshal([]byte(details), &in.Verification.Details); err != nil {
			return nil, fmt.Errorf("decoding verification details of %s: %w", in.Slug, err)
		}
	}
	if verified.Valid {
		at := verified.Time
		in.Verification.At = &at
		in.Verification.Ran = true
		in.Verification.OK = true // only a passed verification is ever stored
	}
	return &in, nil
}

// Instance returns the tenant's instance with the given slug.
func (s *Store) Instance(ctx context.Context, tenant switchboard.TenantID, slug string) (*Instance, error) {
	return s.instance(ctx, s.db, tenant, slug)
}

func (s *Store) instance(ctx context.Context, q database.Querier, tenant switchboard.TenantID, slug string) (*Instance, error) {
	in, err := scanInstance(q.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM instances
		WHERE tenant_id = $1 AND slug = $2`, string(tenant), slug))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("instance", slug)
	}
	if err != nil {
		return nil, fmt.Errorf("loading instance %s: %w", slug, err)
	}
	return in, nil
}

// ListInstances returns the tenant's instances, by slug.
func (s *Store) ListInstances(ctx context.Context, tenant switchboard.TenantID) ([]*Instance, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE tenant_id = $1 ORDER BY slug`, string(tenant))
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	defer rows.Close()
	out := []*Instance{}
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// InstanceChange is the desired state of an instance for PutInstance.
type InstanceChange struct {
	Slug             string
	ConnectorID      string
	ConnectorVersion string
	AuthMode         string
	Agents           []string
	// Set are field values to write; Clear are fields whose rows to delete.
	// Fields in neither keep their stored value.
	Set   map[string]secrets.Secret
	Clear []string
	// Check runs inside the transaction after the writes, with the names
	// of every field that now has a value; an error rolls everything back.
	Check func(stored map[string]bool) error
	// AuthState and Verification are the outcome of the verification the
	// change passed (or why none ran); the message and details must
	// already be redacted.
	AuthState    string
	Verification Verification
	// IfRevision, when set, makes the change conditional: the instance
	// must still be at *IfRevision (0: must not exist), else the change
	// is an ErrConflict "instance_changed" and nothing is written. It
	// guards a configuration verified before the transaction.
	IfRevision *int64
}

// errInstanceChanged is the answer to a change that lost a race with
// another change of the same instance.
func errInstanceChanged(slug string) error {
	return switchboard.E(switchboard.ErrConflict, "instance_changed",
		"instance %q changed while this request was being processed; read it and send the request again", slug)
}

// sameRow reports whether writing ch over cur would leave the instance row
// as it is (the verification details are not compared: an unchanged
// configuration that verified again keeps its first verification).
func sameRow(cur *Instance, ch InstanceChange, state string) bool {
	return cur.ConnectorID == ch.ConnectorID && cur.ConnectorVersion == ch.ConnectorVersion &&
		cur.AuthMode == ch.AuthMode && slices.Equal(cur.Agents, ch.Agents) && cur.AuthState == state
}

// PutInstance creates or updates the instance in one transaction with its
// field rows. It reports whether the instance was created.
//
// Creation is an upsert (INSERT ... ON CONFLICT DO NOTHING), so two first
// PUTs of the same instance racing on the unique (tenant, slug) never end
// in a driver error: the loser sees the winner's row and, when the change
// is conditional (IfRevision), answers ErrConflict "instance_changed".
// Updates are compare-and-swap on the revision read in the transaction,
// with the same answer when another change slipped in between. A change
// that would leave the row and the field rows as they are writes nothing:
// revision and updated_at stay.
func (s *Store) PutInstance(ctx context.Context, tenant switchboard.TenantID, ch InstanceChange) (*Instance, bool, error) {
	agents, err := json.Marshal(ch.Agents)
	if err != nil {
		return nil, false, err
	}
	var (
		out     *Instance
		created bool
	)
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := s.instance(ctx, tx, tenant, ch.Slug)
		if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
			return err
		}
		if ch.IfRevision != nil {
			var rev int64
			if cur != nil {
				rev = cur.Revision
			}
			if rev != *ch.IfRevision {
				return errInstanceChanged(ch.Slug)
			}
		}
		state := ch.AuthState
		if state == "" {
			state = AuthUnverified
		}
		var (
			details  string
			verified sql.NullTime
		)
		if v := ch.Verification; v.Ran && v.OK {
			verified = sql.NullTime{Time: now, Valid: true}
			if len(v.Details) > 0 {
				b, err := json.Marshal(v.Details)
				if err != nil {
					return fmt.Errorf("encoding verification details: %w", err)
				}
				details = string(b)
			}
		}
		vkind, vmsg := ch.Verification.Kind, ch.Verification.Message
		if cur == nil {
			id := switchboard.NewID("ins_")
			res, err := tx.ExecContext(ctx, `INSERT INTO instances (`+instanceColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8, $9, $10, $11, $12, $13)
				ON CONFLICT (tenant_id, slug) DO NOTHING`,
				id, string(tenant), ch.Slug, ch.ConnectorID, ch.ConnectorVersion, ch.AuthMode, string(agents), now,
				state, vkind, vmsg, details, verified)
			if database.IsForeignKeyViolation(err) {
				return notFound("tenant", string(tenant))
			}
			if err != nil {
				return fmt.Errorf("writing instance %s: %w", ch.Slug, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("writing instance %s: %w", ch.Slug, err)
			} else if n == 1 {
				created = true
			} else if ch.IfRevision != nil {
				return errInstanceChanged(ch.Slug) // another first PUT won
			} else if cur, err = s.instance(ctx, tx, tenant, ch.Slug); err != nil {
				return err
			}
		}
		switch {
		case created:
		case len(ch.Set) == 0 && len(ch.Clear) == 0 && sameRow(cur, ch, state):
			out = cur // nothing to write
		default:
			res, err := tx.ExecContext(ctx, `UPDATE instances SET connector_id = $1, connector_version = $2, auth_mode = $3,
				agents = $4, revision = revision + 1, updated_at = $5, auth_state = $6, verify_kind = $7,
				verify_message = $8, verify_details = $9, verified_at = $10
				WHERE id = $11 AND tenant_id = $12 AND revision = $13`,
				ch.ConnectorID, ch.ConnectorVersion, ch.AuthMode, string(agents), now, state, vkind, vmsg, details, verified,
				string(cur.ID), string(tenant), cur.Revision)
			if err != nil {
				return fmt.Errorf("writing instance %s: %w", ch.Slug, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("writing instance %s: %w", ch.Slug, err)
			} else if n == 0 {
				return errInstanceChanged(ch.Slug)
			}
		}
		if out == nil {
			if out, err = s.instance(ctx, tx, tenant, ch.Slug); err != nil {
				return err
			}
		}
		owner := out.SecretOwner()
		for name, v := range ch.Set {
			if err := s.secrets.PutTx(ctx, tx, secrets.Ref{Tenant: tenant, Owner: owner, Name: name}, v); err != nil {
				return err
			}
		}
		for _, name := range ch.Clear {
			if err := s.secrets.DeleteTx(ctx, tx, secrets.Ref{Tenant: tenant, Owner: owner, Name: name}); err != nil {
				return err
			}
		}
		if ch.Check != nil {
			metas, err := s.secrets.ListTx(ctx, tx, tenant, owner)
			if err != nil {
				return err
			}
			stored := map[string]bool{}
			for _, m := range metas {
				stored[m.Name] = true
			}
			return ch.Check(stored)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// FieldValues returns the decrypted field values of an instance, by name,
// and the names of its field rows that do not decrypt (a ciphertext moved
// to another row, a key no longer in the keyring). One bad row does not
// hide the others: the instance stays listable and its other fields
// usable, and the bad row can be overwritten. The names are sorted.
func (s *Store) FieldValues(ctx context.Context, in *Instance) (map[string]secrets.Secret, []string, error) {
	values, err := s.secrets.GetAll(ctx, in.TenantID, in.SecretOwner())
	if err == nil || !errors.Is(err, secrets.ErrUndecryptable) {
		return values, nil, err
	}
	// Some row does not open: read them one by one to find which.
	metas, err := s.secrets.List(ctx, in.TenantID, in.SecretOwner())
	if err != nil {
		return nil, nil, err
	}
	values = make(map[string]secrets.Secret, len(metas))
	var bad []string
	for _, m := range metas {
		v, err := s.secrets.Get(ctx, secrets.Ref{Tenant: in.TenantID, Owner: in.SecretOwner(), Name: m.Name})
		switch {
		case errors.Is(err, secrets.ErrUndecryptable):
			bad = append(bad, m.Name)
		case errors.Is(err, switchboard.ErrNotFound):
			// deleted meanwhile
		case err != nil:
			return nil, nil, err
		default:
			values[m.Name] = v
		}
	}
	return values, bad, nil
}

// DeleteInstance deletes the instance and every secret row it owns.
func (s *Store) DeleteInstance(ctx context.Context, tenant switchboard.TenantID, slug string) (*Instance, error) {
	var in *Instance
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if in, err = s.instance(ctx, tx, tenant, slug); err != nil {
			return err
		}
		if err := s.secrets.DeleteOwnerTx(ctx, tx, tenant, in.SecretOwner()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM instances WHERE id = $1 AND tenant_id = $2`, string(in.ID), string(tenant))
		return err
	})
	return in, err
}

// TokenPrefix starts every caller credential, so that leaked tokens are
// recognisable by secret scanners.
const TokenPrefix = "sbc_"

// HashToken is the stored form of a bearer credential.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a fresh credential: the prefix and 256 random bits.
func NewToken(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// CreateCaller issues a caller credential and returns it with the token,
// which is not stored and cannot be shown again.
func (s *Store) CreateCaller(ctx context.Context, tenant switchboard.TenantID, c Caller) (*Caller, secrets.Secret, error) {
	token := NewToken(TokenPrefix)
	c.ID = switchboard.CallerID(switchboard.NewID("cal_"))
	c.TenantID = tenant
	c.CreatedAt = s.now()
	c.RevokedAt = nil
	if c.UserMode == "" {
		c.UserMode = UserFixed
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO callers (id, tenant_id, name, kind, trusted, agent_id, user_id, token_hash, created_at, user_mode, external_subjects)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		string(c.ID), string(tenant), c.Name, c.Kind, c.Trusted, c.AgentID, c.UserID, HashToken(token), c.CreatedAt,
		c.UserMode, strings.Join(c.ExternalSubjects, "\n"))
	if database.IsForeignKeyViolation(err) {
		return nil, secrets.Secret{}, notFound("tenant", string(tenant))
	}
	if err != nil {
		return nil, secrets.Secret{}, fmt.Errorf("creating caller: %w", err)
	}
	return &c, secrets.New(token), nil
}

const callerColumns = `id, tenant_id, name, kind, trusted, agent_id, user_id, created_at, revoked_at, user_mode, external_subjects`

func scanCaller(row interface{ Scan(...any) error }) (*Caller, error) {
	var (
		c        Caller
		revoked  sql.NullTime
		external string
	)
	if err := row.Scan(&c.ID, &c.TenantID, &c.Name, &c.Kind, &c.Trusted, &c.AgentID, &c.UserID, &c.CreatedAt, &revoked,
		&c.UserMode, &external); err != nil {
		return nil, err
	}
	if external != "" {
		c.ExternalSubjects = strings.Split(external, "\n")
	}
	if revoked.Valid {
		c.RevokedAt = &revoked.Time
	}
	return &c, nil
}

// CallerByToken returns the live caller whose credential is token. An
// unknown or revoked token is ErrUnauthorized.
func (s *Store) CallerByToken(ctx context.Context, token string) (*Caller, error) {
	c, err := scanCaller(s.db.QueryRowContext(ctx, `SELECT `+callerColumns+` FROM callers WHERE token_hash = $1`, HashToken(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, switchboard.E(switchboard.ErrUnauthorized, "invalid_credential", "the caller credential is not valid")
	}
	if err != nil {
		return nil, fmt.Errorf("looking up caller: %w", err)
	}
	if c.RevokedAt != nil {
		return nil, switchboard.E(switchboard.ErrUnauthorized, "invalid_credential", "the caller credential is not valid")
	}
	return c, nil
}

// ListCallers returns the tenant's callers, newest first.
func (s *Store) ListCallers(ctx context.Context, tenant switchboard.TenantID) ([]*Caller, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+callerColumns+` FROM callers WHERE tenant_id = $1 ORDER BY created_at DESC, id`, string(tenant))
	if err != nil {
		return nil, fmt.Errorf("listing callers: %w", err)
	}
	defer rows.Close()
	out := []*Caller{}
	for rows.Next() {
		c, err := scanCaller(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// RevokeCaller revokes one of the tenant's callers. Revoking twice is fine.
func (s *Store) RevokeCaller(ctx context.Context, tenant switchboard.TenantID, id switchboard.CallerID) (*Caller, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE callers SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND tenant_id = $3`,
		s.now(), string(id), string(tenant))
	if err != nil {
		return nil, fmt.Errorf("revoking caller: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, notFound("caller", string(id))
	}
	return scanCaller(s.db.QueryRowContext(ctx, `SELECT `+callerColumns+` FROM callers WHERE id = $1 AND tenant_id = $2`, string(id), string(tenant)))
}
