package gateway

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"sync"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/secrets"
)

// The acting user's own values of user-scope fields (tenants'
// SetUserSettings): a call of an instance whose connector has such fields
// runs with the instance's fields plus the values of p.Subject() (a
// trusted caller's targetUserId, else the caller's own user), never
// anyone else's. A user who has not set the required ones gets
// consent_required with the console page where they do.

// maxCachedUsers bounds the users whose credentials a target keeps.
const maxCachedUsers = 1024

// usersCache is a target's credentials per user.
type usersCache struct {
	mu sync.Mutex
	m  map[string]*credentials
}

func (u *usersCache) get(user string) *credentials {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[user]
}

func (u *usersCache) put(user string, c *credentials) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil || len(u.m) >= maxCachedUsers {
		u.m = map[string]*credentials{}
	}
	u.m[user] = c
}

func (u *usersCache) forget(user string) {
	u.mu.Lock()
	delete(u.m, user)
	u.mu.Unlock()
}

func (u *usersCache) clear() {
	u.mu.Lock()
	u.m = nil
	u.mu.Unlock()
}

var errNoSettingsUser = switchboard.E(switchboard.ErrInvalid, "user_required",
	"this app instance runs with each user's own settings, and the call names no user: use a credential that carries one or send "+auth.HeaderUserID)

// SettingsURL is the console page where the signed-in user sets their
// own values of an instance's user-scope fields.
func (g *Gateway) SettingsURL(instanceSlug string) string {
	return g.publicURL + "/console/instances/" + url.PathEscape(instanceSlug) + "/settings"
}

// userCredentials returns the credentials of a call of t for p: c itself
// when the connector has no user-scope field, else c with the subject's
// own values.
func (g *Gateway) userCredentials(ctx context.Context, t *Target, c *credentials, p *auth.Principal) (*credentials, error) {
	m := &t.Connector.Manifest
	fields := m.UserFields()
	if len(fields) == 0 {
		return c, nil
	}
	user := ""
	if p != nil {
		user = p.Subject()
	}
	if user == "" {
		return nil, errNoSettingsUser
	}
	if uc := t.users.get(user); uc != nil {
		return uc, nil
	}
	own, err := g.secrets.GetAll(ctx, t.Instance.TenantID, secrets.UserOwner(string(t.Instance.ID), user))
	if errors.Is(err, secrets.ErrUndecryptable) {
		g.logger.Warn("user-scope field does not decrypt", "tenant", t.Tenant.Slug, "instance", t.Instance.Slug, "err", err)
		return nil, g.consent(t, "a stored value of yours for this app instance cannot be decrypted: enter your settings again")
	}
	if err != nil {
		return nil, err
	}
	merged := maps.Clone(c.fields)
	if merged == nil {
		merged = map[string]secrets.Secret{}
	}
	var missing []string
	for _, f := range fields {
		v, ok := own[f.Name]
		switch {
		case ok:
			merged[f.Name] = v
		case f.Required && f.Default == "":
			missing = append(missing, f.Name)
		default:
			delete(merged, f.Name)
		}
	}
	if len(missing) > 0 {
		return nil, g.consent(t, "this app instance needs your own settings before it can act for you (missing: "+joinBounded(missing)+"): open the link to set them")
	}
	uc := newCredentials(t.Connector, merged)
	t.users.put(user, uc)
	return uc, nil
}

// consent is the consent_required error of t with msg.
func (g *Gateway) consent(t *Target, msg string) error {
	e := switchboard.E(switchboard.ErrUnauthorized, "consent_required", "%s", msg)
	e.ConnectURL = g.SettingsURL(t.Instance.Slug)
	return e
}

func joinBounded(names []string) string {
	out := ""
	for i, n := range names {
		if i == 8 {
			return out + ", …"
		}
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
