package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/switchboardhq/switchboard"
)

// DefaultConnectLinkTTL is how long a connect link stays usable unless
// OAuthConfig.ConnectLinkTTL says otherwise.
const DefaultConnectLinkTTL = 15 * time.Minute

// ConnectLink is a link a person opens in a browser to connect their own
// account to a per-user OAuth instance: no caller credential is needed,
// the person signs in as the user the link names. It is single-use and
// short-lived, enforced by its row (connect_links), so any replica serves
// it. Its token is 256 random bits of which only the SHA-256 is stored: a
// link cannot be forged or derived, which is what signing it would give,
// and unlike a signature its use and expiry are checked server-side.
type ConnectLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
	User      string    `json:"user"`
	Instance  string    `json:"instance"`
	// Tenant and CreatedBy (who minted it: a caller id, or an admin API
	// principal's actor) are for the audit row of the minting.
	Tenant    switchboard.TenantID `json:"-"`
	CreatedBy string               `json:"-"`
}

// LinkTarget is what a connect link connects: a user of an instance.
type LinkTarget struct {
	Tenant       switchboard.TenantID
	TenantSlug   string
	InstanceID   switchboard.InstanceID
	InstanceSlug string
	User         string
}

// ConnectLinkPath is the path, under an instance's OAuth routes
// (/workspaces/{tenant}/webhooks/{instance}/oauth/), that opens a connect
// link; the token is its query parameter "token" (query strings are never
// logged).
const ConnectLinkPath = "link"

// ErrLinkInvalid is the answer for a connect link that does not exist,
// was used already or expired. It does not say which.
var ErrLinkInvalid = switchboard.E(switchboard.ErrInvalid, "invalid_connect_link",
	"this connect link is invalid, was already used, or has expired: ask for a new one")

// linkTTL returns the connect links' lifetime.
func (o *OAuth) linkTTL() time.Duration {
	if o.connectLinkTTL > 0 {
		return o.connectLinkTTL
	}
	return DefaultConnectLinkTTL
}

// MintConnectLink stores a new connect link for target, made by createdBy
// (a caller id, "member", "reconnect"), and returns it. Expired links are
// swept as it goes.
func (o *OAuth) MintConnectLink(ctx context.Context, target LinkTarget, createdBy string) (*ConnectLink, error) {
	if target.User == "" || len(target.User) > maxIdentity {
		return nil, errNoUser
	}
	token := randomToken(32)
	now := o.now()
	expires := now.Add(o.linkTTL())
	err := o.store.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM connect_links WHERE expires_at < $1`, now.Add(-time.Hour)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO connect_links (token_hash, tenant_id, tenant_slug, instance_id, instance_slug,
			user_id, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			linkHash(token), string(target.Tenant), target.TenantSlug, string(target.InstanceID), target.InstanceSlug,
			target.User, createdBy, now, expires)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storing a connect link: %w", err)
	}
	u := o.publicURL + "/workspaces/" + url.PathEscape(target.TenantSlug) + "/webhooks/" + url.PathEscape(target.InstanceSlug) +
		"/oauth/" + ConnectLinkPath + "?token=" + url.QueryEscape(token)
	return &ConnectLink{URL: u, ExpiresAt: expires, User: target.User, Instance: target.InstanceSlug,
		Tenant: target.Tenant, CreatedBy: createdBy}, nil
}

// linkHash is what the store keeps of a link's token.
func linkHash(token string) string { return hashHex("connect link\x00" + token) }

// ConnectLinkTarget returns what the unused, unexpired link of token
// connects, without spending it (a person may first have to sign in).
func (o *OAuth) ConnectLinkTarget(ctx context.Context, token string) (*LinkTarget, error) {
	if token == "" || len(token) > 256 {
		return nil, ErrLinkInvalid
	}
	var t LinkTarget
	var tenant, instance string
	err := o.store.db.QueryRowContext(ctx, `SELECT tenant_id, tenant_slug, instance_id, instance_slug, user_id FROM connect_links
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`, linkHash(token), o.now()).
		Scan(&tenant, &t.TenantSlug, &instance, &t.InstanceSlug, &t.User)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrLinkInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("reading a connect link: %w", err)
	}
	t.Tenant, t.InstanceID = switchboard.TenantID(tenant), switchboard.InstanceID(instance)
	return &t, nil
}

// SpendConnectLink marks the link of token used by user, once: a link
// already used (on any replica), expired, unknown, or naming another user
// is ErrLinkInvalid.
func (o *OAuth) SpendConnectLink(ctx context.Context, token, user string) error {
	res, err := o.store.db.ExecContext(ctx, `UPDATE connect_links SET used_at = $1
		WHERE token_hash = $2 AND user_id = $3 AND used_at IS NULL AND expires_at > $1`, o.now(), linkHash(token), user)
	if err != nil {
		return fmt.Errorf("spending a connect link: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return ErrLinkInvalid
	}
	return nil
}

// reconnectErr is reconnect_required for the grant k. For a user's grant
// it carries a fresh connect link (connectUrl) the agent can hand the
// user; when one cannot be stored, the instance's connect route.
func (o *OAuth) reconnectErr(ctx context.Context, k grantKey) error {
	connect := o.ConnectURL(k.tenantSlug, k.instance.Slug)
	e := switchboard.E(switchboard.ErrUnauthorized, StatusReconnectRequired,
		"the user's connection to this app is missing, expired or revoked; the user reconnects by opening connectUrl")
	if k.user == "" {
		e.Message = "the connection to this app is missing, expired or revoked; reconnect at " + connect
		return e
	}
	link, err := o.MintConnectLink(ctx, LinkTarget{Tenant: k.tenant, TenantSlug: k.tenantSlug, InstanceID: k.instance.ID,
		InstanceSlug: k.instance.Slug, User: k.user}, "reconnect")
	if err != nil {
		o.logger.Warn("minting a connect link for a reconnect failed; answering the connect route", "err", err.Error())
		e.ConnectURL = connect
		return e
	}
	e.ConnectURL = link.URL
	return e
}
