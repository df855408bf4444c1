package secrets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// Ref names one secret row. Tenant is empty for platform-scope rows.
type Ref struct {
	Tenant switchboard.TenantID
	// Owner is what the value belongs to: "instance:<id>" for an app
	// instance's fields, "platform:<...>" for platform rows, and so on.
	Owner string
	// Name is the value's name, such as a connector field name.
	Name string
}

// Meta describes a stored secret without its value.
type Meta struct {
	Name      string
	KeyID     string
	UpdatedAt time.Time
}

// Store is the encrypted one-value-per-row store.
type Store struct {
	db   *database.DB
	keys *Keyring
	now  func() time.Time
}

// NewStore returns a store over db sealing with keys.
func NewStore(db *database.DB, keys *Keyring) *Store {
	return &Store{db: db, keys: keys, now: func() time.Time { return time.Now().UTC() }}
}

// The exported methods of Store open their own transaction (or run one
// statement); the ...Tx variants run inside a transaction another store
// opened, so that its rows and their secret rows commit together (as
// tenants and auth do). Every statement that writes is in this file; the
// call path reads an instance's rows with the instance
// (tenants.Store.InstanceForCall) and opens them here (OpenAll).

// Put stores (or replaces) the value of ref.
func (s *Store) Put(ctx context.Context, ref Ref, v Secret) error {
	return s.write(ctx, s.db, ref, v)
}

// PutTx is Put inside tx.
func (s *Store) PutTx(ctx context.Context, tx *sql.Tx, ref Ref, v Secret) error {
	return s.write(ctx, tx, ref, v)
}

func (s *Store) write(ctx context.Context, q database.Querier, ref Ref, v Secret) error {
	keyID, ct, err := s.keys.Seal(ref, []byte(v.Reveal()))
	if err != nil {
		return fmt.Errorf("sealing %s: %w", ref.Name, err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO secrets (tenant_id, owner, name, key_id, ciphertext, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (tenant_id, owner, name) DO UPDATE
		SET key_id = excluded.key_id, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at`,
		string(ref.Tenant), ref.Owner, ref.Name, keyID, ct, s.now())
	if err != nil {
		return fmt.Errorf("writing secret %s: %w", ref.Name, err)
	}
	return nil
}

// Get returns the value of ref, or an error wrapping switchboard.ErrNotFound.
func (s *Store) Get(ctx context.Context, ref Ref) (Secret, error) {
	var (
		keyID string
		ct    []byte
	)
	err := s.db.QueryRowContext(ctx, `SELECT key_id, ciphertext FROM secrets
		WHERE tenant_id = $1 AND owner = $2 AND name = $3`,
		string(ref.Tenant), ref.Owner, ref.Name).Scan(&keyID, &ct)
	if errors.Is(err, sql.ErrNoRows) {
		return Secret{}, switchboard.E(switchboard.ErrNotFound, "secret_not_set", "%s is not set", ref.Name)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("reading secret %s: %w", ref.Name, err)
	}
	pt, err := s.keys.Open(ref, keyID, ct)
	if err != nil {
		return Secret{}, err
	}
	return New(string(pt)), nil
}

// GetAll returns every value of one owner, by name, in one query.
func (s *Store) GetAll(ctx context.Context, tenant switchboard.TenantID, owner string) (map[string]Secret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, key_id, ciphertext FROM secrets
		WHERE tenant_id = $1 AND owner = $2`, string(tenant), owner)
	if err != nil {
		return nil, fmt.Errorf("reading secrets of %s: %w", owner, err)
	}
	defer rows.Close()
	var sealed []Sealed
	for rows.Next() {
		var r Sealed
		if err := rows.Scan(&r.Name, &r.KeyID, &r.Ciphertext); err != nil {
			return nil, err
		}
		sealed = append(sealed, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return s.OpenAll(tenant, owner, sealed)
}

// Sealed is one stored value as it is read, not yet opened: its name, the
// key that sealed it and the ciphertext. A store that reads an owner's
// rows with its own (tenants reads an instance and its fields in one
// query) opens them with OpenAll when the values are needed.
type Sealed struct {
	Name       string
	KeyID      string
	Ciphertext []byte
}

// OpenAll decrypts the sealed rows of one owner, by name. A row that does
// not open (another row's ciphertext, a key no longer held) is an error
// wrapping ErrUndecryptable that names the row, never a value.
func (s *Store) OpenAll(tenant switchboard.TenantID, owner string, sealed []Sealed) (map[string]Secret, error) {
	out := make(map[string]Secret, len(sealed))
	for _, r := range sealed {
		v, err := s.Open(tenant, owner, r)
		if err != nil {
			return nil, err
		}
		out[r.Name] = v
	}
	return out, nil
}

// Open decrypts one sealed row of owner; a row that does not open is an
// error wrapping ErrUndecryptable.
func (s *Store) Open(tenant switchboard.TenantID, owner string, r Sealed) (Secret, error) {
	pt, err := s.keys.Open(Ref{Tenant: tenant, Owner: owner, Name: r.Name}, r.KeyID, r.Ciphertext)
	if err != nil {
		return Secret{}, err
	}
	return New(string(pt)), nil
}

// Row is a stored value as read, sealed, with when it was last written.
type Row struct {
	Sealed
	UpdatedAt time.Time
}

// RowsOf returns the rows of each of owners of one tenant, sealed, by
// owner and sorted by name, in one query: a page of instances is
// rendered with one read of its field rows, not one per instance.
func (s *Store) RowsOf(ctx context.Context, tenant switchboard.TenantID, owners []string) (map[string][]Row, error) {
	out := make(map[string][]Row, len(owners))
	if len(owners) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(owners)+1)
	args = append(args, string(tenant))
	marks := make([]string, len(owners))
	for i, o := range owners {
		args = append(args, o)
		marks[i] = fmt.Sprintf("$%d", i+2)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT owner, name, key_id, ciphertext, updated_at FROM secrets
		WHERE tenant_id = $1 AND owner IN (`+strings.Join(marks, ", ")+`) ORDER BY owner, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading secrets of %d owners: %w", len(owners), err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			owner string
			r     Row
		)
		if err := rows.Scan(&owner, &r.Name, &r.KeyID, &r.Ciphertext, &r.UpdatedAt); err != nil {
			return nil, err
		}
		out[owner] = append(out[owner], r)
	}
	return out, rows.Err()
}

// List describes the secrets of one owner, sorted by name, without values.
func (s *Store) List(ctx context.Context, tenant switchboard.TenantID, owner string) ([]Meta, error) {
	return s.list(ctx, s.db, tenant, owner)
}

// ListTx is List inside tx.
func (s *Store) ListTx(ctx context.Context, tx *sql.Tx, tenant switchboard.TenantID, owner string) ([]Meta, error) {
	return s.list(ctx, tx, tenant, owner)
}

func (s *Store) list(ctx context.Context, q database.Querier, tenant switchboard.TenantID, owner string) ([]Meta, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, key_id, updated_at FROM secrets
		WHERE tenant_id = $1 AND owner = $2 ORDER BY name`, string(tenant), owner)
	if err != nil {
		return nil, fmt.Errorf("listing secrets of %s: %w", owner, err)
	}
	defer rows.Close()
	var out []Meta
	for rows.Next() {
		var m Meta
		if err := rows.Scan(&m.Name, &m.KeyID, &m.UpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Delete removes one row; deleting a missing row is not an error.
func (s *Store) Delete(ctx context.Context, ref Ref) error { return s.delete(ctx, s.db, ref) }

// DeleteTx is Delete inside tx.
func (s *Store) DeleteTx(ctx context.Context, tx *sql.Tx, ref Ref) error {
	return s.delete(ctx, tx, ref)
}

func (s *Store) delete(ctx context.Context, q database.Querier, ref Ref) error {
	_, err := q.ExecContext(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND owner = $2 AND name = $3`,
		string(ref.Tenant), ref.Owner, ref.Name)
	if err != nil {
		return fmt.Errorf("deleting secret %s: %w", ref.Name, err)
	}
	return nil
}

// DeleteOwner removes every row of one owner.
func (s *Store) DeleteOwner(ctx context.Context, tenant switchboard.TenantID, owner string) error {
	return s.deleteOwner(ctx, s.db, tenant, owner)
}

// DeleteOwnerTx is DeleteOwner inside tx.
func (s *Store) DeleteOwnerTx(ctx context.Context, tx *sql.Tx, tenant switchboard.TenantID, owner string) error {
	return s.deleteOwner(ctx, tx, tenant, owner)
}

func (s *Store) deleteOwner(ctx context.Context, q database.Querier, tenant switchboard.TenantID, owner string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND owner = $2`, string(tenant), owner)
	if err != nil {
		return fmt.Errorf("deleting secrets of %s: %w", owner, err)
	}
	return nil
}

// Rotate re-seals, under the primary key, every row sealed with another key,
// a batch at a time, and returns how many rows it re-sealed. It runs online:
// readers open either ciphertext while it works.
func (s *Store) Rotate(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.rotateBatch(ctx, 200)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func (s *Store) rotateBatch(ctx context.Context, limit int) (int, error) {
	n := 0
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT tenant_id, owner, name, key_id, ciphertext FROM secrets
			WHERE key_id <> $1 LIMIT $2`, s.keys.PrimaryID(), limit)
		if err != nil {
			return err
		}
		type row struct {
			ref Ref
			pt  []byte
		}
		var todo []row
		for rows.Next() {
			var (
				tenant, keyID string
				r             row
				ct            []byte
			)
			if err := rows.Scan(&tenant, &r.ref.Owner, &r.ref.Name, &keyID, &ct); err != nil {
				rows.Close()
				return err
			}
			r.ref.Tenant = switchboard.TenantID(tenant)
			if r.pt, err = s.keys.Open(r.ref, keyID, ct); err != nil {
				rows.Close()
				return err
			}
			todo = append(todo, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range todo {
			if err := s.write(ctx, tx, r.ref, New(string(r.pt))); err != nil {
				return err
			}
		}
		n = len(todo)
		return nil
	})
	return n, err
}

// userOwnerPrefix starts the owner of every user-scope row.
const userOwnerPrefix = "user:"

// UserOwner is the owner of one user's own values of an app instance
// (the fields of scope user): one row per (tenant, instance, user,
// field). Instance ids hold no colon, so the user id is everything after
// the second colon.
func UserOwner(instance, user string) string {
	return userOwnerPrefix + instance + ":" + user
}

// userOfOwner returns the user of a user-scope owner, or false.
func userOfOwner(owner string) (string, bool) {
	rest, ok := strings.CutPrefix(owner, userOwnerPrefix)
	if !ok {
		return "", false
	}
	_, user, ok := strings.Cut(rest, ":")
	return user, ok
}

// DeleteUserTx removes, inside tx, every user-scope row of user in
// tenant, on every instance (a member's removal). It returns how many
// owners it cleared.
func (s *Store) DeleteUserTx(ctx context.Context, tx *sql.Tx, tenant switchboard.TenantID, user string) (int, error) {
	return DeleteUserRows(ctx, tx, tenant, user)
}

// DeleteUserRows is DeleteUserTx for stores that hold no Store (the
// members store runs it in a removal's transaction): deleting needs no
// key.
func DeleteUserRows(ctx context.Context, q database.Querier, tenant switchboard.TenantID, user string) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT owner FROM secrets WHERE tenant_id = $1 AND owner LIKE 'user:%'`, string(tenant))
	if err != nil {
		return 0, fmt.Errorf("listing user-scope secrets: %w", err)
	}
	var owners []string
	for rows.Next() {
		var owner string
		if err := rows.Scan(&owner); err != nil {
			rows.Close()
			return 0, err
		}
		if u, ok := userOfOwner(owner); ok && u == user {
			owners = append(owners, owner)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, owner := range owners {
		if err := (&Store{}).deleteOwner(ctx, q, tenant, owner); err != nil {
			return 0, err
		}
	}
	return len(owners), nil
}

// DeleteInstanceUsersTx removes, inside tx, every user's own values of
// the instance (the instance's deletion).
func (s *Store) DeleteInstanceUsersTx(ctx context.Context, tx *sql.Tx, tenant switchboard.TenantID, instance string) error {
	prefix := userOwnerPrefix + instance + ":"
	_, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND substr(owner, 1, $2) = $3`,
		string(tenant), len(prefix), prefix)
	if err != nil {
		return fmt.Errorf("deleting the instance's user-scope secrets: %w", err)
	}
	return nil
}
