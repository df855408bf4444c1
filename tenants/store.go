package tenants

import (
	"cmp"
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
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

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
	// shared holds the tenants CachedTenant returned, by slug.
	shared *lru.Cache[string, *Tenant]
	// forgets counts forgetTenant's calls, so that CachedTenant does not
	// keep a read that raced with one.
	forgets atomic.Uint64
}

// maxCachedTenants bounds CachedTenant's cache: a tenant is about 200
// bytes with its LRU entry, so 100,000 (the scale issue 19 aims at, every
// tenant with a warm instance) hold about 20 MB. A tenant evicted here
// while cached targets still point at it would be read, and held, twice.
const maxCachedTenants = 100_000

// NewStore returns a store over db writing field values to sec.
func NewStore(db *database.DB, sec *secrets.Store) *Store {
	shared, _ := lru.New[string, *Tenant](maxCachedTenants)
	return &Store{db: db, secrets: sec, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }, shared: shared}
}

// Secrets returns the secret store the tenant store writes field values to.
func (s *Store) Secrets() *secrets.Store { return s.secrets }

func notFound(what, name string) error {
	return switchboard.E(switchboard.ErrNotFound, what+"_not_found", "%s %q does not exist", what, name)
}

// CreateTenant creates a tenant; a taken slug is a conflict.
func (s *Store) CreateTenant(ctx context.Context, slug, name string) (*Tenant, error) {
	return s.createTenant(ctx, slug, name, nil)
}

// createTenant creates a tenant and, when log is not nil, logs it as the
// change (filled with the tenant) in the same transaction (logChange).
func (s *Store) createTenant(ctx context.Context, slug, name string, log *Change) (*Tenant, error) {
	t := &Tenant{ID: switchboard.TenantID(switchboard.NewID("ten_")), Slug: slug, Name: name, CreatedAt: s.now()}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, $4)`,
			string(t.ID), t.Slug, t.Name, t.CreatedAt); err != nil {
			return err
		}
		if log == nil {
			return nil
		}
		log.Tenant, log.TenantSlug = t.ID, t.Slug
		return s.logChange(ctx, tx, log)
	})
	if database.IsUniqueViolation(err) {
		return nil, switchboard.E(switchboard.ErrConflict, "tenant_exists", "tenant %q already exists", slug)
	}
	if err != nil {
		return nil, fmt.Errorf("creating tenant %s: %w", slug, err)
	}
	return t, nil
}

// logChange writes c to the change log inside tx, the transaction of the
// change itself, so that either both commit or neither, and sets c.Seq;
// on Postgres the other replicas are notified when tx commits
// (database.DB.LogChangeTx).
func (s *Store) logChange(ctx context.Context, tx *sql.Tx, c *Change) error {
	c.Seq = 0
	payload, err := json.Marshal(c)
	if err != nil {
		return err
	}
	c.Seq, err = s.db.LogChangeTx(ctx, tx, ChangesChannel, payload)
	return err
}

// Tenant returns the tenant with the given slug.
func (s *Store) Tenant(ctx context.Context, slug string) (*Tenant, error) {
	return s.tenantWhere(ctx, "slug", slug)
}

// CachedTenant is Tenant for the call path: a tenant found once is kept
// (bounded LRU) and the same *Tenant is returned to every caller, which
// must not modify it. Its settings (SetContextBudget) are the only
// statement that updates a tenant row, and it logs a tenant change, whose
// delivery on every replica drops the slug here (Service.deliver) before
// any other subscriber hears it; an unknown slug is not kept here (the
// gateway remembers unknown ones, and forgets them on the tenant's
// creation).
//
// The tenant it returns carries the change log's position its read saw
// (Tenant.Read). A read that raced with a delivery dropping tenants is
// returned but not kept: it may predate the change delivered.
func (s *Store) CachedTenant(ctx context.Context, slug string) (*Tenant, error) {
	if t, ok := s.shared.Get(slug); ok {
		return t, nil
	}
	forgets := s.forgets.Load()
	t, err := s.tenantRead(ctx, "slug", slug, true)
	if err != nil {
		return nil, err
	}
	if s.forgets.Load() == forgets {
		s.shared.Add(slug, t)
	}
	return t, nil
}

func intOrNil(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}

// setContextBudget sets the tenant's context budget (nil: the operator's
// default) and logs the tenant's change in the same transaction.
func (s *Store) setContextBudget(ctx context.Context, t *Tenant, budget *int, log *Change) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		var v any
		if budget != nil {
			v = *budget
		}
		res, err := tx.ExecContext(ctx, `UPDATE tenants SET mcp_context_budget = $1 WHERE id = $2`, v, string(t.ID))
		if err != nil {
			return fmt.Errorf("setting the context budget of %s: %w", t.Slug, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound("tenant", t.Slug)
		}
		log.Tenant, log.TenantSlug = t.ID, t.Slug
		return s.logChange(ctx, tx, log)
	})
}

// forgetTenant drops what CachedTenant holds of a changed tenant (every
// tenant when slug is "").
func (s *Store) forgetTenant(slug string) {
	s.forgets.Add(1)
	if slug == "" {
		s.shared.Purge()
		return
	}
	s.shared.Remove(slug)
}

// TenantByID returns the tenant with the given id (sessions name tenants
// by id).
func (s *Store) TenantByID(ctx context.Context, id switchboard.TenantID) (*Tenant, error) {
	return s.tenantWhere(ctx, "id", string(id))
}

// tenantWhere returns the tenant whose col (slug or id, both unique) is v.
func (s *Store) tenantWhere(ctx context.Context, col, v string) (*Tenant, error) {
	return s.tenantRead(ctx, col, v, false)
}

// tenantRead is tenantWhere, with the change log's position the read saw
// in Tenant.Read when withPosition is set.
func (s *Store) tenantRead(ctx context.Context, col, v string, withPosition bool) (*Tenant, error) {
	var t Tenant
	var budget sql.NullInt64
	q, dest := `SELECT id, slug, name, created_at, mcp_context_budget FROM tenants WHERE `+col+` = $1`,
		[]any{&t.ID, &t.Slug, &t.Name, &t.CreatedAt, &budget}
	if withPosition {
		q = `SELECT id, slug, name, created_at, mcp_context_budget, ` + s.db.Dialect.ChangePosition() + `
			FROM tenants WHERE ` + col + ` = $1`
		dest = append(dest, t.Read.Scan()...)
	}
	err := s.db.QueryRowContext(ctx, q, v).Scan(dest...)
	t.MCPContextBudget = intOrNil(budget)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("tenant", v)
	}
	if err != nil {
		return nil, fmt.Errorf("loading tenant %s: %w", v, err)
	}
	return &t, nil
}

// ListTenants returns every tenant, by slug.
func (s *Store) ListTenants(ctx context.Context) ([]*Tenant, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]*Tenant, string, error) { return s.TenantsPage(ctx, q) })
}

// TenantsPage returns one page of the tenants, by slug, and the cursor of
// the next page.
func (s *Store) TenantsPage(ctx context.Context, q switchboard.PageQuery) ([]*Tenant, string, error) {
	return database.Page(ctx, s.db, "tenants", database.By("slug"), q,
		`SELECT id, slug, name, created_at, mcp_context_budget FROM tenants WHERE TRUE`, nil,
		func(row database.Row) (*Tenant, error) {
			var t Tenant
			var budget sql.NullInt64
			err := row.Scan(&t.ID, &t.Slug, &t.Name, &t.CreatedAt, &budget)
			t.CreatedAt = t.CreatedAt.UTC()
			t.MCPContextBudget = intOrNil(budget)
			return &t, err
		},
		func(t *Tenant) []any { return []any{t.Slug} })
}

// InstanceCounts returns the number of instances of every tenant that has
// any, by tenant id (the operator's tenants overview).
func (s *Store) InstanceCounts(ctx context.Context) (map[switchboard.TenantID]int, error) {
	counts, err := database.Counts[switchboard.TenantID](ctx, s.db, `SELECT tenant_id, count(*) FROM instances GROUP BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("counting instances: %w", err)
	}
	return counts, nil
}

const instanceColumns = `id, tenant_id, slug, connector_id, connector_version, auth_mode, agents, revision, created_at, updated_at,
	auth_state, verify_kind, verify_message, verify_details, verified_at, tools_mode`

func scanInstance(row interface{ Scan(...any) error }) (*Instance, error) {
	return scanInstanceWith(row)
}

// scanInstanceWith scans a row of instanceColumns, and into extra the
// columns a query adds after them.
func scanInstanceWith(row interface{ Scan(...any) error }, extra ...any) (*Instance, error) {
	var (
		in       Instance
		agents   string
		details  string
		verified sql.NullTime
	)
	if err := row.Scan(append([]any{&in.ID, &in.TenantID, &in.Slug, &in.ConnectorID, &in.ConnectorVersion, &in.AuthMode,
		&agents, &in.Revision, &in.CreatedAt, &in.UpdatedAt,
		&in.AuthState, &in.Verification.Kind, &in.Verification.Message, &details, &verified, &in.ToolsMode}, extra...)...); err != nil {
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

// InstanceForCall returns the tenant's instance with the given slug and
// its field rows, still sealed, in one query: what the call path loads
// for an instance it does not hold. The values are opened
// (secrets.Store.OpenAll) only when a call needs them, after
// validateAgent. The instance's Read is the change log's position the
// same query saw: the changes the instance and fields returned already
// reflect, whose notifications need not drop what is cached from them.
func (s *Store) InstanceForCall(ctx context.Context, tenant switchboard.TenantID, slug string) (*Instance, []secrets.Sealed, error) {
	var pos database.ChangePosition
	rows, err := s.db.QueryContext(ctx, `SELECT `+instanceColumnsOf("i")+`, f.name, f.key_id, f.ciphertext, `+s.db.Dialect.ChangePosition()+`
		FROM instances i LEFT JOIN secrets f ON f.tenant_id = i.tenant_id AND f.owner = '`+InstanceOwner("")+`' || i.id
		WHERE i.tenant_id = $1 AND i.slug = $2`, string(tenant), slug)
	if err != nil {
		return nil, nil, fmt.Errorf("loading instance %s: %w", slug, err)
	}
	defer rows.Close()
	var (
		in     *Instance
		sealed = []secrets.Sealed{}
	)
	for rows.Next() {
		var (
			name, keyID sql.NullString
			ct          []byte
		)
		row, err := scanInstanceWith(rows, append([]any{&name, &keyID, &ct}, pos.Scan()...)...)
		if err != nil {
			return nil, nil, fmt.Errorf("loading instance %s: %w", slug, err)
		}
		if in == nil {
			in = row
			in.Read = pos
		}
		if name.Valid {
			sealed = append(sealed, secrets.Sealed{Name: name.String, KeyID: keyID.String, Ciphertext: ct})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("loading instance %s: %w", slug, err)
	}
	if in == nil {
		return nil, nil, notFound("instance", slug)
	}
	return in, sealed, nil
}

// instanceColumnsOf is instanceColumns qualified by the alias a.
func instanceColumnsOf(a string) string {
	cols := strings.Split(instanceColumns, ",")
	for i, c := range cols {
		cols[i] = a + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// ListInstances returns the tenant's instances, by slug.
func (s *Store) ListInstances(ctx context.Context, tenant switchboard.TenantID) ([]*Instance, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]*Instance, string, error) { return s.InstancesPage(ctx, tenant, q) })
}

// InstancesPage returns one page of the tenant's instances, by slug, and
// the cursor of the next page.
func (s *Store) InstancesPage(ctx context.Context, tenant switchboard.TenantID, q switchboard.PageQuery) ([]*Instance, string, error) {
	return database.Page(ctx, s.db, "instances:"+string(tenant), database.By("slug"), q,
		`SELECT `+instanceColumns+` FROM instances WHERE tenant_id = $1`, []any{string(tenant)},
		scanInstance, func(in *Instance) []any { return []any{in.Slug} })
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
	// ToolsMode is the instance endpoint's tools mode; "" keeps the
	// stored one (ToolsAuto for a new instance).
	ToolsMode string
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
		cur.AuthMode == ch.AuthMode && slices.Equal(cur.Agents, ch.Agents) && cur.AuthState == state &&
		cur.ToolsMode == ch.ToolsMode
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
	return s.putInstance(ctx, tenant, ch, nil)
}

// putInstance is PutInstance; when log is not nil and the instance was
// written, it logs log in the same transaction (logChange).
func (s *Store) putInstance(ctx context.Context, tenant switchboard.TenantID, ch InstanceChange, log *Change) (*Instance, bool, error) {
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
				VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8, $9, $10, $11, $12, $13, $14)
				ON CONFLICT (tenant_id, slug) DO NOTHING`,
				id, string(tenant), ch.Slug, ch.ConnectorID, ch.ConnectorVersion, ch.AuthMode, string(agents), now,
				state, vkind, vmsg, details, verified, cmp.Or(ch.ToolsMode, ToolsAuto))
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
		if ch.ToolsMode == "" && cur != nil {
			ch.ToolsMode = cur.ToolsMode // kept
		}
		switch {
		case created:
		case len(ch.Set) == 0 && len(ch.Clear) == 0 && sameRow(cur, ch, state):
			out = cur // nothing to write
			log = nil
		default:
			res, err := tx.ExecContext(ctx, `UPDATE instances SET connector_id = $1, connector_version = $2, auth_mode = $3,
				agents = $4, revision = revision + 1, updated_at = $5, auth_state = $6, verify_kind = $7,
				verify_message = $8, verify_details = $9, verified_at = $10, tools_mode = $11
				WHERE id = $12 AND tenant_id = $13 AND revision = $14`,
				ch.ConnectorID, ch.ConnectorVersion, ch.AuthMode, string(agents), now, state, vkind, vmsg, details, verified,
				ch.ToolsMode, string(cur.ID), string(tenant), cur.Revision)
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
			if err := ch.Check(stored); err != nil {
				return err
			}
		}
		if log != nil {
			return s.logChange(ctx, tx, log)
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
	return s.deleteInstance(ctx, tenant, slug, nil)
}

// deleteInstance is DeleteInstance; when log is not nil, it logs log in
// the same transaction (logChange).
func (s *Store) deleteInstance(ctx context.Context, tenant switchboard.TenantID, slug string, log *Change) (*Instance, error) {
	var in *Instance
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if in, err = s.instance(ctx, tx, tenant, slug); err != nil {
			return err
		}
		if err := s.secrets.DeleteOwnerTx(ctx, tx, tenant, in.SecretOwner()); err != nil {
			return err
		}
		if err := s.secrets.DeleteInstanceUsersTx(ctx, tx, tenant, string(in.ID)); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM instances WHERE id = $1 AND tenant_id = $2`, string(in.ID), string(tenant)); err != nil || log == nil {
			return err
		}
		return s.logChange(ctx, tx, log)
	})
	return in, err
}

// TokenPrefix starts every caller credential, so that leaked tokens are
// recognisable by secret scanners.
const TokenPrefix = "sbc_"

// HashToken is the stored form of a bearer credential: TokenDigest,
// hex-encoded.
func HashToken(token string) string {
	// Hex-encoded on the stack (every authenticated call hashes its
	// credential): one allocation, the result.
	h := TokenDigest(token)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h[:])
	return string(out[:])
}

// TokenDigest is the SHA-256 of a bearer credential, hashed on the stack
// (no allocation): HashToken's digest, for caches keyed by it.
func TokenDigest(token string) [sha256.Size]byte {
	var in [128]byte
	return sha256.Sum256(append(in[:0], token...))
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
	return s.createCaller(ctx, tenant, c, nil)
}

// createCaller is CreateCaller; when log is not nil, it logs log (filled
// with the caller's id) in the same transaction (logChange).
func (s *Store) createCaller(ctx context.Context, tenant switchboard.TenantID, c Caller, log *Change) (*Caller, secrets.Secret, error) {
	token := NewToken(TokenPrefix)
	c.ID = switchboard.CallerID(switchboard.NewID("cal_"))
	c.TenantID = tenant
	c.CreatedAt = s.now()
	c.RevokedAt = nil
	if c.UserMode == "" {
		c.UserMode = UserFixed
	}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO callers (id, tenant_id, name, kind, trusted, agent_id, user_id, token_hash, created_at, user_mode, external_subjects)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			string(c.ID), string(tenant), c.Name, c.Kind, c.Trusted, c.AgentID, c.UserID, HashToken(token), c.CreatedAt,
			c.UserMode, strings.Join(c.ExternalSubjects, "\n")); err != nil || log == nil {
			return err
		}
		log.Caller = c.ID
		return s.logChange(ctx, tx, log)
	})
	if database.IsForeignKeyViolation(err) {
		return nil, secrets.Secret{}, notFound("tenant", string(tenant))
	}
	if err != nil {
		return nil, secrets.Secret{}, fmt.Errorf("creating caller: %w", err)
	}
	return &c, secrets.New(token), nil
}

const callerColumns = `id, tenant_id, name, kind, trusted, agent_id, user_id, created_at, revoked_at, user_mode, external_subjects, last_used_at`

func scanCaller(row interface{ Scan(...any) error }) (*Caller, error) {
	var (
		c             Caller
		revoked, used sql.NullTime
		external      string
	)
	if err := row.Scan(&c.ID, &c.TenantID, &c.Name, &c.Kind, &c.Trusted, &c.AgentID, &c.UserID, &c.CreatedAt, &revoked,
		&c.UserMode, &external, &used); err != nil {
		return nil, err
	}
	if used.Valid {
		t := used.Time.UTC()
		c.LastUsedAt = &t
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

// CallerTouchInterval is how often, at most, a server records a caller's
// use (TouchCaller): a caller calling continuously costs one write a
// minute per server, not one per call.
const CallerTouchInterval = time.Minute

// TouchCaller records that caller id authenticated a call at at; an
// earlier time never overwrites a later one (servers touch in any order).
func (s *Store) TouchCaller(ctx context.Context, id switchboard.CallerID, at time.Time) error {
	at = at.UTC().Truncate(time.Microsecond)
	if _, err := s.db.ExecContext(ctx, `UPDATE callers SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)`,
		at, string(id)); err != nil {
		return fmt.Errorf("recording a caller's use: %w", err)
	}
	return nil
}

// CallersPage returns one page of the tenant's callers, newest first, and
// the cursor of the next page.
func (s *Store) CallersPage(ctx context.Context, tenant switchboard.TenantID, q switchboard.PageQuery) ([]*Caller, string, error) {
	return database.Page(ctx, s.db, "callers:"+string(tenant), database.NewestFirst, q,
		`SELECT `+callerColumns+` FROM callers WHERE tenant_id = $1`, []any{string(tenant)},
		scanCaller, func(c *Caller) []any { return []any{c.CreatedAt, string(c.ID)} })
}

// RevokeCaller revokes one of the tenant's callers. Revoking twice is fine.
func (s *Store) RevokeCaller(ctx context.Context, tenant switchboard.TenantID, id switchboard.CallerID) (*Caller, error) {
	return s.revokeCaller(ctx, tenant, id, nil)
}

// revokeCaller is RevokeCaller; when log is not nil, it logs log in the
// same transaction (logChange).
func (s *Store) revokeCaller(ctx context.Context, tenant switchboard.TenantID, id switchboard.CallerID, log *Change) (*Caller, error) {
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE callers SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND tenant_id = $3`,
			s.now(), string(id), string(tenant))
		if err != nil {
			return fmt.Errorf("revoking caller: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("caller", string(id))
		}
		if log == nil {
			return nil
		}
		return s.logChange(ctx, tx, log)
	})
	if err != nil {
		return nil, err
	}
	return scanCaller(s.db.QueryRowContext(ctx, `SELECT `+callerColumns+` FROM callers WHERE id = $1 AND tenant_id = $2`, string(id), string(tenant)))
}
