package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// grantKey identifies one cached token.
type grantKey struct {
	tenant     switchboard.TenantID
	tenantSlug string
	instance   *tenants.Instance
	user       string
	mode       string
	fp         string
	// perUser grants exist only after the user connected (oauth modes).
	perUser bool
}

// Fingerprint is the token-cache key of (tenant, instance, client id,
// normalised scopes, user, mode, token URL) and of any extra inputs that
// change the token a mode obtains. Without extra inputs it is the
// fingerprint per-user grants have always been stored under.
func Fingerprint(tenant switchboard.TenantID, instance switchboard.InstanceID, clientID, scopes, user, mode, tokenURL string, extra ...string) string {
	h := sha256.New()
	for _, s := range []string{"switchboard grant v1", string(tenant), string(instance), clientID, NormaliseScopes(scopes), user, mode, tokenURL} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if len(extra) > 0 {
		h.Write([]byte("extra v1\x00"))
		for _, s := range extra {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// secretHash names a secret value in a fingerprint without holding it.
func secretHash(s secrets.Secret) string {
	if s.IsZero() {
		return ""
	}
	h := sha256.Sum256([]byte("switchboard grant secret v1\x00" + s.Reveal()))
	return hex.EncodeToString(h[:])
}

// tokenInputs are the inputs besides the common ones that change the
// token of an instance's own grant: for jwt the assertion's issuer,
// subject, audience, signing key and key id and the client
// authentication; for clientCredentials the client secret, audience and
// authentication style. Per-user grants have none: their token comes from
// the user's consent, and a rotated client secret must not disconnect
// every user.
func tokenInputs(c *clientConfig) []string {
	switch c.mode {
	case registry.ModeJWT:
		return []string{"iss=" + c.issuer, "sub=" + c.subject, "aud=" + c.jwtAud, "key=" + secretHash(c.privateKey), "kid=" + c.keyID,
			"auth=" + c.jwtClientAuth, "secret=" + secretHash(c.clientSecret), "audience=" + c.audience}
	case registry.ModeClientCredentials:
		return []string{"secret=" + secretHash(c.clientSecret), "audience=" + c.audience, "style=" + strconv.Itoa(int(c.authStyle))}
	}
	return nil
}

func (o *OAuth) key(in ModeInput, c *clientConfig, user string) grantKey {
	slug := ""
	if in.Principal != nil {
		slug = in.Principal.TenantSlug
	}
	return grantKey{tenant: in.Tenant, tenantSlug: slug, instance: in.Instance, user: user, mode: c.mode,
		fp:      Fingerprint(in.Tenant, in.Instance.ID, c.clientID.Reveal(), c.scopes, user, c.mode, c.tokenURL, tokenInputs(c)...),
		perUser: c.mode == registry.ModeOAuth || c.mode == registry.ModeOAuthCentral}
}

// id is the grant's identity in the store.
func (k grantKey) id() GrantID {
	return GrantID{Tenant: k.tenant, Fingerprint: k.fp, Instance: k.instance.ID, User: k.user, Mode: k.mode}
}
