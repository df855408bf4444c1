package api_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

func (e *env) instance(r response) tenants.InstanceView {
	e.t.Helper()
	var v tenants.InstanceView
	if err := json.Unmarshal(r.body, &v); err != nil || v.Instance == nil {
		e.t.Fatalf("not an instance (%v): %s", err, r.body)
	}
	return v
}

// TestPatchInstance: PATCH changes only what the body holds; PUT without
// the allowlist is refused instead of emptying it.
func TestPatchInstance(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme"}`), 201)
		v1 := e.instance(e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh",
			`{"connector_id":"github","auth_mode":"accessToken","fields":{"GITHUB_TOKEN":"`+canary+`"},"agents":["a","b"]}`), 201))
		// A PUT that forgets the allowlist changes nothing.
		if c := e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh", `{"connector_id":"github","auth_mode":"accessToken"}`), 400).errCode(t); c != "missing_property" {
			t.Fatalf("PUT without agents = %s", c)
		}
		v := e.instance(e.expect(e.do("PATCH", "/v1/tenants/acme/instances/gh", `{"agents":["c"]}`), 200))
		if strings.Join(v.Agents, ",") != "c" || v.AuthMode != "accessToken" || v.Revision != v1.Revision+1 {
			t.Fatalf("PATCH agents = %+v", v.Instance)
		}
		v = e.instance(e.expect(e.do("PATCH", "/v1/tenants/acme/instances/gh", `{"auth_mode":"apiKey","agents":null}`), 200))
		if strings.Join(v.Agents, ",") != "c" || v.AuthMode != "apiKey" {
			t.Fatalf("PATCH auth_mode = %+v", v.Instance)
		}
		v = e.instance(e.expect(e.do("PATCH", "/v1/tenants/acme/instances/gh", `{"agents":[]}`), 200))
		if len(v.Agents) != 0 || v.AuthMode != "apiKey" {
			t.Fatalf("PATCH to an empty allowlist = %+v", v.Instance)
		}
		again := e.instance(e.expect(e.do("PATCH", "/v1/tenants/acme/instances/gh", `{"agents":[]}`), 200))
		if again.Revision != v.Revision || !again.UpdatedAt.Equal(v.UpdatedAt) {
			t.Fatalf("a PATCH that changes nothing moved revision %d -> %d", v.Revision, again.Revision)
		}
		e.assertNoCanary(canary)
	})
}

// TestUndecryptableField: a field row that does not decrypt leaves the
// list and the instance readable, marks them, logs the row without its
// value, and a PUT with a new value repairs it.
func TestUndecryptableField(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme"}`), 201)
		install := `{"connector_id":"github","auth_mode":"apiKey","fields":{"GITHUB_TOKEN":"` + canary + `"},"agents":["a"]}`
		v := e.instance(e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh", install), 201))
		e.expect(e.do("PUT", "/v1/tenants/acme/instances/ok", install), 201)
		// Move gh's ciphertext into ok's row: it no longer opens there.
		_, err := db.ExecContext(context.Background(), `UPDATE secrets SET ciphertext =
			(SELECT ciphertext FROM secrets WHERE owner = $1 AND name = 'GITHUB_TOKEN')
			WHERE owner <> $1`, v.SecretOwner())
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Instances []tenants.InstanceView }
		if err := json.Unmarshal(e.expect(e.do("GET", "/v1/tenants/acme/instances", ""), 200).body, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Instances) != 2 || list.Instances[0].NeedsAttention || !list.Instances[1].NeedsAttention {
			t.Fatalf("list = %+v", list.Instances)
		}
		bad := e.instance(e.expect(e.do("GET", "/v1/tenants/acme/instances/ok", ""), 200))
		if !bad.NeedsAttention || !slices.Equal(bad.Undecryptable(), []string{"GITHUB_TOKEN"}) {
			t.Fatalf("GET = %+v", bad)
		}
		var logged bool
		for line := range strings.Lines(e.logs.String()) {
			if strings.Contains(line, "instance field does not decrypt") {
				logged = true
				if !strings.Contains(line, `"field":"GITHUB_TOKEN"`) || !strings.Contains(line, `"instance":"ok"`) ||
					!strings.Contains(line, bad.SecretOwner()) {
					t.Errorf("the log line does not name the row: %s", line)
				}
			}
		}
		if !logged {
			t.Fatalf("no log line names the bad row:\n%s", e.logs.String())
		}
		// A PATCH that keeps the bad row is refused; one that replaces it works.
		if c := e.expect(e.do("PATCH", "/v1/tenants/acme/instances/ok", `{"agents":["b"]}`), 409).errCode(t); c != "undecryptable" {
			t.Fatalf("PATCH keeping the bad row = %s", c)
		}
		fixed := e.instance(e.expect(e.do("PUT", "/v1/tenants/acme/instances/ok", install), 200))
		if fixed.NeedsAttention {
			t.Fatalf("after PUT: %+v", fixed)
		}
		e.assertNoCanary(canary)
	})
}
