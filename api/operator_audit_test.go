package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestOperatorChangesAudited: creating a tenant, registering, replacing
// and deleting a central provider, and minting and revoking an operator
// token are audit rows with the operator as actor. The tenant's row is in
// the new tenant's log; the others, which belong to no tenant, are in the
// operator's (the rows without a tenant). No row holds the provider's
// client secret or the token.
func TestOperatorChangesAudited(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		const secret = "provider-secret-canary-7f3a"
		tenant := e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme","name":"Acme"}`), 201).json(t)
		e.expect(e.do("PUT", "/v1/providers/github", `{"name":"GitHub","authorize_url":"https://id.example.test/authorize","token_url":"https://id.example.test/token","client_id":"cid","client_secret":"`+secret+`"}`), 201)
		e.expect(e.do("PUT", "/v1/providers/github", `{"name":"GitHub","authorize_url":"https://id.example.test/authorize","token_url":"https://id.example.test/token","client_id":"cid2"}`), 200)
		e.expect(e.do("DELETE", "/v1/providers/github", ``), 204)
		tok := e.expect(e.do("POST", "/v1/operator-tokens", `{"name":"ci"}`), 201).json(t)
		tokID, token := tok["id"].(string), tok["token"].(string)
		e.expect(e.do("DELETE", "/v1/operator-tokens/"+tokID, ``), 200)

		type row struct{ tenant, subject, action string }
		want := map[row]bool{
			{tenant["id"].(string), "acme", "tenant.create"}: false,
			{"", "github", "provider.create"}:                false,
			{"", "github", "provider.replace"}:               false,
			{"", "github", "provider.delete"}:                false,
			{"", tokID, "operator_token.create"}:             false,
			{"", tokID, "operator_token.revoke"}:             false,
		}
		store := audit.NewStore(db)
		var missing []row
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			for _, tn := range []string{tenant["id"].(string), ""} {
				entries, err := store.List(context.Background(), switchboard.TenantID(tn), audit.Query{Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, en := range entries {
					r := row{tn, en.Subject, en.Action}
					if _, ok := want[r]; ok {
						if !strings.HasPrefix(en.Actor, "operator") {
							t.Errorf("%v: actor %q, want the operator", r, en.Actor)
						}
						want[r] = true
					}
					for _, v := range []string{secret, token} {
						if strings.Contains(en.Subject+en.Action+en.Actor+en.Outcome+en.Instance, v) {
							t.Errorf("an audit row holds a secret: %+v", en)
						}
					}
				}
			}
			missing = missing[:0]
			for r, seen := range want {
				if !seen {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(missing) > 0 {
			t.Errorf("no audit rows for %v", missing)
		}
	})
}
