package gateway

import (
	"context"
	"errors"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/tenants"
)

// Unreachable is an instance of the tenant the agent may call but that
// cannot be resolved now (its connector is missing or not served), with
// the refusal's error.
type Unreachable struct {
	Instance *tenants.Instance
	Err      error
}

// AgentTargets returns the instances of p's tenant whose allowlist admits
// p's agent, resolved (from the cache when warm), by slug, and those
// that could not be resolved. The instance rows are read with one query;
// instances the agent is not allowed are neither resolved nor reported.
// The tenant catalog endpoint searches these.
func (g *Gateway) AgentTargets(ctx context.Context, p *auth.Principal) ([]*Target, []Unreachable, error) {
	if err := identityText(p); err != nil {
		return nil, nil, err
	}
	rows, err := g.store.ListInstances(ctx, p.Tenant)
	if err != nil {
		return nil, nil, err
	}
	var ts []*Target
	var bad []Unreachable
	for _, in := range rows {
		if !in.AllowsAgent(p.AgentID) {
			continue
		}
		t, err := g.Resolve(ctx, p.TenantSlug, in.Slug)
		if err != nil {
			bad = append(bad, Unreachable{Instance: in, Err: err})
			continue
		}
		ts = append(ts, t)
	}
	return ts, bad, nil
}

// Tenant returns the tenant tenantSlug from the call path's cache; an
// unknown one is ErrNotFound "not_found".
func (g *Gateway) Tenant(ctx context.Context, tenantSlug string) (*tenants.Tenant, error) {
	if !switchboard.ValidSlug(tenantSlug) {
		return nil, errNoTenant
	}
	t, err := g.store.CachedTenant(ctx, tenantSlug)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, errNoTenant
	}
	return t, err
}

var errNoTenant = switchboard.E(switchboard.ErrNotFound, "not_found", "no such workspace")

// Connected reports whether p's subject user (a trusted caller's target
// user, else the caller's own) has what a call of t needs of them: nil
// for an instance whose credential is the instance's own, else the error
// the call would answer, with where the user acts when there is such a
// place: consent_required when the connector has user-scope fields the
// user has not set, reconnect_required when the instance's auth mode is
// each user's own OAuth grant and the user has none (or it must be
// renewed). Nothing is sent upstream. The tenant catalog endpoint's
// search counts the instances whose user is not connected.
func (g *Gateway) Connected(ctx context.Context, t *Target, p *auth.Principal) error {
	c, err := g.credentials(ctx, t)
	if err != nil {
		return err
	}
	if c, err = g.userCredentials(ctx, t, c, p); err != nil {
		return err
	}
	return g.appAuth.Connected(ctx, modeInput(t, c, p))
}
