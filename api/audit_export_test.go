package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// The audit export streams every row as NDJSON; usage answers from the
// rollup, per tenant and for the operator across tenants; a tenant's
// owner sets its retention within the operator's.
func TestAuditExportUsageRetention(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme","name":"Acme"}`), 201)
		ten := e.expect(e.do("GET", "/v1/tenants/acme", ""), 200).json(t)["id"].(string)
		at := time.Now().UTC().Add(-time.Minute)
		var rows []audit.Entry
		for i := range 1205 {
			rows = append(rows, audit.Entry{ID: fmt.Sprintf("aud_x%05d", i), Tenant: switchboard.TenantID(ten), Time: at,
				Instance: []string{"crm", "gh"}[i%2], Agent: []string{"bot", "helper"}[i%2], Caller: "cal_1",
				Tool: "crm_contacts", Action: "list", Outcome: []string{"ok", "upstream_error"}[i%2]})
		}
		if err := audit.NewStore(db).Insert(context.Background(), rows); err != nil {
			t.Fatal(err)
		}

		r := e.expect(e.do("GET", "/v1/tenants/acme/audit/export?agent=helper", ""), 200)
		if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type = %q", ct)
		}
		seen := map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		for sc.Scan() {
			var row audit.Entry
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Agent != "helper" || seen[row.ID] {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			seen[row.ID] = true
		}
		if len(seen) != 602 {
			t.Errorf("exported %d rows of agent helper, want 602", len(seen))
		}
		if c := e.expect(e.do("GET", "/v1/tenants/acme/audit/export?from=yesterday", ""), 400).errCode(t); c != "invalid_time" {
			t.Errorf("from=yesterday: %s", c)
		}
		// The listing takes the same filters.
		if n := len(e.expect(e.do("GET", "/v1/tenants/acme/audit?agent=bot&outcome=ok&limit=500", ""), 200).json(t)["entries"].([]any)); n != 500 {
			t.Errorf("agent=bot&outcome=ok lists %d rows, want a full page of 500", n)
		}

		u := e.expect(e.do("GET", "/v1/tenants/acme/usage?by=agent,outcome", ""), 200).json(t)
		if u["calls"] != float64(1205) || u["failed"] != float64(602) || len(u["rows"].([]any)) != 2 {
			t.Errorf("usage = %v", u)
		}
		if c := e.expect(e.do("GET", "/v1/tenants/acme/usage?by=secret", ""), 400).errCode(t); c != "invalid_usage_by" {
			t.Errorf("by=secret: %s", c)
		}
		all := e.expect(e.do("GET", "/v1/usage?limit=1", ""), 200).json(t)
		list := all["tenants"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["tenant_id"] != ten || list[0].(map[string]any)["calls"] != float64(1205) {
			t.Errorf("usage by tenant = %v", all)
		}

		if c := e.expect(e.do("PUT", "/v1/tenants/acme/audit/retention", `{"days":401}`), 400).errCode(t); c != "invalid_retention" {
			t.Errorf("401 days: %s", c)
		}
		got := e.expect(e.do("PUT", "/v1/tenants/acme/audit/retention", `{"days":90}`), 200).json(t)
		if got["days"] != float64(90) || got["operator_days"] != float64(audit.DefaultRetentionDays) || got["own"] != true {
			t.Errorf("retention = %v", got)
		}
		if got := e.expect(e.do("GET", "/v1/tenants/acme/audit/retention", ""), 200).json(t); got["days"] != float64(90) {
			t.Errorf("retention read back = %v", got)
		}
	})
}
