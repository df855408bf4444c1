package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// OperatorTokenPrefix starts every generated operator token, so that a
// leaked one is recognisable by secret scanners.
const OperatorTokenPrefix = "sba_"

// Sources of operator tokens.
const (
	// OperatorSourceEnv is the token of SWITCHBOARD_ADMIN_TOKEN. Only the
	// current value is live: a start with another value revokes it.
	OperatorSourceEnv = "env"
	// OperatorSourceGenerated is the token generated and printed at the
	// first start.
	OperatorSourceGenerated = "generated"
	// OperatorSourceCreated is a token created through the admin API or
	// `switchboard admin token create`.
	OperatorSourceCreated = "created"
)

// maxOperatorTokenLen bounds what Verify hashes; longer tokens are refused.
const maxOperatorTokenLen = 1024

// maxOperatorNameLen bounds an operator token's name.
const maxOperatorNameLen = 100

// OperatorTouchInterval is how often, at most, a replica records that a
// token was used, and so how long a token revoked on another replica may
// still be accepted by this one: a verified token is re-checked against
// the store (an UPDATE of last_used_at that only matches live tokens)
// once per interval, not on every request.
const OperatorTouchInterval = time.Minute

// OperatorToken is the record of an operator token; the token itself is
// never stored, only its SHA-256.
type OperatorToken struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Source     string     `json:"source"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Operators verifies the platform operator's bearer tokens for the admin
// API, and creates, lists and revokes them. Only SHA-256 hashes of the
// tokens are stored. A verified token is cached in memory for
// OperatorTouchInterval, so admin requests cost one store round trip per
// token per interval.
type Operators struct {
	db  *database.DB
	now func() time.Time

	mu    sync.Mutex
	known map[string]verifiedToken // by token hash
}

// verifiedToken is a cache entry: the token's row id and when the store
// last confirmed it live.
type verifiedToken struct {
	id      string
	checked time.Time
}

// NewOperators returns the operator token store over db.
func NewOperators(db *database.DB) *Operators {
	return &Operators{
		db:    db,
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		known: map[string]verifiedToken{},
	}
}

// WithClock replaces the clock (tests move it past OperatorTouchInterval)
// and returns o.
func (o *Operators) WithClock(now func() time.Time) *Operators {
	o.now = now
	return o
}

// UseEnvToken makes envToken (the value of SWITCHBOARD_ADMIN_TOKEN) a live
// operator token, idempotently, and revokes every other token that came
// from the environment: after the variable changes, the old value no
// longer works. An empty envToken changes nothing, so a server started
// without the variable (a one-off debugging run, say) cannot lock the
// other replicas out; revoke the old value through the API or CLI. A
// token revoked through the API stays revoked even if the variable still
// holds it.
func (o *Operators) UseEnvToken(ctx context.Context, envToken string) error {
	if envToken == "" {
		return nil
	}
	if len(envToken) > maxOperatorTokenLen {
		return switchboard.E(switchboard.ErrInvalid, "invalid_admin_token",
			"SWITCHBOARD_ADMIN_TOKEN is longer than %d characters", maxOperatorTokenLen)
	}
	hash := tenants.HashToken(envToken)
	return o.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO operator_tokens (id, token_hash, created_at, name, source)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (token_hash) DO NOTHING`,
			switchboard.NewID("opt_"), hash, o.now(), "SWITCHBOARD_ADMIN_TOKEN", OperatorSourceEnv); err != nil {
			return fmt.Errorf("storing the operator token: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operator_tokens SET revoked_at = $1
			WHERE source = $2 AND token_hash <> $3 AND revoked_at IS NULL`, o.now(), OperatorSourceEnv, hash); err != nil {
			return fmt.Errorf("revoking previous operator tokens: %w", err)
		}
		return nil
	})
}

// GenerateFirst creates and returns a token when no live operator token
// exists (the first start), so the caller can print it once; otherwise it
// returns the zero Secret. Call it only once the server can be reached
// (after its listener is bound), so a token is never stored without being
// shown. Replicas starting together generate one token between them.
func (o *Operators) GenerateFirst(ctx context.Context) (secrets.Secret, OperatorToken, error) {
	var live, all int
	if err := o.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*) FROM operator_tokens`).Scan(&live, &all); err != nil {
		return secrets.Secret{}, OperatorToken{}, fmt.Errorf("counting operator tokens: %w", err)
	}
	if live > 0 {
		return secrets.Secret{}, OperatorToken{}, nil
	}
	// The id is fixed by the number of rows: replicas racing here insert
	// the same id and only one INSERT succeeds.
	return o.insert(ctx, fmt.Sprintf("opt_generated_%d", all), "generated at start", OperatorSourceGenerated)
}

// Create creates a named operator token and returns it; it is shown once.
func (o *Operators) Create(ctx context.Context, name string) (secrets.Secret, OperatorToken, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxOperatorNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return secrets.Secret{}, OperatorToken{}, switchboard.E(switchboard.ErrInvalid, "invalid_name",
			"an operator token needs a name of 1 to %d printable characters", maxOperatorNameLen)
	}
	token, rec, err := o.insert(ctx, switchboard.NewID("opt_"), name, OperatorSourceCreated)
	if err == nil && token.IsZero() {
		err = errors.New("creating the operator token: the generated id already exists")
	}
	return token, rec, err
}

// insert stores a new token under id unless the id exists; it returns the
// zero Secret when it did not insert.
func (o *Operators) insert(ctx context.Context, id, name, source string) (secrets.Secret, OperatorToken, error) {
	token := tenants.NewToken(OperatorTokenPrefix)
	rec := OperatorToken{ID: id, Name: name, Source: source, CreatedAt: o.now()}
	res, err := o.db.ExecContext(ctx, `INSERT INTO operator_tokens (id, token_hash, created_at, name, source)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, id, tenants.HashToken(token), rec.CreatedAt, name, source)
	if err != nil {
		return secrets.Secret{}, OperatorToken{}, fmt.Errorf("storing the operator token: %w", err)
	}
	if rows, err := res.RowsAffected(); err == nil && rows == 0 {
		return secrets.Secret{}, OperatorToken{}, nil
	}
	return secrets.New(token), rec, nil
}

const operatorColumns = `id, name, source, created_at, last_used_at, revoked_at`

func scanOperatorToken(row interface{ Scan(...any) error }) (OperatorToken, error) {
	var (
		t             OperatorToken
		used, revoked sql.NullTime
	)
	if err := row.Scan(&t.ID, &t.Name, &t.Source, &t.CreatedAt, &used, &revoked); err != nil {
		return OperatorToken{}, err
	}
	if used.Valid {
		t.LastUsedAt = &used.Time
	}
	if revoked.Valid {
		t.RevokedAt = &revoked.Time
	}
	return t, nil
}

// List returns every operator token, revoked ones included, newest first.
func (o *Operators) List(ctx context.Context) ([]OperatorToken, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]OperatorToken, string, error) { return o.Page(ctx, q) })
}

// Page returns one page of the operator tokens, revoked ones included,
// newest first (ties broken by id), and the cursor of the next page.
func (o *Operators) Page(ctx context.Context, q switchboard.PageQuery) ([]OperatorToken, string, error) {
	return database.Page(ctx, o.db, "operator_tokens",
		database.NewestFirst, q,
		`SELECT `+operatorColumns+` FROM operator_tokens WHERE TRUE`, nil,
		scanOperatorToken, func(t OperatorToken) []any { return []any{t.CreatedAt, t.ID} })
}

// Revoke revokes the token with id; revoking twice is fine. This replica
// refuses the token at once, others within OperatorTouchInterval.
func (o *Operators) Revoke(ctx context.Context, id string) (OperatorToken, error) {
	if _, err := o.db.ExecContext(ctx, `UPDATE operator_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, o.now(), id); err != nil {
		return OperatorToken{}, fmt.Errorf("revoking operator token: %w", err)
	}
	t, err := scanOperatorToken(o.db.QueryRowContext(ctx, `SELECT `+operatorColumns+` FROM operator_tokens WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OperatorToken{}, switchboard.E(switchboard.ErrNotFound, "operator_token_not_found", "operator token %q not found", id)
	}
	if err != nil {
		return OperatorToken{}, fmt.Errorf("revoking operator token: %w", err)
	}
	o.mu.Lock()
	for hash, v := range o.known {
		if v.id == id {
			delete(o.known, hash)
		}
	}
	o.mu.Unlock()
	return t, nil
}

// Verify reports whether token is a live operator token. The token is
// compared by its SHA-256 hash, never by its bytes, so the comparison does
// not leak how much of a guess was right. A token verified less than
// OperatorTouchInterval ago is accepted from memory; otherwise the store
// records the use (last_used_at) and confirms the token is not revoked in
// one statement. When the store cannot answer, a token it confirmed before
// stays accepted; an unknown one is refused.
func (o *Operators) Verify(ctx context.Context, token string) bool {
	ok, _ := o.Check(ctx, token)
	return ok
}

// Check is Verify that also returns the store's error when the store could
// not answer for a token it has not confirmed before, so that the admin
// API answers store_unavailable rather than a refusal of a valid token.
func (o *Operators) Check(ctx context.Context, token string) (bool, error) {
	if token == "" || len(token) > maxOperatorTokenLen {
		return false, nil
	}
	hash := tenants.HashToken(token)
	now := o.now()
	o.mu.Lock()
	v, cached := o.known[hash]
	o.mu.Unlock()
	if cached && now.Sub(v.checked) < OperatorTouchInterval {
		return true, nil
	}
	var id string
	err := o.db.QueryRowContext(ctx, `UPDATE operator_tokens SET last_used_at = $1
		WHERE token_hash = $2 AND revoked_at IS NULL RETURNING id`, now, hash).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		o.mu.Lock()
		delete(o.known, hash)
		o.mu.Unlock()
		return false, nil
	case err != nil:
		if cached {
			return true, nil
		}
		return false, err
	}
	o.mu.Lock()
	o.known[hash] = verifiedToken{id: id, checked: now}
	o.mu.Unlock()
	return true, nil
}
