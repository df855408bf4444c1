package gateway

import (
	"context"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/metrics"
	"github.com/switchboardhq/switchboard/registry"
)

// admit asks call admission whether the call of p to t may go upstream
// now. Without a controller it costs nothing; with one, a call no limit
// applies to allocates nothing.
func (g *Gateway) admit(ctx context.Context, t *Target, p *auth.Principal) (admission.Ticket, error) {
	if g.admission == nil || t == nil || p == nil {
		return admission.Ticket{}, nil
	}
	start := time.Now()
	tk, err := g.admission.Admit(ctx, admissionCall(t, p))
	g.metrics.Since(metrics.StepAdmission, start)
	return tk, err
}

// admissionCall is what admission knows of a call of p to t: its tenant,
// instance, subject and connector, and whose upstream credential it uses.
func admissionCall(t *Target, p *auth.Principal) admission.Call {
	in := t.Instance
	c := admission.Call{Tenant: string(in.TenantID), Instance: in.Slug, User: p.Subject(), Connector: in.ConnectorID,
		PerUser: in.AuthMode == registry.ModeOAuth || in.AuthMode == registry.ModeOAuthCentral}
	if in.AuthMode == registry.ModeOAuthCentral {
		c.Client = t.Connector.Manifest.Auth.Provider
	}
	return c
}

// learn hands an upstream answer to admission, which keeps the wait its
// rate-limit headers ask for (per credential).
func (g *Gateway) learn(t *Target, p *auth.Principal, resp *registry.Response) {
	if g.admission != nil && p != nil {
		g.admission.Learn(admissionCall(t, p), resp.Status, resp.Header)
	}
}
