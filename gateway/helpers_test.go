package gateway_test

import (
	"net/http"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/secrets"
)

func httpNewRequest(method, u string) (*http.Request, error) { return http.NewRequest(method, u, nil) }

func newSecret(v string) *secrets.Secret {
	s := secrets.New(v)
	return &s
}

func providerReq(as *authztest.Server, id, secret *secrets.Secret) auth.ProviderRequest {
	return auth.ProviderRequest{Name: "Test IdP", AuthorizeURL: as.AuthorizeURL(), TokenURL: as.TokenURL(), RevokeURL: as.RevokeURL(),
		Scopes: []string{"contacts.read"}, AuthParams: map[string]string{"access_type": "offline"}, ClientID: id, ClientSecret: secret}
}
