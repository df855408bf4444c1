package fidelity

import (
	"context"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Agent is the agent id the MCP path calls with; Instance is the slug of
// the instance Install makes.
const (
	Agent    = "fidelity-agent"
	Instance = "vendor"
)

// Install creates tenant on svc and installs man's connector in it as
// Instance: every field a placeholder credential, except the one that is
// the connector's base URL, which points at upstream; Agent on the
// allowlist. It returns the token of an agent-platform caller.
func Install(ctx context.Context, svc *tenants.Service, tenant string, man registry.Manifest, upstream string) (secrets.Secret, error) {
	if _, err := svc.CreateTenant(ctx, tenant, tenant); err != nil {
		return secrets.Secret{}, err
	}
	fields := map[string]*secrets.Secret{}
	for _, f := range man.Env {
		if !f.Secret && f.Default != "" && !strings.Contains(man.BaseURL, "{ENV:"+f.Name+"}") {
			// An operation-level server's URL or variable: its default.
			continue
		}
		v := secrets.New("fidelity-credential")
		if strings.Contains(man.BaseURL, "{ENV:"+f.Name+"}") {
			v = secrets.New(upstream)
		}
		fields[f.Name] = &v
	}
	if _, _, err := svc.Install(ctx, tenant, Instance, tenants.InstallRequest{
		ConnectorID: man.ID, AuthMode: man.Auth.Modes[0], Fields: fields, Agents: []string{Agent},
		// The run calls the connector's own tools, whatever their size.
		ToolsMode: tenants.ToolsList,
	}); err != nil {
		return secrets.Secret{}, err
	}
	_, tok, err := svc.CreateCaller(ctx, tenant, tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
	return tok, err
}

// Connect opens an MCP session as Agent with token on the MCP endpoint of
// tenant's Instance at base (the server's URL), sending through rt.
func Connect(ctx context.Context, base, tenant string, token secrets.Secret, rt http.RoundTripper) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: Agent, Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Connect(cctx, &sdk.StreamableClientTransport{
		Endpoint:             Endpoint(base, tenant),
		HTTPClient:           &http.Client{Transport: agentAuth{token: token.Reveal(), next: rt}},
		DisableStandaloneSSE: true,
	}, nil)
}

// Endpoint is the MCP endpoint of tenant's Instance at base.
func Endpoint(base, tenant string) string {
	return base + "/workspaces/" + tenant + "/webhooks/" + Instance + ".mcp"
}

// agentAuth authenticates the MCP client as an agent platform calling for
// Agent.
type agentAuth struct {
	token string
	next  http.RoundTripper
}

func (a agentAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	r.Header.Set("X-Agent-Id", Agent)
	return a.next.RoundTrip(r)
}
