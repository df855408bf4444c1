package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

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
			gen, err := ops.Ensure(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			if !gen.IsZero() {
				t.Fatal("Ensure with an env token generated a token")
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
		// With a token stored, Ensure without an env token generates none.
		gen, err := auth.NewOperators(db).Ensure(ctx, "")
		if err != nil || !gen.IsZero() {
			t.Fatalf("Ensure(\"\") after an env token = %v, %v; want no token", gen.IsZero(), err)
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
				gen, err := auth.NewOperators(db).Ensure(ctx, "")
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
		gen, err := ops.Ensure(ctx, "")
		if err != nil || !gen.IsZero() {
			t.Fatalf("second Ensure = %v, %v; want no token", gen.IsZero(), err)
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
	if _, err := ops.Ensure(ctx, env); err != nil {
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
