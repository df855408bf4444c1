package admission

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/switchboardhq/switchboard/database"
)

// Shared keeps the token buckets of the rate limits in PostgreSQL
// (admission_buckets), so that a rate limit holds across the replicas
// sharing the database instead of once per replica.
//
// A replica does not ask the database per call: it leases a batch of
// tokens (Limit.batch: a tenth of a second of the rate, at least 1, at
// most the burst) from the key's bucket in one statement, and spends them
// locally. Leased tokens not spent within the lease's TTL go back to the
// bucket with the replica's next lease of that key; those of a replica
// that dies are lost (at most one batch), and the bucket refills at its
// rate as always, so the other replicas get the whole limit. The bucket's
// clock is the database's, so the replicas' clocks do not matter.
//
// The bound: over any interval of T seconds, the calls admitted by N
// replicas for one key are at most burst + rate·T (the bucket) plus the
// tokens the replicas held at the interval's start, at most N·batch.
//
// The embedded SQLite store has no Shared: one process serves it, its
// limits are local.
type Shared struct {
	db *database.DB
	// TTL is how long a leased token may be spent; 0 is
	// DefaultLeaseTTL.
	TTL time.Duration
}

// NewShared returns the shared buckets on db, a PostgreSQL store.
func NewShared(db *database.DB) *Shared { return &Shared{db: db} }

// DefaultLeaseTTL is Shared.TTL's default.
const DefaultLeaseTTL = time.Second

// leaseSpan is the share of a second of the rate a lease asks for.
const leaseSpan = 100 * time.Millisecond

// batch is how many tokens a replica leases at once under l.
func (l Limit) batch() int {
	return min(l.burst(), max(1, int(math.Ceil(l.Rate*leaseSpan.Seconds()))))
}

func (s *Shared) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultLeaseTTL
}

// sharedKey is the bucket's row key: its scope and ids, quoted, so that no
// id can be mistaken for another's.
func sharedKey(k bucketKey) string {
	names := [...]string{kTenant: scopeTenant, kInstance: scopeInstance, kUser: scopeUser, kConnector: scopeConnector}
	return names[k.scope] + " " + strconv.Quote(k.a) + " " + strconv.Quote(k.b) + " " + strconv.Quote(k.c)
}

// refill is the bucket's tokens now: what it held, plus the tokens given
// back ($5), plus the rate ($4) times the time since, at most the burst
// ($2). statement_timestamp() is one value in a statement; a statement
// that waited for the row behind a later one counts no time backwards.
const refill = `LEAST($2::float8, b.tokens + $5::float8 + $4::float8 * GREATEST(0, EXTRACT(EPOCH FROM statement_timestamp() - b.at)::float8))`

// take is how many tokens a lease takes: up to $3, whole ones.
const take = `LEAST($3::float8, FLOOR(` + refill + `))`

// leaseSQL takes up to $3 tokens from key $1's bucket (a new bucket
// starts full), in one statement under the row's lock. full_at is when
// the bucket will be full again if no one takes from it: the row can go
// then (sweep), since a missing row is a full bucket.
const leaseSQL = `INSERT INTO admission_buckets AS b (key, tokens, granted, at, full_at)
VALUES ($1, $2::float8 - LEAST($3::float8, FLOOR($2::float8)), LEAST($3::float8, FLOOR($2::float8)), statement_timestamp(),
	statement_timestamp() + make_interval(secs => LEAST($3::float8, FLOOR($2::float8)) / $4::float8))
ON CONFLICT (key) DO UPDATE SET granted = ` + take + `, tokens = ` + refill + ` - ` + take + `,
	at = GREATEST(b.at, statement_timestamp()),
	full_at = GREATEST(b.at, statement_timestamp()) + make_interval(secs => ($2::float8 - ` + refill + ` + ` + take + `) / $4::float8)
RETURNING granted, tokens`

// lease gives back the back unspent tokens of an expired lease and takes
// up to n from key's bucket under l; it returns the tokens granted and
// those the bucket still holds.
func (s *Shared) lease(ctx context.Context, key string, l Limit, n, back int) (int, float64, error) {
	var granted, left float64
	if err := s.db.QueryRowContext(ctx, leaseSQL, key, float64(l.burst()), float64(n), l.Rate, float64(back)).Scan(&granted, &left); err != nil {
		return 0, 0, fmt.Errorf("leasing call tokens: %w", err)
	}
	return int(granted), left, nil
}

// sweep deletes the buckets that are full again: a missing row is a full
// bucket.
func (s *Shared) sweep(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM admission_buckets WHERE full_at < statement_timestamp()`)
	return err
}
