package auth

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// BenchmarkBuildAPIKey and BenchmarkBuildCachedToken measure buildAppAuth
// plus Apply on the hot path: a static API key, and a per-user OAuth token
// from the in-memory cache (fingerprint, cache read, bearer). The
// difference is the token path's added cost per call.
//
//	go test -run '^$' -bench Build ./auth
func BenchmarkBuildAPIKey(b *testing.B) {
	benchBuild(b, registry.ModeAPIKey)
}

func BenchmarkBuildCachedToken(b *testing.B) {
	benchBuild(b, registry.ModeOAuth)
}

func benchBuild(b *testing.B, mode string) {
	m := &registry.Manifest{ID: "crm", Auth: registry.Auth{Modes: []string{mode}, Delivery: "header", Param: "X-Api-Key", Field: "API_KEY",
		Scopes: []string{"contacts.read"}}}
	in := ModeInput{
		Tenant:   "ten_1",
		Instance: &tenants.Instance{ID: "ins_1", TenantID: "ten_1", Slug: "crm", AuthMode: mode},
		Manifest: m,
		Fields: map[string]secrets.Secret{"API_KEY": secrets.New("key"), FieldClientID: secrets.New("client"),
			FieldClientSecret: secrets.New("secret"), FieldTokenURL: secrets.New("https://idp.example.test/token")},
		Principal: &Principal{Tenant: "ten_1", TenantSlug: "acme", UserID: "alice", AgentID: "a"},
	}
	o := NewOAuth(OAuthConfig{})
	a := NewAppAuth()
	o.Register(a)
	c, err := o.clientFor(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	k := o.key(in, c, "alice")
	o.remember(k.fp, &cachedToken{access: secrets.New("access-token"), expiry: time.Now().Add(24 * time.Hour), version: 1})
	req, _ := http.NewRequest(http.MethodGet, "https://crm.example.test/me", nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ap, err := a.Build(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if err := ap.Apply(req); err != nil {
			b.Fatal(err)
		}
	}
}
