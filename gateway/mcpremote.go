package gateway

import (
	"context"
	"encoding/json"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry/mcpremote"
	"github.com/switchboardhq/switchboard/secrets"
)

// The call path of mcp_remote instances: validateAgent, then dispatch to
// the instance's hosted MCP server through its mcpremote.Conn (kept on the
// Target, closed when the instance changes), then audit.

var errNotRemote = switchboard.E(switchboard.ErrInvalid, "invalid_request", "the app instance does not proxy a hosted MCP server")

// RemoteTools returns the tools of an mcp_remote instance's hosted server
// for p, after validateAgent; the list is cached per instance.
func (g *Gateway) RemoteTools(ctx context.Context, t *Target, p *auth.Principal) ([]*sdk.Tool, error) {
	u, err := g.remoteUpstream(ctx, t, p)
	if err != nil {
		return nil, err
	}
	tools, err := t.remote.Tools(ctx, u)
	g.logRefusal(t, err)
	return tools, err
}

// CallRemote forwards a tools/call to an mcp_remote instance's hosted
// server for p, after validateAgent, and audits it. The remote result
// (isError included) is returned as the server gave it; a failure to
// reach or a refusal by the server is a *registry.UpstreamError.
func (g *Gateway) CallRemote(ctx context.Context, t *Target, p *auth.Principal, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	start := time.Now()
	var record func(audit.Entry)
	if g.audit != nil && p != nil && t != nil {
		var err error
		if record, err = g.audit.Admit(); err != nil {
			return nil, err
		}
	}
	res, status, err := g.callRemote(ctx, t, p, name, args)
	g.logRefusal(t, err)
	if record != nil {
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
		record(e)
	}
	return res, err
}

func (g *Gateway) callRemote(ctx context.Context, t *Target, p *auth.Principal, name string, args json.RawMessage) (*sdk.CallToolResult, int, error) {
	u, err := g.remoteUpstream(ctx, t, p)
	if err != nil {
		return nil, 0, err
	}
	res, status, err := t.remote.Call(ctx, u, name, args)
	if res != nil {
		c, cerr := g.credentials(ctx, t) // cached by remoteUpstream
		if cerr != nil {
			return nil, status, cerr
		}
		redactResult(c.red, res)
	}
	return res, status, err
}

// redactResult removes the instance's secrets from a hosted server's tool
// result: its text content and its structured content.
func redactResult(red *secrets.Redactor, res *sdk.CallToolResult) {
	if red.Len() == 0 {
		return
	}
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			tc.Text = red.String(tc.Text)
		}
	}
	if res.StructuredContent != nil {
		res.StructuredContent = red.Value(res.StructuredContent)
	}
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
	return mcpremote.Upstream{Manifest: &t.Connector.Manifest, Fields: c.fields, Client: g.remote}, nil
}
