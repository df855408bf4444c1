package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// dumpDB renders every value of every table as text.
func dumpDB(t *testing.T, db *database.DB) string {
	t.Helper()
	ctx := context.Background()
	q := `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`
	if db.Dialect == database.SQLite {
		q = `SELECT name FROM sqlite_master WHERE type = 'table'`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rs, err := db.QueryContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rs.Scan(ptrs...)
			for _, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s\t%v\n", table, v)
			}
		}
		rs.Close()
	}
	if db.Path != "" {
		for _, p := range []string{db.Path, db.Path + "-wal"} {
			if raw, err := os.ReadFile(p); err == nil {
				b.Write(raw)
			}
		}
	}
	return b.String()
}

// Client secrets, private keys, refresh and access tokens appear in no
// log line, response, audit row or clear database value.
func TestCanarySecretsNeverLeak(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		key, pemKey := ecKey(t)
		as := authztest.New(t, authztest.Options{Issuers: []authztest.Issuer{{Issuer: "svc@acme", Key: &key.PublicKey}}})
		up := newUpstream(t, as)
		clk := &clock{}
		s := newStack(t, db, loadCRM(t), clk)
		oauthSecret, ccSecret, centralSecret := "canary-oauth-secret-91b2", "canary-cc-secret-4e7d", "canary-central-secret-0c3f"
		as.AddClient(authztest.Client{ID: "crm-app", Secret: oauthSecret, Scopes: []string{"contacts.read"},
			RedirectURIs: []string{redirectFor(s, "acme", "crm")}})
		as.AddClient(authztest.Client{ID: "svc", Secret: ccSecret, Scopes: []string{"contacts.read"}})
		as.AddClient(authztest.Client{ID: "central", Secret: centralSecret, Scopes: []string{"contacts.read"},
			RedirectURIs: []string{s.srv.URL + "/oauth/callback"}})
		view, _, err := s.prov.Put(context.Background(), "testidp", providerReq(as, newSecret("central"), newSecret(centralSecret)))
		if err != nil {
			t.Fatal(err)
		}
		vb, _ := json.Marshal(view)
		s.bodies.Write(vb)

		s.tenant(t, "acme")
		s.install(t, "acme", "crm", "oauth", oauthFields(as, up, "crm-app", oauthSecret), agent)
		s.install(t, "acme", "cc", "clientCredentials", map[string]string{"API_URL": up.URL, "CLIENT_ID": "svc",
			"CLIENT_SECRET": ccSecret, "TOKEN_URL": as.TokenURL()}, agent)
		s.install(t, "acme", "sa", "jwt", map[string]string{"API_URL": up.URL, "JWT_ISSUER": "svc@acme", "PRIVATE_KEY": pemKey,
			"TOKEN_URL": as.TokenURL()}, agent)
		s.install(t, "acme", "central", "oauthCentral", map[string]string{"API_URL": up.URL}, agent)
		token := s.caller(t, "acme", headerPlatform("alice"))
		for _, inst := range []string{"crm", "central"} {
			if st, page := s.connect(t, s.newBrowser(as, "alice", token), "acme", inst); st != 200 {
				t.Fatalf("connect %s = %d %s", inst, st, page)
			}
		}
		for _, inst := range []string{"crm", "cc", "sa", "central"} {
			if r := s.callTool(t, "acme", inst, token, agent, "alice", nil, nil); r.isError {
				t.Fatalf("%s: %+v", inst, r)
			}
		}
		// Refresh, revocation, failures and a test run.
		clk.advance(2 * time.Hour)
		s.callTool(t, "acme", "crm", token, agent, "alice", nil, nil)
		as.RevokeSubject("alice")
		clk.advance(2 * time.Hour)
		for _, inst := range []string{"crm", "cc", "sa", "central"} {
			s.callTool(t, "acme", inst, token, agent, "alice", nil, nil)
		}
		s.install(t, "acme", "cc", "clientCredentials", map[string]string{"CLIENT_SECRET": "wrong-" + ccSecret}, agent)
		clk.advance(2 * time.Hour)
		if r := s.callTool(t, "acme", "cc", token, agent, "", nil, nil); r.code != "token_request_failed" {
			t.Errorf("wrong client secret: %+v", r)
		}
		for _, inst := range []string{"crm", "cc", "sa"} {
			res, _ := s.gw.Test(context.Background(), "acme", inst, "alice")
			b, _ := json.Marshal(res)
			s.bodies.Write(b)
		}
		s.audit.Flush(context.Background())
		ten, _ := s.svc.Tenant(context.Background(), "acme")
		rows, _ := s.astore.List(context.Background(), ten.ID, audit.Query{Limit: 1000})
		ab, _ := json.Marshal(rows)
		if len(rows) < 8 {
			t.Errorf("audit rows = %d", len(rows))
		}

		pemLines := strings.Split(strings.TrimSpace(pemKey), "\n")
		canaries := map[string]string{"oauth client secret": oauthSecret, "cc client secret": ccSecret,
			"central client secret": centralSecret, "private key": pemLines[1]}
		issued := as.Issued()
		if len(issued) < 6 {
			t.Fatalf("the server issued only %d tokens", len(issued))
		}
		for i, tok := range issued {
			canaries[fmt.Sprintf("issued token %d", i)] = tok
		}
		places := map[string]string{"logs": s.logs.String(), "responses": s.bodies.String(), "audit rows": string(ab), "database": dumpDB(t, db)}
		for what, c := range canaries {
			for where, text := range places {
				if strings.Contains(text, c) {
					t.Errorf("%s found in %s", what, where)
				}
			}
		}
	})
}
