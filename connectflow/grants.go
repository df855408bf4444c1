package connectflow

import (
	"context"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
)

// Grants runs the per-user grant actions of the admin API (status,
// connect, disconnect) for a user the API has authenticated itself (a
// member's session or API key), not for a caller credential as the flow
// routes of this package do.
type Grants struct {
	g     *gateway.Gateway
	oauth *auth.OAuth
}

// NewGrants returns the grant actions over the gateway's instances and
// oauth's flows; oauth nil answers every action with 503
// oauth_unavailable.
func NewGrants(g *gateway.Gateway, oauth *auth.OAuth) *Grants {
	return &Grants{g: g, oauth: oauth}
}

// input resolves the instance and its fields for user.
func (gr *Grants) input(ctx context.Context, tenantSlug, instanceSlug, user string) (auth.ModeInput, error) {
	if gr.oauth == nil {
		return auth.ModeInput{}, errNoOAuth
	}
	t, err := gr.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return auth.ModeInput{}, err
	}
	return gr.g.ModeInput(ctx, t, &auth.Principal{Tenant: t.Tenant.ID, TenantSlug: t.Tenant.Slug, UserID: user})
}

// Status returns user's connection to the instance.
func (gr *Grants) Status(ctx context.Context, tenantSlug, instanceSlug, user string) (*auth.GrantStatus, error) {
	in, err := gr.input(ctx, tenantSlug, instanceSlug, user)
	if err != nil {
		return nil, err
	}
	return gr.oauth.Status(ctx, in)
}

// Connect starts an OAuth flow for user; the caller sets the flow's
// binding cookie on the browser that will follow the authorize URL.
func (gr *Grants) Connect(ctx context.Context, tenantSlug, instanceSlug, user string) (*auth.Flow, error) {
	in, err := gr.input(ctx, tenantSlug, instanceSlug, user)
	if err != nil {
		return nil, err
	}
	return gr.oauth.Connect(ctx, in)
}

// Disconnect revokes user's tokens at the provider when its connector
// declares a revocation endpoint (best effort: see auth.Disconnected), and
// deletes the user's grant.
func (gr *Grants) Disconnect(ctx context.Context, tenantSlug, instanceSlug, user string) (auth.Disconnected, error) {
	in, err := gr.input(ctx, tenantSlug, instanceSlug, user)
	if err != nil {
		return auth.Disconnected{}, err
	}
	return gr.oauth.Disconnect(ctx, in)
}

// Secure reports whether flow cookies must be Secure (an https public URL).
func (gr *Grants) Secure() bool {
	return gr.oauth != nil && len(gr.oauth.PublicURL()) > 8 && gr.oauth.PublicURL()[:8] == "https://"
}
