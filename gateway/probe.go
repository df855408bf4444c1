package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// The instance test: the connector's probe operation, called with an
// instance's credentials by the operator (Test) or, before a
// configuration is saved, by the verifier (Probe).

// TestResult is the answer of an instance test: secret-free.
type TestResult struct {
	OK      bool           `json:"ok"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// Test runs the connector's probe operation (manifest verify.probe) for
// the instance with its resolved credentials, as user when the mode is
// per-user, and reports the outcome. It calls no agent allowlist: it is
// the operator's check.
func (g *Gateway) Test(ctx context.Context, tenantSlug, instanceSlug, user string) (*TestResult, error) {
	t, err := g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, err
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return nil, err
	}
	p := &auth.Principal{Tenant: t.Instance.TenantID, TenantSlug: t.Tenant.Slug, UserID: user, Kind: "operator"}
	return g.probe(ctx, t, c, p), nil
}

// Probe runs the connector's verify.probe operation for t with the given
// field values (a candidate configuration, not yet saved) as p, and
// reports the outcome, secret-free. It calls no agent allowlist.
func (g *Gateway) Probe(ctx context.Context, t *Target, fields map[string]secrets.Secret, p *auth.Principal) *TestResult {
	return g.probe(ctx, t, newCredentials(t.Connector, fields), p)
}

// probe runs the connector's verify.probe operation for t with the
// credentials c as p, and reports the outcome, secret-free.
func (g *Gateway) probe(ctx context.Context, t *Target, c *credentials, p *auth.Principal) *TestResult {
	m := &t.Connector.Manifest
	if m.Verify == nil || m.Verify.Probe == nil || m.Verify.Probe.Operation == "" {
		return &TestResult{OK: false, Message: "the connector declares no probe operation to test with",
			Details: map[string]any{"code": "no_probe", "mode": t.Instance.AuthMode}}
	}
	probe := m.Verify.Probe
	op, ok := probeOperation(t.Spec(), probe.Operation)
	if !ok {
		return &TestResult{OK: false, Message: "the connector's probe names an unknown operation",
			Details: map[string]any{"code": "invalid_probe", "mode": t.Instance.AuthMode}}
	}
	if c.baseURL == "" {
		return &TestResult{OK: false, Message: "the app instance has no base URL: set the connector's URL field",
			Details: map[string]any{"code": "invalid_config", "mode": t.Instance.AuthMode}}
	}
	args := map[string]any{}
	for k, v := range probe.Args {
		args[k] = registry.Expand(v, m, c.fields)
	}
	details := map[string]any{"operation": op.Name, "mode": t.Instance.AuthMode}
	start := time.Now()
	applier, err := g.buildAppAuth(ctx, t, c, p)
	if err == nil {
		var resp *registry.Response
		resp, err = g.dispatcher.Do(ctx, registry.Call{Op: op, BaseURL: c.baseURL, Servers: c.servers, Args: args, Credentials: applier})
		redact(c.redactor(applier), resp, err)
		if err == nil {
			details["status"] = resp.Status
		}
	}
	details["latency_ms"] = time.Since(start).Milliseconds()
	g.logRefusal(t, err)
	if err != nil {
		d := switchboard.DetailOf(err)
		details["code"] = d.Code
		var ue *registry.UpstreamError
		if errors.As(err, &ue) {
			if ue.Status != 0 {
				details["status"] = ue.Status
			}
		}
		return &TestResult{OK: false, Message: d.Message, Details: details}
	}
	st, _ := details["status"].(int)
	want := probe.Expect
	if want == "" {
		want = "2xx"
	}
	if statusMatches(st, want) {
		return &TestResult{OK: true, Message: "the connection works", Details: details}
	}
	return &TestResult{OK: false, Message: fmt.Sprintf("the probe answered %d, expected %s", st, want), Details: details}
}

// probeOperation finds a probe's operation: an operationId, or an
// "entity.action" of the registry.
func probeOperation(api *registry.Spec, name string) (*registry.Operation, bool) {
	if api == nil {
		return nil, false
	}
	if op, ok := api.Operation(name); ok {
		return op, true
	}
	if ent, act, cut := strings.Cut(name, "."); cut {
		if e, found := api.Entity(ent); found {
			if a, found := e.Action(act); found && a.Op != nil {
				return a.Op, true
			}
		}
	}
	return nil, false
}

// statusMatches reports whether status is of the class want ("2xx") or
// equals it ("204").
func statusMatches(status int, want string) bool {
	if len(want) == 3 && (want[1:] == "xx" || want[1:] == "XX") {
		return strconv.Itoa(status/100) == want[:1]
	}
	return strconv.Itoa(status) == want
}
