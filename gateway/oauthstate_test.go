package gateway_test

import (
	"net/url"
	"testing"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestStateIsBoundToItsCallback: the state of a per-instance flow is
// refused on the platform's central callback (issue 10 §6), and spent.
func TestStateIsBoundToItsCallback(t *testing.T) {
	t.Parallel()
	o := setupOAuth(t, dbtest.SQLite(t))
	alice := o.s.newBrowser(o.as, "alice", o.token)
	cb, err := url.Parse(authorizeOnly(t, alice, o.s.startFlow(t, alice, "acme", "crm")))
	if err != nil {
		t.Fatal(err)
	}
	central := o.s.srv.URL + auth.CentralCallbackPath + "?" + cb.RawQuery
	if st, page := get(t, alice.client, central); st != 400 {
		t.Fatalf("a per-instance state on the central callback = %d %s, want 400", st, page)
	}
	if st, _ := get(t, alice.client, cb.String()); st != 400 {
		t.Errorf("the state refused on the wrong callback was not spent")
	}
	if n := o.as.TokenRequests("authorization_code"); n != 0 {
		t.Errorf("%d code exchanges for a state on the wrong callback", n)
	}
}
