package tenantmcp_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenantmcp"
)

// maxToolsList is the goal for the tenant endpoint's tools/list (issue 16).
const maxToolsList = 4096

// TestContextCost measures what an agent's context holds: the tenant
// endpoint's tools/list, against the tools/list of every instance
// endpoint of the evaluation tenant; and a search + describe sequence for
// a task (the call's answer is the same either way). It fails when the
// tenant tools/list passes its 4 KB goal.
func TestContextCost(t *testing.T) {
	t.Parallel()
	list, err := json.Marshal(&sdk.ListToolsResult{Tools: tenantmcp.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) > maxToolsList {
		t.Errorf("tenant tools/list is %d bytes, want at most %d", len(list), maxToolsList)
	}
	targets := evalTenant(t)
	instances := 0
	for _, tg := range targets {
		n := registry.MCPToolsListSize(tg.Spec().Entities)
		instances += n
		t.Logf("instance endpoint %-9s tools/list %7d bytes", tg.Instance.Slug, n)
	}
	t.Logf("tenant endpoint tools/list %d bytes; the %d instance endpoints' together %d bytes (%.0fx)",
		len(list), len(targets), instances, float64(instances)/float64(len(list)))

	for _, query := range []string{"send an SMS with Twilio", "refund a Stripe charge", "post a message in the #general Slack channel"} {
		res, err := tenantmcp.SearchTargets(targets, tenantmcp.SearchArgs{Query: query, Limit: 5})
		if err != nil || len(res.Results) == 0 {
			t.Fatalf("search %q: %v %v", query, res, err)
		}
		found, _ := json.Marshal(res)
		d, err := tenantmcp.DescribeTarget(targets, res.Results[0].Address)
		if err != nil {
			t.Fatal(err)
		}
		described, _ := json.Marshal(d)
		seq := len(list) + len(found) + len(described)
		t.Logf("task %q: tools/list %d + search %d + describe %d = %d bytes (vs %d for the instance endpoints' tools/list)",
			query, len(list), len(found), len(described), seq, instances)
	}
}
