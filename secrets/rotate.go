package secrets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// Has reports whether the keyring holds the key with id.
func (k *Keyring) Has(keyID string) bool {
	_, ok := k.aeads[keyID]
	return ok
}

// KeyUsage is how many secret rows are sealed under one key.
type KeyUsage struct {
	KeyID string `json:"key_id"`
	Rows  int    `json:"rows"`
	// Primary is true for the key new rows are sealed with.
	Primary bool `json:"primary"`
	// InKeyring is false for a key this process cannot open: rows under
	// it are undecryptable until the key is given back.
	InKeyring bool `json:"in_keyring"`
}

// KeyUsage counts the secret rows per key id, the primary key first.
func (s *Store) KeyUsage(ctx context.Context) ([]KeyUsage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, count(*) FROM secrets GROUP BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("counting secret rows per key: %w", err)
	}
	defer rows.Close()
	var out []KeyUsage
	for rows.Next() {
		var u KeyUsage
		if err := rows.Scan(&u.KeyID, &u.Rows); err != nil {
			return nil, fmt.Errorf("counting secret rows per key: %w", err)
		}
		u.Primary, u.InKeyring = u.KeyID == s.keys.PrimaryID(), s.keys.Has(u.KeyID)
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Primary != out[j].Primary {
			return out[i].Primary
		}
		return out[i].KeyID < out[j].KeyID
	})
	return out, rows.Err()
}

// ResealOptions tune Reseal.
type ResealOptions struct {
	// BatchSize is how many rows are read per query; default 200.
	BatchSize int
	// AfterBatch, when set, is called after each batch with the totals so
	// far (progress output; tests stop a run half way through).
	AfterBatch func(ResealReport)
}

// ResealReport is what Reseal did.
type ResealReport struct {
	// Resealed rows are now sealed under the primary key.
	Resealed int `json:"resealed"`
	// Skipped rows changed while Reseal worked (another replica wrote a
	// new value); the writer sealed them, so they need nothing more.
	Skipped int `json:"skipped"`
	// Failed rows do not open with any key of the keyring; they are left
	// as they are and named here (never their values).
	Failed []Ref `json:"failed,omitempty"`
}

// resealRow is one row as read, before it is re-sealed.
type resealRow struct {
	ref   Ref
	keyID string
	ct    []byte
}

// Reseal re-seals under the primary key every secret row sealed with
// another key, online: rows are read in primary-key order a batch at a
// time, and each is written back with a compare-and-swap on its old key
// id and ciphertext, so a value another replica writes meanwhile is never
// overwritten with the old one. Each batch commits on its own, so a run
// that stops (a cancelled context, a lost connection) is resumed by
// running it again; rows already re-sealed are not read again. Every
// replica must hold the new primary key (and the old keys as previous
// keys) before Reseal runs, or it cannot open what Reseal writes.
func (s *Store) Reseal(ctx context.Context, opts ResealOptions) (ResealReport, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 200
	}
	var (
		rep   ResealReport
		after = Ref{}
		first = true
	)
	for {
		batch, err := s.resealBatch(ctx, after, first, opts.BatchSize)
		if err != nil {
			return rep, err
		}
		if len(batch) == 0 {
			return rep, nil
		}
		if err := s.resealBatchRows(ctx, batch, &rep); err != nil {
			return rep, err
		}
		after, first = batch[len(batch)-1].ref, false
		if opts.AfterBatch != nil {
			opts.AfterBatch(rep)
		}
	}
}

// resealBatch reads the next rows after the cursor that are not sealed
// under the primary key.
func (s *Store) resealBatch(ctx context.Context, after Ref, first bool, limit int) ([]resealRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant_id, owner, name, key_id, ciphertext FROM secrets
		WHERE key_id <> $1 AND ($2 OR (tenant_id, owner, name) > ($3, $4, $5))
		ORDER BY tenant_id, owner, name LIMIT $6`,
		s.keys.PrimaryID(), first, string(after.Tenant), after.Owner, after.Name, limit)
	if err != nil {
		return nil, fmt.Errorf("reading secret rows to re-seal: %w", err)
	}
	defer rows.Close()
	var out []resealRow
	for rows.Next() {
		var (
			r      resealRow
			tenant string
		)
		if err := rows.Scan(&tenant, &r.ref.Owner, &r.ref.Name, &r.keyID, &r.ct); err != nil {
			return nil, fmt.Errorf("reading secret rows to re-seal: %w", err)
		}
		r.ref.Tenant = switchboard.TenantID(tenant)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading secret rows to re-seal: %w", err)
	}
	return out, nil
}

// resealBatchRows re-seals the rows of one batch: each is opened and
// sealed first, then all are swapped in one transaction (one commit per
// batch, not per row), each by a compare-and-swap on what was read.
func (s *Store) resealBatchRows(ctx context.Context, batch []resealRow, rep *ResealReport) error {
	type sealed struct {
		r     resealRow
		keyID string
		ct    []byte
	}
	var todo []sealed
	for _, r := range batch {
		keyID, ct, err := s.sealAgain(r)
		if errors.Is(err, ErrUndecryptable) {
			rep.Failed = append(rep.Failed, r.ref)
			continue
		}
		if err != nil {
			return err
		}
		todo = append(todo, sealed{r, keyID, ct})
	}
	resealed, skipped := 0, 0
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		resealed, skipped = 0, 0
		for _, t := range todo {
			swapped, err := swapSealed(ctx, tx, t.r, t.keyID, t.ct)
			if err != nil {
				return err
			}
			if swapped {
				resealed++
			} else {
				skipped++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.Resealed += resealed
	rep.Skipped += skipped
	return nil
}

// sealAgain opens a row as read and seals its value under the primary key.
func (s *Store) sealAgain(r resealRow) (keyID string, ct []byte, err error) {
	pt, err := s.keys.Open(r.ref, r.keyID, r.ct)
	if err != nil {
		return "", nil, err
	}
	defer clear(pt)
	keyID, ct, err = s.keys.Seal(r.ref, pt)
	if err != nil {
		return "", nil, fmt.Errorf("sealing %s: %w", r.ref.Name, err)
	}
	return keyID, ct, nil
}

// resealRow re-seals one row on its own; swapped is false when the row no
// longer holds what was read.
func (s *Store) resealRow(ctx context.Context, r resealRow) (swapped bool, err error) {
	keyID, ct, err := s.sealAgain(r)
	if err != nil {
		return false, err
	}
	return swapSealed(ctx, s.db, r, keyID, ct)
}

// swapSealed writes the new ciphertext of r if the row still holds the
// key id and ciphertext that were read.
func swapSealed(ctx context.Context, q database.Querier, r resealRow, keyID string, ct []byte) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE secrets SET key_id = $1, ciphertext = $2
		WHERE tenant_id = $3 AND owner = $4 AND name = $5 AND key_id = $6 AND ciphertext = $7`,
		keyID, ct, string(r.ref.Tenant), r.ref.Owner, r.ref.Name, r.keyID, r.ct)
	if err != nil {
		return false, fmt.Errorf("re-sealing %s/%s/%s: %w", r.ref.Tenant, r.ref.Owner, r.ref.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("re-sealing %s/%s/%s: %w", r.ref.Tenant, r.ref.Owner, r.ref.Name, err)
	}
	return n == 1, nil
}
