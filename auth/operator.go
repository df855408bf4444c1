package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// OperatorTokenPrefix starts every generated operator token, so that a
// leaked one is recognisable by secret scanners.
const OperatorTokenPrefix = "sba_"

// generatedOperatorID is the row id of the token Ensure generates. A fixed
// id makes generation race-free across replicas starting together: only
// one INSERT of it can succeed.
const generatedOperatorID = "opt_generated"

// maxOperatorTokenLen bounds what Verify hashes; longer tokens are refused.
const maxOperatorTokenLen = 1024

// Operators verifies the platform operator's bearer tokens for the admin
// API. Only SHA-256 hashes of the tokens are stored; hashes verified once
// are cached in memory, so an admin request after the first costs no
// database round trip.
type Operators struct {
	db  *database.DB
	now func() time.Time

	mu    sync.RWMutex
	known map[string]bool // token hashes verified against the store
}

// NewOperators returns the operator token store over db.
func NewOperators(db *database.DB) *Operators {
	return &Operators{
		db:    db,
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		known: map[string]bool{},
	}
}

// Ensure makes sure an operator token exists. When envToken (the value of
// SWITCHBOARD_ADMIN_TOKEN) is set, its hash is stored (idempotently) and
// the zero Secret is returned. Otherwise, when no token is stored yet, a
// new one is generated, its hash stored, and the token returned so the
// caller can print it once; it cannot be shown again. Otherwise Ensure
// returns the zero Secret.
func (o *Operators) Ensure(ctx context.Context, envToken string) (generated secrets.Secret, err error) {
	if envToken != "" {
		if len(envToken) > maxOperatorTokenLen {
			return secrets.Secret{}, switchboard.E(switchboard.ErrInvalid, "invalid_admin_token",
				"SWITCHBOARD_ADMIN_TOKEN is longer than %d characters", maxOperatorTokenLen)
		}
		hash := tenants.HashToken(envToken)
		_, err := o.db.ExecContext(ctx, `INSERT INTO operator_tokens (id, token_hash, created_at)
			VALUES ($1, $2, $3) ON CONFLICT (token_hash) DO NOTHING`,
			switchboard.NewID("opt_"), hash, o.now())
		if err != nil {
			return secrets.Secret{}, fmt.Errorf("storing the operator token: %w", err)
		}
		o.remember(hash)
		return secrets.Secret{}, nil
	}
	var n int
	if err := o.db.QueryRowContext(ctx, `SELECT count(*) FROM operator_tokens`).Scan(&n); err != nil {
		return secrets.Secret{}, fmt.Errorf("counting operator tokens: %w", err)
	}
	if n > 0 {
		return secrets.Secret{}, nil
	}
	token := tenants.NewToken(OperatorTokenPrefix)
	hash := tenants.HashToken(token)
	res, err := o.db.ExecContext(ctx, `INSERT INTO operator_tokens (id, token_hash, created_at)
		VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, generatedOperatorID, hash, o.now())
	if err != nil {
		return secrets.Secret{}, fmt.Errorf("storing the operator token: %w", err)
	}
	if rows, err := res.RowsAffected(); err == nil && rows == 0 {
		// Another replica generated the token first; it printed it.
		return secrets.Secret{}, nil
	}
	o.remember(hash)
	return secrets.New(token), nil
}

// Verify reports whether token is a valid operator token. The token is
// compared by its SHA-256 hash, never by its bytes, so the comparison does
// not leak how much of a guess was right. Verified hashes are cached;
// unknown tokens are looked up each time and never cached.
func (o *Operators) Verify(ctx context.Context, token string) bool {
	if token == "" || len(token) > maxOperatorTokenLen {
		return false
	}
	hash := tenants.HashToken(token)
	o.mu.RLock()
	ok := o.known[hash]
	o.mu.RUnlock()
	if ok {
		return true
	}
	var id string
	err := o.db.QueryRowContext(ctx, `SELECT id FROM operator_tokens WHERE token_hash = $1`, hash).Scan(&id)
	if err != nil {
		// Unknown token, or a store failure: either way a refusal.
		return false
	}
	o.remember(hash)
	return true
}

func (o *Operators) remember(hash string) {
	o.mu.Lock()
	o.known[hash] = true
	o.mu.Unlock()
}
