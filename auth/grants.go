package auth

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
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
// normalised scopes, user, mode, token URL).
func Fingerprint(tenant switchboard.TenantID, instance switchboard.InstanceID, clientID, scopes, user, mode, tokenURL string) string {
	h := sha256.New()
	for _, s := range []string{"switchboard grant v1", string(tenant), string(instance), clientID, NormaliseScopes(scopes), user, mode, tokenURL} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func (o *OAuth) key(in ModeInput, c *clientConfig, user string) grantKey {
	id := c.clientID.Reveal()
	if c.mode == registry.ModeJWT {
		id = c.issuer
	}
	slug := ""
	if in.Principal != nil {
		slug = in.Principal.TenantSlug
	}
	return grantKey{tenant: in.Tenant, tenantSlug: slug, instance: in.Instance, user: user, mode: c.mode,
		fp:      Fingerprint(in.Tenant, in.Instance.ID, id, c.scopes, user, c.mode, c.tokenURL),
		perUser: c.mode == registry.ModeOAuth || c.mode == registry.ModeOAuthCentral}
}

// id is the grant's identity in the store.
func (k grantKey) id() GrantID {
	return GrantID{Tenant: k.tenant, Fingerprint: k.fp, Instance: k.instance.ID, User: k.user, Mode: k.mode}
}
