package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

func TestOperatorsEnvToken(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		const env = "operator-env-token-canary-1234567890"
		ops := auth.NewOperators(db)
		for range 2 { // idempotent
			if err := ops.UseEnvToken(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
		if n := dbtest.Count(t, db, "operator_tokens", ""); n != 1 {
			t.Fatalf("operator_tokens rows = %d, want 1", n)
		}
		if n := dbtest.Count(t, db, "operator_tokens", "token_hash = $1", tenants.HashToken(env)); n != 1 {
			t.Fatal("the env token's hash is not stored")
		}
		if n := dbtest.Count(t, db, "operator_tokens", "token_hash = $1 OR id = $1", env); n != 0 {
			t.Fatal("the env token is stored in clear")
		}
		// A fresh Operators (another replica) verifies through the store.
		other := auth.NewOperators(db)
		for _, tc := range []struct {
			token string
			want  bool
		}{
			{env, true},
			{env, true}, // cached
			{"", false},
			{env + "x", false},
			{strings.ToUpper(env), false},
			{env[:len(env)-1], false},
			{strings.Repeat("a", 5000), false},
		} {
			if got := other.Verify(ctx, tc.token); got != tc.want {
				t.Errorf("Verify(%.20q...) = %v, want %v", tc.token, got, tc.want)
			}
		}
		// With a live token stored, a start generates none.
		gen, _, err := auth.NewOperators(db).GenerateFirst(ctx)
		if err != nil || !gen.IsZero() {
			t.Fatalf("GenerateFirst after an env token = %v, %v; want no token", gen.IsZero(), err)
		}
		// Changing SWITCHBOARD_ADMIN_TOKEN revokes the old value: at once
		// on a replica that had not verified it, and within the touch
		// interval on one that had it cached.
		clock := time.Now().UTC()
		cached := auth.NewOperators(db).WithClock(func() time.Time { return clock })
		if !cached.Verify(ctx, env) {
			t.Fatal("the env token does not verify")
		}
		const next = "operator-env-token-canary-next-0987654321"
		if err := auth.NewOperators(db).UseEnvToken(ctx, next); err != nil {
			t.Fatal(err)
		}
		if auth.NewOperators(db).Verify(ctx, env) {
			t.Fatal("the previous SWITCHBOARD_ADMIN_TOKEN still verifies after it changed")
		}
		clock = clock.Add(auth.OperatorTouchInterval)
		if cached.Verify(ctx, env) {
			t.Fatal("a replica accepts the previous SWITCHBOARD_ADMIN_TOKEN past the touch interval")
		}
		if !cached.Verify(ctx, next) {
			t.Fatal("the new SWITCHBOARD_ADMIN_TOKEN does not verify")
		}
		// A start without the variable revokes nothing.
		if err := auth.NewOperators(db).UseEnvToken(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if !auth.NewOperators(db).Verify(ctx, next) {
			t.Fatal("a start without SWITCHBOARD_ADMIN_TOKEN revoked the current one")
		}
	})
}

func TestOperatorsGeneratedToken(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		// Replicas starting together: exactly one generates a token.
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			tokens []string
		)
		for range 4 {
			wg.Go(func() {
				gen, _, err := auth.NewOperators(db).GenerateFirst(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if !gen.IsZero() {
					mu.Lock()
					tokens = append(tokens, gen.Reveal())
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(tokens) != 1 {
			t.Fatalf("%d replicas generated a token, want exactly 1", len(tokens))
		}
		token := tokens[0]
		if !strings.HasPrefix(token, auth.OperatorTokenPrefix) || len(token) < 40 {
			t.Fatalf("generated token has the wrong shape (len %d)", len(token))
		}
		if n := dbtest.Count(t, db, "operator_tokens", ""); n != 1 {
			t.Fatalf("operator_tokens rows = %d, want 1", n)
		}
		if n := dbtest.Count(t, db, "operator_tokens", "token_hash = $1", token); n != 0 {
			t.Fatal("the generated token is stored in clear")
		}
		// Later starts generate nothing; the token keeps working.
		ops := auth.NewOperators(db)
		gen, _, err := ops.GenerateFirst(ctx)
		if err != nil || !gen.IsZero() {
			t.Fatalf("second GenerateFirst = %v, %v; want no token", gen.IsZero(), err)
		}
		if !ops.Verify(ctx, token) {
			t.Fatal("the generated token does not verify")
		}
		if ops.Verify(ctx, auth.OperatorTokenPrefix+"guess") {
			t.Fatal("a guessed token verified")
		}
	})
}

func TestOperatorsCacheAvoidsTheStore(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	ctx := context.Background()
	ops := auth.NewOperators(db)
	const env = "operator-env-token-for-cache-test"
	if err := ops.UseEnvToken(ctx, env); err != nil {
		t.Fatal(err)
	}
	if !ops.Verify(ctx, env) {
		t.Fatal("Verify failed")
	}
	// With the store gone, a verified token still verifies from the
	// cache, and an unknown one is refused.
	db.Close()
	if !ops.Verify(ctx, env) {
		t.Fatal("a cached token needed the store")
	}
	if ops.Verify(ctx, "unknown-token") {
		t.Fatal("an unknown token verified with the store down")
	}
}

// Named tokens: created once shown, listed without the token, last use
// recorded at most once per interval, revoked through the store (this
// replica at once, another within the interval), and a start after every
// token is revoked generates a new one.
func TestOperatorsCreateListRevoke(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		clock := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		a, b := auth.NewOperators(db).WithClock(now), auth.NewOperators(db).WithClock(now)
		if _, _, err := a.Create(ctx, " "); err == nil {
			t.Fatal("a token without a name was created")
		}
		token, rec, err := a.Create(ctx, "ci deploys")
		if err != nil {
			t.Fatal(err)
		}
		if rec.ID == "" || rec.Name != "ci deploys" || rec.Source != auth.OperatorSourceCreated || !strings.HasPrefix(token.Reveal(), auth.OperatorTokenPrefix) {
			t.Fatalf("created %+v", rec)
		}
		lastUsed := func() *time.Time {
			list, err := a.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list {
				if r.ID == rec.ID {
					return r.LastUsedAt
				}
			}
			t.Fatalf("token %s not listed in %+v", rec.ID, list)
			return nil
		}
		if lastUsed() != nil {
			t.Fatal("an unused token has a last-used time")
		}
		if !b.Verify(ctx, token.Reveal()) {
			t.Fatal("the created token does not verify")
		}
		first := lastUsed()
		if first == nil || !first.Equal(clock) {
			t.Fatalf("last used = %v, want %v", first, clock)
		}
		clock = clock.Add(auth.OperatorTouchInterval / 2)
		b.Verify(ctx, token.Reveal())
		if got := lastUsed(); !got.Equal(*first) {
			t.Fatalf("last used written again within the interval: %v", got)
		}
		clock = clock.Add(auth.OperatorTouchInterval)
		b.Verify(ctx, token.Reveal())
		if got := lastUsed(); !got.Equal(clock) {
			t.Fatalf("last used = %v after the interval, want %v", got, clock)
		}

		if _, err := a.Revoke(ctx, "opt_nope"); err == nil {
			t.Fatal("revoking an unknown token succeeded")
		}
		a.Verify(ctx, token.Reveal())
		revoked, err := a.Revoke(ctx, rec.ID)
		if err != nil || revoked.RevokedAt == nil {
			t.Fatalf("Revoke = %+v, %v", revoked, err)
		}
		if a.Verify(ctx, token.Reveal()) {
			t.Fatal("the revoking replica still accepts the token")
		}
		clock = clock.Add(auth.OperatorTouchInterval)
		if b.Verify(ctx, token.Reveal()) {
			t.Fatal("another replica accepts a revoked token past the interval")
		}
		again, _, err := auth.NewOperators(db).GenerateFirst(ctx)
		if err != nil || again.IsZero() {
			t.Fatalf("GenerateFirst with every token revoked = %v, %v; want a new token", again.IsZero(), err)
		}
		if !auth.NewOperators(db).Verify(ctx, again.Reveal()) {
			t.Fatal("the regenerated token does not verify")
		}
	})
}
