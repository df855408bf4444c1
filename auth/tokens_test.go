package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// testClock is a clock tests move forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().UTC().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// rig is the token machinery of one replica over a real store and a real
// authorization server, with tenant "acme" and an instance "crm".
type rig struct {
	db     *database.DB
	as     *authztest.Server
	o      *auth.OAuth
	prov   *auth.Providers
	app    *auth.AppAuth
	tenant *tenants.Tenant
	clk    *testClock
	inst   *tenants.Instance
}

func newRig(t *testing.T, db *database.DB, as *authztest.Server) *rig {
	t.Helper()
	sec := newSecrets(t, db)
	tn, err := tenants.NewStore(db, sec).Tenant(context.Background(), "acme")
	if err != nil {
		tn, err = tenants.NewStore(db, sec).CreateTenant(context.Background(), "acme", "Acme")
	}
	if err != nil {
		t.Fatal(err)
	}
	return replica(t, db, as, tn, &testClock{})
}

// replica is another server process's token machinery on db.
func replica(t *testing.T, db *database.DB, as *authztest.Server, tn *tenants.Tenant, clk *testClock) *rig {
	t.Helper()
	sec := newSecrets(t, db)
	prov := auth.NewProviders(db, sec, "http://127.0.0.1:9")
	prov.SetClock(clk.now)
	o := auth.NewOAuth(auth.OAuthConfig{DB: db, Secrets: sec, Providers: prov, PublicURL: "http://127.0.0.1:9", Now: clk.now})
	app := auth.NewAppAuth()
	o.Register(app)
	return &rig{db: db, as: as, o: o, prov: prov, app: app, tenant: tn, clk: clk,
		inst: &tenants.Instance{ID: "in_crm", TenantID: tn.ID, Slug: "crm", ConnectorID: "crm"}}
}

// input is the ModeInput of a call to the instance in mode with fields,
// for user (may be empty).
func (r *rig) input(mode string, fields map[string]string, user string) auth.ModeInput {
	inst := *r.inst
	inst.AuthMode = mode
	f := map[string]secrets.Secret{}
	for k, v := range fields {
		f[k] = secrets.New(v)
	}
	return auth.ModeInput{Tenant: r.tenant.ID, Instance: &inst, Manifest: &registry.Manifest{ID: "crm"}, Fields: f,
		Principal: &auth.Principal{Tenant: r.tenant.ID, TenantSlug: "acme", UserID: user}}
}

// call builds the instance's credentials and returns whom the
// authorization server says the bearer token was issued for.
func (r *rig) call(t *testing.T, in auth.ModeInput) (string, error) {
	t.Helper()
	a, err := r.app.Build(context.Background(), in)
	if err != nil {
		return "", err
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9/", nil)
	if err := a.Apply(req); err != nil {
		return "", err
	}
	sub, ok := r.as.Validate(req)
	if !ok {
		t.Fatalf("the authorization server refuses the bearer token")
	}
	return sub, nil
}

func ecPEM(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// TestJWTCacheKeyCoversEveryInput: a change of the asserted subject or of
// the signing key gets a new token at once (issue 10 §3: calls kept
// acting as the old subject with 0 new token requests); an unchanged
// configuration keeps using the cached one.
func TestJWTCacheKeyCoversEveryInput(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	key1, pem1 := ecPEM(t)
	key2, pem2 := ecPEM(t)
	as.AddIssuer(authztest.Issuer{Issuer: "svc@acme", Key: &key1.PublicKey})
	r := newRig(t, dbtest.SQLite(t), as)
	fields := map[string]string{auth.FieldJWTIssuer: "svc@acme", auth.FieldJWTSubject: "alice@acme.test",
		auth.FieldPrivateKey: pem1, auth.FieldTokenURL: as.TokenURL()}
	jwtGrant := "urn:ietf:params:oauth:grant-type:jwt-bearer"

	for range 3 {
		if sub, err := r.call(t, r.input(registry.ModeJWT, fields, "")); err != nil || sub != "alice@acme.test" {
			t.Fatalf("call = %q, %v; want alice", sub, err)
		}
	}
	if n := as.TokenRequests(jwtGrant); n != 1 {
		t.Fatalf("%d token requests for three calls, want 1", n)
	}

	fields[auth.FieldJWTSubject] = "bob@acme.test"
	if sub, err := r.call(t, r.input(registry.ModeJWT, fields, "")); err != nil || sub != "bob@acme.test" {
		t.Fatalf("after the subject changed, call acts as %q (%v); want bob", sub, err)
	}
	if n := as.TokenRequests(jwtGrant); n != 2 {
		t.Fatalf("%d token requests after the subject changed, want 2", n)
	}

	// The service account's key is rotated: the old key no longer signs.
	as.AddIssuer(authztest.Issuer{Issuer: "svc@acme", Key: &key2.PublicKey})
	fields[auth.FieldPrivateKey] = pem2
	if _, err := r.call(t, r.input(registry.ModeJWT, fields, "")); err != nil {
		t.Fatalf("after the key changed: %v", err)
	}
	if n := as.TokenRequests(jwtGrant); n != 3 {
		t.Fatalf("%d token requests after the key changed, want 3", n)
	}

	fields[auth.FieldJWTAudience] = as.TokenURL() + "?v=2"
	if _, err := r.call(t, r.input(registry.ModeJWT, fields, "")); err == nil {
		t.Fatalf("a changed audience still used the token obtained for the old one")
	}
}

// TestClientCredentialsSecretChangeGetsNewToken: the cached token of a
// client-credentials instance is bound to its client secret.
func TestClientCredentialsSecretChangeGetsNewToken(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	as.AddClient(authztest.Client{ID: "svc", Secret: "secret-one"})
	r := newRig(t, dbtest.SQLite(t), as)
	fields := map[string]string{auth.FieldClientID: "svc", auth.FieldClientSecret: "secret-one", auth.FieldTokenURL: as.TokenURL()}
	if _, err := r.call(t, r.input(registry.ModeClientCredentials, fields, "")); err != nil {
		t.Fatal(err)
	}
	// The secret is rotated at the provider and then on the instance; a
	// wrong secret must fail at the token endpoint, not ride the cache.
	fields[auth.FieldClientSecret] = "secret-wrong"
	if _, err := r.call(t, r.input(registry.ModeClientCredentials, fields, "")); switchboard.CodeOf(err) != "token_request_failed" {
		t.Fatalf("a changed client secret used the cached token (err %v)", err)
	}
}

// TestJWTClientAuthentication: mode jwt authenticates its client as the
// instance (or the connector) declares, against a server that requires
// it (RFC 7523 §3.1).
func TestJWTClientAuthentication(t *testing.T) {
	t.Parallel()
	for _, method := range []string{auth.ClientAuthBasic, auth.ClientAuthPost, auth.ClientAuthNone} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			as := authztest.New(t, authztest.Options{})
			key, pemKey := ecPEM(t)
			as.AddClient(authztest.Client{ID: "jwt-client", Secret: "jwt-client-secret", AuthMethod: method})
			as.AddIssuer(authztest.Issuer{Issuer: "svc@acme", Key: &key.PublicKey, ClientID: "jwt-client"})
			r := newRig(t, dbtest.SQLite(t), as)
			fields := map[string]string{auth.FieldJWTIssuer: "svc@acme", auth.FieldPrivateKey: pemKey, auth.FieldTokenURL: as.TokenURL(),
				auth.FieldClientID: "jwt-client", auth.FieldTokenAuthMethod: method}
			if method != auth.ClientAuthNone {
				fields[auth.FieldClientSecret] = "jwt-client-secret"
			}
			if sub, err := r.call(t, r.input(registry.ModeJWT, fields, "carol")); err != nil || sub != "carol" {
				t.Fatalf("call = %q, %v", sub, err)
			}
			// The manifest may declare the method instead of the instance.
			delete(fields, auth.FieldTokenAuthMethod)
			in := r.input(registry.ModeJWT, fields, "dave")
			in.Manifest.Auth.TokenAuthMethod = method
			if sub, err := r.call(t, in); err != nil || sub != "dave" {
				t.Fatalf("call with the manifest's method = %q, %v", sub, err)
			}
		})
	}
	t.Run("wrong-method", func(t *testing.T) {
		t.Parallel()
		as := authztest.New(t, authztest.Options{})
		key, pemKey := ecPEM(t)
		as.AddClient(authztest.Client{ID: "jwt-client", Secret: "jwt-client-secret", AuthMethod: auth.ClientAuthPost})
		as.AddIssuer(authztest.Issuer{Issuer: "svc@acme", Key: &key.PublicKey, ClientID: "jwt-client"})
		r := newRig(t, dbtest.SQLite(t), as)
		fields := map[string]string{auth.FieldJWTIssuer: "svc@acme", auth.FieldPrivateKey: pemKey, auth.FieldTokenURL: as.TokenURL(),
			auth.FieldClientID: "jwt-client", auth.FieldClientSecret: "jwt-client-secret", auth.FieldTokenAuthMethod: auth.ClientAuthBasic}
		if _, err := r.call(t, r.input(registry.ModeJWT, fields, "carol")); switchboard.CodeOf(err) != "token_request_failed" {
			t.Fatalf("basic authentication of a post-only client = %v, want token_request_failed", err)
		}
		fields[auth.FieldTokenAuthMethod] = "private_key_jwt"
		if _, err := r.call(t, r.input(registry.ModeJWT, fields, "carol")); switchboard.CodeOf(err) != "invalid_config" {
			t.Fatalf("an unsupported method = %v, want invalid_config", err)
		}
	})
}

// TestShortLivedTokenIsNotRefreshedEveryCall: a token living 20 s (less
// than the 30 s margin) is refreshed in the last tenth of its life, not on
// every call.
func TestShortLivedTokenIsNotRefreshedEveryCall(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{AccessTokenLifespan: 20 * time.Second})
	as.AddClient(authztest.Client{ID: "svc", Secret: "svc-secret"})
	r := newRig(t, dbtest.SQLite(t), as)
	fields := map[string]string{auth.FieldClientID: "svc", auth.FieldClientSecret: "svc-secret", auth.FieldTokenURL: as.TokenURL()}
	calls := func(n int) {
		t.Helper()
		for range n {
			if _, err := r.call(t, r.input(registry.ModeClientCredentials, fields, "")); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls(5)
	if n := as.TokenRequests("client_credentials"); n != 1 {
		t.Fatalf("%d token requests for 5 calls of a 20 s token, want 1", n)
	}
	r.clk.advance(15 * time.Second)
	calls(3)
	if n := as.TokenRequests("client_credentials"); n != 1 {
		t.Fatalf("%d token requests 15 s into a 20 s token, want 1", n)
	}
	r.clk.advance(4 * time.Second) // 19 s: inside the last 2 s
	calls(3)
	if n := as.TokenRequests("client_credentials"); n != 2 {
		t.Fatalf("%d token requests 19 s into a 20 s token, want 2", n)
	}
}

// heldSecrets returns the values the applier of in says are in play.
func (r *rig) heldSecrets(t *testing.T, in auth.ModeInput) map[string]bool {
	t.Helper()
	a, err := r.app.Build(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := a.(auth.SecretHolder)
	if !ok {
		t.Fatalf("the applier of %s is not a SecretHolder", in.Instance.AuthMode)
	}
	out := map[string]bool{}
	for _, s := range h.Secrets() {
		out[s.Reveal()] = true
	}
	return out
}

// TestAppliersHoldEverySecretInPlay: the per-call redactor learns from
// the applier every secret of the call's credentials: the access token,
// the refresh token, the client secret, the JWT assertion and the private
// key (issue 10 §2).
func TestAppliersHoldEverySecretInPlay(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	key, pemKey := ecPEM(t)
	as.AddIssuer(authztest.Issuer{Issuer: "svc@acme", Key: &key.PublicKey})
	as.AddClient(authztest.Client{ID: "svc", Secret: "svc-secret-canary"})
	r := newRig(t, dbtest.SQLite(t), as)
	r.registerCRM()

	jwtIn := r.input(registry.ModeJWT, map[string]string{auth.FieldJWTIssuer: "svc@acme", auth.FieldPrivateKey: pemKey,
		auth.FieldTokenURL: as.TokenURL()}, "carol")
	held := r.heldSecrets(t, jwtIn)
	if !held[pemKey] || len(held) != 3 {
		t.Errorf("jwt applier holds %d secrets (private key %v), want access token, assertion and key", len(held), held[pemKey])
	}
	ccIn := r.input(registry.ModeClientCredentials, map[string]string{auth.FieldClientID: "svc", auth.FieldClientSecret: "svc-secret-canary",
		auth.FieldTokenURL: as.TokenURL()}, "")
	if held := r.heldSecrets(t, ccIn); !held["svc-secret-canary"] || len(held) != 2 {
		t.Errorf("clientCredentials applier holds %d secrets, want access token and client secret", len(held))
	}
	r.connect(t, "alice")
	userIn := r.input(registry.ModeOAuth, userFields(as), "alice")
	held = r.heldSecrets(t, userIn)
	issued := as.Issued() // ..., alice's access token, alice's refresh token
	for _, tok := range issued[len(issued)-2:] {
		if !held[tok] {
			t.Errorf("oauth applier does not hold a token alice's flow was issued")
		}
	}
	if !held[crmSecret] || len(held) != 3 {
		t.Errorf("oauth applier holds %d secrets, want access token, refresh token and client secret", len(held))
	}
}
