package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

func TestCallerJWT(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	keys, _ := secrets.NewKeyring(make([]byte, 32))
	store := tenants.NewStore(db, secrets.NewStore(db, keys))
	if _, err := store.CreateTenant(context.Background(), "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	platform, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&platform.PublicKey)
	pub, err := auth.ParsePublicKeys(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	callers := auth.NewCallers(store)
	t.Cleanup(callers.Wait)
	callers.SetJWT(&auth.CallerJWT{Issuer: "https://platform.test", Audience: "switchboard", Keys: pub})
	callers.SetMembers(memberList{"alice": true})

	sign := func(key *ecdsa.PrivateKey, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "https://platform.test", "aud": "switchboard", "sub": "alice", "tenant": "acme",
			"agent_id": "agent-1", "source": "cron", "trusted": true, "exp": time.Now().Add(time.Minute).Unix()}
	}
	with := func(k string, v any) jwt.MapClaims { c := base(); c[k] = v; return c }
	cases := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", sign(platform, base()), true},
		{"a user who is not a member", sign(platform, with("sub", "mallory")), false},
		{"other key", sign(other, base()), false},
		{"wrong issuer", sign(platform, with("iss", "https://evil.test")), false},
		{"wrong audience", sign(platform, with("aud", "other")), false},
		{"expired", sign(platform, with("exp", time.Now().Add(-time.Hour).Unix())), false},
		{"other tenant", sign(platform, with("tenant", "globex")), false},
		{"bad source", sign(platform, with("source", "root")), false},
		{"no expiry", sign(platform, func() jwt.MapClaims { c := base(); delete(c, "exp"); return c }()), false},
		{"ten years", sign(platform, with("exp", time.Now().AddDate(10, 0, 0).Unix())), false},
		{"two hours", sign(platform, with("exp", time.Now().Add(2*time.Hour).Unix())), false},
		{"issued long ago", sign(platform, func() jwt.MapClaims {
			c := base()
			c["iat"] = time.Now().Add(-3 * time.Hour).Unix()
			return c
		}()), false},
		{"55 minutes", sign(platform, func() jwt.MapClaims {
			c := with("exp", time.Now().Add(55*time.Minute).Unix())
			c["iat"] = time.Now().Unix()
			return c
		}()), true},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", "Bearer "+c.token)
		p, err := callers.Authenticate(context.Background(), r, "acme")
		if c.ok {
			if err != nil || p.UserID != "alice" || p.AgentID != "agent-1" || !p.Trusted || p.Kind != tenants.KindCron {
				t.Errorf("%s: %+v, %v", c.name, p, err)
			}
			continue
		}
		if !errors.Is(err, switchboard.ErrUnauthorized) && switchboard.CodeOf(err) != "user_not_found" {
			t.Errorf("%s: err = %v, want unauthorized", c.name, err)
		}
	}
	// The JWT carries the user: X-User-Id beside it is refused.
	r, _ := http.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer "+sign(platform, base()))
	r.Header.Set(auth.HeaderUserID, "alice")
	if _, err := callers.Authenticate(context.Background(), r, "acme"); switchboard.CodeOf(err) != "user_assertion_refused" {
		t.Errorf("caller JWT with X-User-Id: err = %v, want user_assertion_refused", err)
	}
}

// TestCallerJWTMaxLifetimeIsConfigurable: the bound is the verifier's.
func TestCallerJWTMaxLifetimeIsConfigurable(t *testing.T) {
	t.Parallel()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	claims := jwt.MapClaims{"iss": "https://platform.test", "aud": "switchboard", "sub": "alice", "tenant": "acme",
		"exp": time.Now().Add(10 * time.Hour).Unix()}
	token, err := jwt.NewWithClaims(jwt.SigningMethodES256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.CallerJWT{Issuer: "https://platform.test", Audience: "switchboard", Keys: []crypto.PublicKey{&key.PublicKey}}
	if _, _, _, _, _, err := v.Verify(token); err == nil {
		t.Fatal("a 10-hour token passed the default 1-hour bound")
	}
	v.MaxLifetime = 12 * time.Hour
	if _, user, _, _, _, err := v.Verify(token); err != nil || user != "alice" {
		t.Fatalf("a 10-hour token under a 12-hour bound = %q, %v", user, err)
	}
}

func TestSubjectHonoursTargetOnlyWhenTrusted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		trusted      bool
		user, target string
		want         string
		onBehalf     bool
	}{
		{false, "alice", "bob", "alice", false},
		{true, "cron", "bob", "bob", true},
		{true, "alice", "", "alice", false},
		{true, "alice", "alice", "alice", false},
	}
	for _, c := range cases {
		p := (&auth.Principal{Trusted: c.trusted, UserID: c.user}).WithTarget(c.target)
		if p.Subject() != c.want || p.OnBehalf() != c.onBehalf {
			t.Errorf("%+v: subject %q onBehalf %v", c, p.Subject(), p.OnBehalf())
		}
	}
}
