package gateway

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/secrets"
)

// Forward runs one request of an MCP method other than tools (resources,
// prompts, completions) against the server an mcp_remote or mcp_local
// instance proxies, for p, through the same governance as its tool calls:
// validateAgent, the acting user's values, an audit row (the method as
// the tool, "forward" as the action), the instance's and the call's
// secrets redacted from the result, typed errors. fn sends the request
// on the session and returns the server's result.
func (g *Gateway) Forward(ctx context.Context, t *Target, p *auth.Principal, method string,
	fn func(context.Context, *sdk.ClientSession) (sdk.Result, error)) (sdk.Result, error) {
	start := time.Now()
	var record audit.Admission
	if g.audit != nil && p != nil && t != nil {
		var err error
		if record, err = g.audit.Admit(); err != nil {
			return nil, err
		}
	}
	res, err := g.forward(ctx, t, p, fn)
	g.logRefusal(t, err)
	if record.Admitted() {
		e := audit.Entry{Time: start.UTC(), Tenant: t.Instance.TenantID, Instance: t.Instance.Slug, Agent: p.AgentID,
			Actor: p.UserID, Subject: p.Subject(), Tool: method, Action: "forward", Outcome: "ok",
			LatencyUs: time.Since(start).Microseconds()}
		if p.Caller != nil {
			e.Caller = string(p.Caller.ID)
		}
		if err != nil {
			e.Outcome = switchboard.CodeOf(err)
		}
		record.Record(e)
	}
	return res, err
}

func (g *Gateway) forward(ctx context.Context, t *Target, p *auth.Principal, fn func(context.Context, *sdk.ClientSession) (sdk.Result, error)) (sdk.Result, error) {
	var (
		res sdk.Result
		red *secrets.Redactor
	)
	run := func(ctx context.Context, s *sdk.ClientSession) error {
		var err error
		res, err = fn(ctx, s)
		return err
	}
	if mcplocal.Is(t.Connector) {
		l, err := g.localLaunch(ctx, t, p)
		if err != nil {
			return nil, err
		}
		if err := g.local.Do(ctx, l, run); err != nil {
			return nil, err
		}
		red = l.Redactor
	} else {
		u, err := g.remoteUpstream(ctx, t, p)
		if err != nil {
			return nil, err
		}
		if err := t.remoteConn().Do(ctx, u, run); err != nil {
			return nil, err
		}
		c, err := g.credentials(ctx, t)
		if err == nil {
			c, err = g.userCredentials(ctx, t, c, p)
		}
		if err != nil {
			return nil, err
		}
		red = c.red
	}
	return redactAny(red, res), nil
}

// redactAny removes the redactor's values from any result, whatever its
// type, through its JSON form: content of every type (text, embedded
// resources, prompt messages) passes unchanged otherwise.
func redactAny(red *secrets.Redactor, res sdk.Result) sdk.Result {
	if red == nil || red.Len() == 0 || res == nil {
		return res
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	clean := red.Bytes(b)
	if string(clean) == string(b) {
		return res
	}
	out := reflect.New(reflect.TypeOf(res).Elem()).Interface()
	if json.Unmarshal(clean, out) != nil {
		return res
	}
	r, ok := out.(sdk.Result)
	if !ok {
		return res
	}
	return r
}
