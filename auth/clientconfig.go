package auth

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Well-known field names the token-based modes read from an app instance's
// fields (each its own secret row). A connector that offers a mode
// declares the fields it needs in its manifest's env.
const (
	FieldClientID     = "CLIENT_ID"
	FieldClientSecret = "CLIENT_SECRET"
	FieldAuthorizeURL = "AUTHORIZE_URL"
	FieldTokenURL     = "TOKEN_URL"
	FieldRevokeURL    = "REVOKE_URL"
	// FieldScopes holds space- or comma-separated scopes; without it the
	// manifest's auth.scopes, then the provider's defaults apply.
	FieldScopes = "SCOPES"
	// FieldAudience is sent as the audience parameter of a
	// client-credentials request.
	FieldAudience = "AUDIENCE"
	// FieldAuthParams holds extra authorize parameters, URL-encoded
	// ("access_type=offline&prompt=consent").
	FieldAuthParams = "AUTH_PARAMS"
	FieldJWTIssuer  = "JWT_ISSUER"
	// FieldJWTSubject is the assertion's subject when the call names no
	// user.
	FieldJWTSubject  = "JWT_SUBJECT"
	FieldJWTAudience = "JWT_AUDIENCE"
	// FieldPrivateKey is a PEM private key (RSA or ECDSA) that signs JWT
	// assertions; FieldPrivateKeyID its key id (kid), if the server wants
	// one.
	FieldPrivateKey   = "PRIVATE_KEY"
	FieldPrivateKeyID = "PRIVATE_KEY_ID"
	// FieldTokenAuthMethod overrides the manifest's auth.token_auth_method:
	// how mode jwt authenticates the client at the token endpoint.
	FieldTokenAuthMethod = "TOKEN_AUTH_METHOD"
)

// Token endpoint client authentication methods (RFC 7591 names).
const (
	ClientAuthBasic = "client_secret_basic"
	ClientAuthPost  = "client_secret_post"
	ClientAuthNone  = "none"
)

// clientConfig is what a mode needs to obtain tokens for an instance.
type clientConfig struct {
	mode         string
	provider     string
	clientID     secrets.Secret
	clientSecret secrets.Secret
	authorizeURL string
	tokenURL     string
	revokeURL    string
	scopes       string // normalised
	audience     string
	authParams   url.Values
	authStyle    oauth2.AuthStyle
	// jwt
	issuer     string
	subject    string
	jwtAud     string
	privateKey secrets.Secret
	keyID      string
	// jwtClientAuth is the token endpoint client authentication of mode
	// jwt: client_secret_basic, client_secret_post or none.
	jwtClientAuth string
}

// field returns an instance field's value, or its declared default.
func field(in ModeInput, name string) secrets.Secret {
	if v, ok := in.Fields[name]; ok && !v.IsZero() {
		return v
	}
	if f, ok := in.Manifest.Field(name); ok && f.Default != "" {
		return secrets.New(f.Default)
	}
	return secrets.Secret{}
}

func fieldText(in ModeInput, name string) string { return field(in, name).Reveal() }

// clientFor resolves the instance's client configuration for its mode:
// oauthCentral from the platform provider registry; oauth from the
// instance's fields, with the provider registry's endpoints as defaults;
// clientCredentials and jwt from the instance's fields.
func (o *OAuth) clientFor(ctx context.Context, in ModeInput) (*clientConfig, error) {
	m := in.Manifest
	c := &clientConfig{mode: in.Instance.AuthMode, provider: m.Auth.Provider}
	var p *Provider
	if c.mode == registry.ModeOAuthCentral || (c.mode == registry.ModeOAuth && c.provider != "" && o.providers != nil) {
		if c.provider == "" {
			return nil, badConfig(m, "mode oauthCentral needs auth.provider")
		}
		if o.providers == nil {
			return nil, errNoProvider
		}
		var err error
		p, err = o.providers.Get(ctx, c.provider)
		if err != nil && (c.mode == registry.ModeOAuthCentral || !errors.Is(err, switchboard.ErrNotFound)) {
			return nil, err
		}
	}
	scopes := fieldText(in, FieldScopes)
	if scopes == "" && len(m.Auth.Scopes) > 0 {
		scopes = strings.Join(m.Auth.Scopes, " ")
	}
	if p != nil {
		c.authorizeURL, c.tokenURL, c.revokeURL = p.AuthorizeURL, p.TokenURL, p.RevokeURL
		c.authParams = p.AuthParams
		c.authStyle = authStyle(p.AuthStyle)
		if scopes == "" {
			scopes = strings.Join(p.Scopes, " ")
		}
	}
	c.scopes = NormaliseScopes(scopes)
	if c.mode == registry.ModeOAuthCentral {
		c.clientID, c.clientSecret = p.ClientID, p.ClientSecret
		if c.clientID.IsZero() {
			return nil, switchboard.E(switchboard.ErrUnavailable, "provider_not_configured",
				"the platform has no OAuth client for provider %s yet", c.provider)
		}
	} else {
		c.clientID, c.clientSecret = field(in, FieldClientID), field(in, FieldClientSecret)
		for name, dst := range map[string]*string{FieldAuthorizeURL: &c.authorizeURL, FieldTokenURL: &c.tokenURL, FieldRevokeURL: &c.revokeURL} {
			if v := fieldText(in, name); v != "" {
				*dst = v
			}
		}
		if v := fieldText(in, FieldAuthParams); v != "" {
			if q, err := url.ParseQuery(v); err == nil {
				c.authParams = q
			}
		}
	}
	c.audience = fieldText(in, FieldAudience)
	if c.mode == registry.ModeJWT {
		c.issuer = fieldText(in, FieldJWTIssuer)
		c.subject = fieldText(in, FieldJWTSubject)
		c.jwtAud = fieldText(in, FieldJWTAudience)
		c.privateKey = field(in, FieldPrivateKey)
		c.keyID = fieldText(in, FieldPrivateKeyID)
		if c.jwtAud == "" {
			c.jwtAud = c.tokenURL
		}
		c.jwtClientAuth = fieldText(in, FieldTokenAuthMethod)
		if c.jwtClientAuth == "" {
			c.jwtClientAuth = m.Auth.TokenAuthMethod
		}
		switch c.jwtClientAuth {
		case "":
			c.jwtClientAuth = ClientAuthNone
			if !c.clientSecret.IsZero() {
				c.jwtClientAuth = ClientAuthBasic
			}
		case ClientAuthBasic, ClientAuthPost:
			if c.clientID.IsZero() || c.clientSecret.IsZero() {
				return nil, reconnect(FieldClientSecret)
			}
		case ClientAuthNone:
		default:
			return nil, badConfig(m, "token_auth_method %q is not client_secret_basic, client_secret_post or none", truncate(c.jwtClientAuth, 40))
		}
		if c.issuer == "" {
			return nil, reconnect(FieldJWTIssuer)
		}
		if c.privateKey.IsZero() {
			return nil, reconnect(FieldPrivateKey)
		}
	} else if c.clientID.IsZero() {
		return nil, reconnect(FieldClientID)
	}
	if c.tokenURL == "" {
		return nil, reconnect(FieldTokenURL)
	}
	if err := validURL(FieldTokenURL, c.tokenURL, true); err != nil {
		return nil, badConfig(m, "the token URL is not an absolute http(s) URL")
	}
	return c, nil
}
