package auth_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestBadTokenFloodIsCheap sends 10,000 requests with bad tokens, on both
// stores, and counts the statements they cost: distinct tokens from one
// address stop reaching the store after the per-source budget, one token
// from many addresses after its first lookup. A caller this server already
// knows still gets in from the flooding address; a new one gets in from
// another address, and from the flooding one once the window has passed
// (not waited for here).
func TestBadTokenFloodIsCheap(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, callers := subscribedCallers(t, db)
		issue := func() string {
			_, tok := issueCron(t, svc)
			return tok
		}
		from := func(token, addr string) error {
			r := request("Bearer " + token)
			r.RemoteAddr = addr
			_, err := callers.Authenticate(ctx, r, "acme")
			return err
		}
		warm := issue()
		if err := from(warm, "192.0.2.1:1000"); err != nil {
			t.Fatal(err)
		}
		touched(t, db, 1)

		before := db.Statements()
		var limited int
		for i := range 10_000 {
			err := from(fmt.Sprintf("sbc_bad%d", i), fmt.Sprintf("192.0.2.1:%d", i%60000))
			switch switchboard.CodeOf(err) {
			case "unauthorized":
			case "rate_limited":
				limited++
			default:
				t.Fatalf("bad token %d: %v", i, err)
			}
		}
		if n := db.Statements() - before; n > 10 {
			t.Errorf("10,000 distinct bad tokens from one address cost %d statements, want <= 10", n)
		}
		if limited < 9_000 {
			t.Errorf("%d of 10,000 refused as rate_limited", limited)
		}
		if err := from(warm, "192.0.2.1:1"); err != nil {
			t.Errorf("a known caller from the flooding address: %v", err)
		}
		cold := issue()
		if err := from(cold, "192.0.2.1:2"); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("a new caller from the flooding address: %v, want rate_limited", err)
		}
		if err := from(cold, "192.0.2.2:2"); err != nil {
			t.Errorf("a new caller from another address: %v", err)
		}
		touched(t, db, 2)

		before = db.Statements()
		for i := range 10_000 {
			addr := fmt.Sprintf("198.51.100.%d:1", i%250)
			if err := from("sbc_the_same_bad_one", addr); switchboard.CodeOf(err) != "unauthorized" {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if n := db.Statements() - before; n > 1 {
			t.Errorf("10,000 requests with one bad token cost %d statements, want 1", n)
		}
	})
}

// TestRevokedTokenIsRememberedAndCreationForgets checks that a revoked
// token costs one lookup, then none, and that creating a caller forgets
// the tokens remembered unknown (its token could be one of them).
func TestRevokedTokenIsRememberedAndCreationForgets(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, callers := subscribedCallers(t, db)
		c, tok := issueCron(t, svc)
		auth1 := func() error {
			_, err := callers.Authenticate(ctx, request("Bearer "+tok), "acme")
			return err
		}
		if err := auth1(); err != nil {
			t.Fatal(err)
		}
		touched(t, db, 1)
		if _, err := svc.RevokeCaller(ctx, "acme", c.ID); err != nil {
			t.Fatal(err)
		}
		if err := auth1(); switchboard.CodeOf(err) != "unauthorized" {
			t.Fatalf("revoked: %v", err)
		}
		before := db.Statements()
		for range 5 {
			if err := auth1(); switchboard.CodeOf(err) != "unauthorized" {
				t.Fatalf("revoked: %v", err)
			}
		}
		if n := db.Statements() - before; n != 0 {
			t.Errorf("a remembered revoked token cost %d statements", n)
		}
		if _, _, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "q", Kind: tenants.KindCron}); err != nil {
			t.Fatal(err)
		}
		before = db.Statements()
		if err := auth1(); switchboard.CodeOf(err) != "unauthorized" {
			t.Fatalf("revoked: %v", err)
		}
		if n := db.Statements() - before; n != 1 {
			t.Errorf("after a caller was created the revoked token cost %d statements, want 1 (looked up again)", n)
		}
	})
}

// touched waits for the off-path writes recording n callers' use, so that
// they do not count in a measured window.
func touched(t *testing.T, db *database.DB, n int) {
	t.Helper()
	for dbtest.Count(t, db, "callers", "last_used_at IS NOT NULL") < n {
		time.Sleep(10 * time.Millisecond)
	}
}

// authCost is the statements one authentication of tok at acme costs.
func authCost(t *testing.T, db *database.DB, callers *auth.Callers, tok string) int64 {
	t.Helper()
	before := db.Statements()
	if _, err := callers.Authenticate(context.Background(), request("Bearer "+tok), "acme"); err != nil {
		t.Fatal(err)
	}
	return db.Statements() - before
}

// subscribedCallers returns the tenant service of a store with the tenant
// acme, and an authenticator subscribed to its changes.
func subscribedCallers(t *testing.T, db *database.DB) (*tenants.Service, *auth.Callers) {
	_, svc := tenantService(t, db, "acme")
	callers := auth.NewCallers(svc.Store())
	t.Cleanup(callers.Wait)
	svc.Subscribe(callers.Invalidate)
	return svc, callers
}

// issueCron issues a cron caller of acme and returns it with its token.
func issueCron(t *testing.T, svc *tenants.Service) (*tenants.Caller, string) {
	c, tok, err := svc.CreateCaller(context.Background(), "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindCron, AgentID: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	return c, tok.Reveal()
}

// issueCrons issues n cron callers of acme and returns their tokens.
func issueCrons(t *testing.T, svc *tenants.Service, n int) []string {
	tokens := make([]string, n)
	for i := range tokens {
		_, tokens[i] = issueCron(t, svc)
	}
	return tokens
}

// TestCallerCacheIsBounded authenticates more callers than a tiny budget
// holds: the least recently used is looked up again, a recent one is not.
func TestCallerCacheIsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		svc, callers := subscribedCallers(t, db)
		callers.SetCache(1, time.Hour) // holds 8
		tokens := issueCrons(t, svc, 10)
		cost := func(tok string) int64 { return authCost(t, db, callers, tok) }
		for _, tok := range tokens {
			cost(tok)
		}
		touched(t, db, len(tokens))
		if n := cost(tokens[9]); n != 0 {
			t.Errorf("a recent caller cost %d statements", n)
		}
		if n := cost(tokens[0]); n == 0 {
			t.Error("the least recently used caller was not evicted")
		}
	})
}

// TestCallerCacheCountsBytes: the callers cache is bounded by the bytes
// its callers hold, not by a count. A budget of 16 KB holds twenty small
// callers (a count at 1 KiB each would hold 15); one caller with a
// hundred long external subjects counts for many, and evicts the oldest
// small ones.
func TestCallerCacheCountsBytes(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, callers := subscribedCallers(t, db)
		callers.SetCache(16_000, time.Hour)
		small := issueCrons(t, svc, 20)
		subjects := make([]string, tenants.MaxExternalSubjects)
		for i := range subjects {
			subjects[i] = fmt.Sprintf("partner-%03d-%s", i, strings.Repeat("x", 100))
		}
		_, bigTok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "big", Kind: tenants.KindCron, AgentID: "bot",
			ExternalSubjects: subjects})
		if err != nil {
			t.Fatal(err)
		}
		big := bigTok.Reveal()
		cost := func(tok string) int64 { return authCost(t, db, callers, tok) }
		for _, tok := range small {
			cost(tok)
		}
		touched(t, db, len(small))
		if n := cost(small[0]); n != 0 {
			t.Errorf("the oldest of twenty small callers cost %d statements: the budget holds them all", n)
		}
		cost(big)
		touched(t, db, len(small)+1)
		if n := cost(big); n != 0 {
			t.Errorf("the big caller just cached cost %d statements", n)
		}
		if n := cost(small[19]); n != 0 {
			t.Errorf("a recent small caller cost %d statements", n)
		}
		if n := cost(small[5]); n == 0 {
			t.Error("the big caller evicted no more than its count: small callers it displaced by bytes are still cached")
		}
	})
}

// TestFailureSourcesBehindProxies: without trusted proxies a client's
// X-Forwarded-For is ignored (it cannot choose its own source); behind a
// listed proxy each client named by X-Forwarded-For is its own source, so
// one client's failures do not refuse another's first request; and a
// limit of 0 refuses nothing (every unknown token is looked up).
func TestFailureSourcesBehindProxies(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, callers := subscribedCallers(t, db)
		from := func(token, addr, xff string) error {
			r := request("Bearer " + token)
			r.RemoteAddr = addr
			if xff != "" {
				r.Header.Set("X-Forwarded-For", xff)
			}
			_, err := callers.Authenticate(ctx, r, "acme")
			return err
		}
		flood := func(addr, xff string) {
			t.Helper()
			for i := range 2 * auth.AuthFailuresPerSource {
				if err := from(fmt.Sprintf("sbc_flood_%s_%s_%d", addr, xff, i), addr, xff); err == nil {
					t.Fatal("a bad token was accepted")
				}
			}
		}

		// No trusted proxy: spoofed X-Forwarded-For values are one source.
		flood("192.0.2.10:1", "203.0.113.1")
		_, tok := issueCron(t, svc)
		if err := from(tok, "192.0.2.10:2", "203.0.113.99"); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("a new caller from the flooding address, claiming another X-Forwarded-For: %v, want rate_limited", err)
		}

		// Behind a trusted proxy: the client named by the proxy is the source.
		_, proxies, _ := net.ParseCIDR("192.0.2.128/25")
		callers.SetSources(auth.AuthFailuresPerSource, []*net.IPNet{proxies})
		flood("192.0.2.200:1", "203.0.113.1")
		_, tok2 := issueCron(t, svc)
		if err := from(tok2, "192.0.2.200:3", "203.0.113.1"); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("a new caller from the flooding client behind the proxy: %v, want rate_limited", err)
		}
		if err := from(tok2, "192.0.2.200:4", "203.0.113.2"); err != nil {
			t.Errorf("a new caller from another client behind the same proxy: %v", err)
		}
		// A client cannot hide behind a forged hop: the right-most address
		// that is not a trusted proxy is the source.
		_, tok3 := issueCron(t, svc)
		if err := from(tok3, "192.0.2.200:5", "203.0.113.2, 203.0.113.1"); switchboard.CodeOf(err) != "rate_limited" {
			t.Errorf("the flooding client naming another address before its own: %v, want rate_limited", err)
		}

		// Limit off: every unknown token is looked up, nothing is refused
		// as rate_limited.
		callers.SetSources(0, nil)
		before := db.Statements()
		for i := range 3 * auth.AuthFailuresPerSource {
			if err := from(fmt.Sprintf("sbc_nolimit_%d", i), "192.0.2.10:1", ""); switchboard.CodeOf(err) != "unauthorized" {
				t.Fatalf("limit off, bad token %d: %v", i, err)
			}
		}
		if n := db.Statements() - before; n < 3*auth.AuthFailuresPerSource {
			t.Errorf("limit off: %d lookups for %d distinct bad tokens", n, 3*auth.AuthFailuresPerSource)
		}
		if err := from(tok3, "192.0.2.10:9", ""); err != nil {
			t.Errorf("limit off, a new caller from the address that failed: %v", err)
		}
	})
}
