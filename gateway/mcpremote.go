package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
	"github.com/switchboardhq/switchboard/registry/mcpremote"
	"github.com/switchboardhq/switchboard/secrets"
)

// The call path of mcp_remote instances: validateAgent, then dispatch to
// the instance's hosted MCP server through its mcpremote.Conn (kept on the
// Target, closed when the instance changes), then audit.

var errNotRemote = switchboard.E(switchboard.ErrInvalid, "invalid_request", "the app instance does not proxy a hosted MCP server")

// RemoteTools returns the tools of an mcp_remote instance's hosted server
// (or an mcp_local instance's server) for p, after validateAgent; the
// list is cached per instance.
func (g *Gateway) RemoteTools(ctx context.Context, t *Target, p *auth.Principal) ([]*sdk.Tool, error) {
	l, err := g.RemoteToolList(ctx, t, p)
	if err != nil {
		return nil, err
	}
	return l.Tools, nil
}

// RemoteToolList is RemoteTools with what is worked out from the tools
// once per listing (mcprelay.ToolList: the x-mcp-header bindings).
func (g *Gateway) RemoteToolList(ctx context.Context, t *Target, p *auth.Principal) (*mcprelay.ToolList, error) {
	if mcplocal.Is(t.Connector) {
		l, err := g.localLaunch(ctx, t, p)
		if err != nil {
			return nil, err
		}
		return g.local.ToolList(ctx, l)
	}
	u, err := g.remoteUpstream(ctx, t, p)
	if err != nil {
		return nil, err
	}
	list, err := t.remoteConn().ToolList(ctx, u)
	g.logRefusal(t, err)
	return list, err
}

// CallRemote forwards a tools/call to an mcp_remote instance's hosted
// server for p, after validateAgent, and audits it. The remote result
// (isError included) is returned as the server gave it; a failure to
// reach or a refusal by the server is a *registry.UpstreamError.
//
// params are sent as given: name, arguments and, answering an
// input-required result, the caller's inputResponses and requestState;
// a *mcprelay.Call in ctx receives the call's notifications.
func (g *Gateway) CallRemote(ctx context.Context, t *Target, p *auth.Principal, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	name := params.Name
	start := time.Now()
	var record audit.Admission
	if g.audit != nil && p != nil && t != nil {
		var err error
		if record, err = g.audit.Admit(); err != nil {
			return nil, err
		}
	}
	tk, err := g.admit(ctx, t, p)
	var (
		res    *sdk.CallToolResult
		status int
	)
	if err == nil {
		res, status, err = g.callRemote(ctx, t, p, params)
		tk.Done()
	}
	g.logRefusal(t, err)
	if record.Admitted() {
		e := audit.Entry{Time: start.UTC(), Tenant: t.Instance.TenantID, Instance: t.Instance.Slug, Agent: p.AgentID,
			Actor: p.UserID, Subject: p.Subject(), Tool: name, Action: "call", Outcome: "ok", Status: status,
			LatencyUs: time.Since(start).Microseconds()}
		if p.Caller != nil {
			e.Caller = string(p.Caller.ID)
		}
		if err != nil {
			e.Outcome = switchboard.CodeOf(err)
		} else if res.IsError {
			e.Outcome = "tool_error"
		}
		record.Record(e)
	}
	return res, err
}

func (g *Gateway) callRemote(ctx context.Context, t *Target, p *auth.Principal, params *sdk.CallToolParams) (*sdk.CallToolResult, int, error) {
	if mcplocal.Is(t.Connector) {
		l, err := g.localLaunch(ctx, t, p)
		if err != nil {
			return nil, 0, err
		}
		res, err := g.local.Call(ctx, l, params)
		if err != nil {
			return nil, 0, err
		}
		return redactAny(l.Redactor, res).(*sdk.CallToolResult), 0, nil
	}
	u, err := g.remoteUpstream(ctx, t, p)
	if err != nil {
		return nil, 0, err
	}
	res, status, err := t.remoteConn().Call(ctx, u, params)
	if res != nil {
		c, cerr := g.credentials(ctx, t) // cached by remoteUpstream
		if cerr == nil {
			c, cerr = g.userCredentials(ctx, t, c, p)
		}
		if cerr != nil {
			return nil, status, cerr
		}
		res = redactAny(c.red, res).(*sdk.CallToolResult)
	}
	return res, status, err
}

// remoteUpstream runs validateAgent and returns what the instance's
// connection needs to reach its hosted server.
func (g *Gateway) remoteUpstream(ctx context.Context, t *Target, p *auth.Principal) (mcpremote.Upstream, error) {
	if err := validateAgent(p, t); err != nil {
		return mcpremote.Upstream{}, err
	}
	if !mcpremote.Is(t.Connector) {
		return mcpremote.Upstream{}, errNotRemote
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return mcpremote.Upstream{}, err
	}
	if c, err = g.userCredentials(ctx, t, c, p); err != nil {
		return mcpremote.Upstream{}, err
	}
	return mcpremote.Upstream{Manifest: &t.Connector.Manifest, Fields: c.fields, Client: g.remote}, nil
}

// localLaunch runs validateAgent and returns what the manager needs to
// reach the server of an mcp_local instance for p: one process per
// instance, or per instance and user when the connector has user-scope
// fields (the user's own values reach only their own process).
func (g *Gateway) localLaunch(ctx context.Context, t *Target, p *auth.Principal) (mcplocal.Launch, error) {
	if err := validateAgent(p, t); err != nil {
		return mcplocal.Launch{}, err
	}
	if g.local == nil {
		return mcplocal.Launch{}, switchboard.E(switchboard.ErrUnavailable, "connector_unavailable",
			"local MCP servers are not enabled on this server")
	}
	if err := g.callers.CheckTarget(ctx, p); err != nil {
		return mcplocal.Launch{}, err
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return mcplocal.Launch{}, err
	}
	if c, err = g.userCredentials(ctx, t, c, p); err != nil {
		return mcplocal.Launch{}, err
	}
	entry, ok := g.catalog.Entry(t.Connector.Manifest.ID)
	if !ok {
		return mcplocal.Launch{}, switchboard.E(switchboard.ErrUnavailable, "connector_unavailable",
			"the connector %s of this app instance is not in the catalog", t.Connector.Manifest.ID)
	}
	m := &t.Connector.Manifest
	key := mcplocal.Key{Tenant: string(t.Instance.TenantID), Instance: t.Instance.Slug}
	perUser := t.Instance.AuthMode == registry.ModeOAuth || t.Instance.AuthMode == registry.ModeOAuthCentral
	if len(m.UserFields()) > 0 || perUser {
		key.User = p.Subject()
	}
	l := mcplocal.Launch{Key: key, Connector: t.Connector, Entry: entry, Fields: c.fields, Redactor: c.red}
	if m.Auth.Deliver != nil && t.Instance.AuthMode != "" {
		if err := g.deliver(ctx, t, c, p, &l); err != nil {
			return mcplocal.Launch{}, err
		}
	}
	return l, nil
}

// deliver obtains the instance's OAuth token for p through the token
// machinery (buildAppAuth: minted, cached, refreshed under the refresh
// lock) and puts it, in the manifest's format, in the launch's
// environment or files; the token's digest identifies the process, so
// that a renewed token starts a new one.
func (g *Gateway) deliver(ctx context.Context, t *Target, c *credentials, p *auth.Principal, l *mcplocal.Launch) error {
	d := *t.Connector.Manifest.Auth.Deliver
	a, err := g.buildAppAuth(ctx, t, c, p)
	if err != nil {
		return err
	}
	h, ok := a.(auth.TokenHolder)
	if !ok {
		return switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the app instance's auth mode %s holds no OAuth token to deliver", t.Instance.AuthMode)
	}
	access, _ := h.AccessToken()
	id, secret, _ := h.Client()
	values := map[string]secrets.Secret{}
	name := cmp.Or(d.Env, "ACCESS_TOKEN")
	if d.As == "file" {
		name = cmp.Or(d.Path, "token")
	}
	held := []string{access.Reveal(), secret.Reveal()}
	switch cmp.Or(d.Format, registry.DeliverAccessToken) {
	case registry.DeliverAccessToken:
		values[name] = access
	case registry.DeliverRefreshToken, registry.DeliverGoogleAuthorizedUser:
		refresh, err := h.RefreshToken(ctx)
		if err != nil || refresh.IsZero() {
			return switchboard.E(switchboard.ErrUnauthorized, "reconnect_required",
				"no refresh token is stored for this user: connect the account again")
		}
		held = append(held, refresh.Reveal())
		if d.Format == registry.DeliverRefreshToken {
			values[name] = refresh
			if d.As == "file" {
				values[name+".client_id"], values[name+".client_secret"] = id, secret
			} else {
				values[name+"_CLIENT_ID"], values[name+"_CLIENT_SECRET"] = id, secret
			}
		} else {
			b, err := json.Marshal(map[string]string{"type": "authorized_user", "client_id": id.Reveal(),
				"client_secret": secret.Reveal(), "refresh_token": refresh.Reveal()})
			if err != nil {
				return err
			}
			values[name] = secrets.New(string(b))
		}
	default:
		return switchboard.E(switchboard.ErrInvalid, "invalid_config", "unknown deliver format %q", d.Format)
	}
	if d.As == "file" {
		l.Files = map[string][]byte{}
		for k, v := range values {
			l.Files[k] = []byte(v.Reveal())
		}
	} else {
		l.Env = values
	}
	sum := sha256.Sum256([]byte(access.Reveal()))
	l.Credential = hex.EncodeToString(sum[:])
	l.Redactor = l.Redactor.With(held...)
	return nil
}
