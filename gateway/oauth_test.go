package gateway_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

const agent = "agent-1"

// oauthSetup is one tenant "acme" with an oauth instance "crm" whose
// users connect at a real authorization server.
type oauthSetup struct {
	as     *authztest.Server
	up     *upstream
	s      *stack
	clk    *clock
	token  string // agent-platform caller
	secret string
}

func setupOAuth(t *testing.T, db *database.DB) *oauthSetup {
	t.Helper()
	as := authztest.New(t, authztest.Options{})
	up := newUpstream(t, as)
	clk := &clock{}
	s := newStack(t, db, loadCRM(t), clk)
	secret := "canary-client-secret-7f3a9c"
	as.AddClient(authztest.Client{ID: "crm-app", Secret: secret, RedirectURIs: []string{redirectFor(s, "acme", "crm")},
		Scopes: []string{"contacts.read"}})
	s.tenant(t, "acme")
	s.install(t, "acme", "crm", "oauth", oauthFields(as, up, "crm-app", secret), agent)
	token := s.caller(t, "acme", headerPlatform("alice", "bob", "carol"))
	return &oauthSetup{as: as, up: up, s: s, clk: clk, token: token, secret: secret}
}

func (o *oauthSetup) connect(t *testing.T, user string) {
	t.Helper()
	b := o.s.newBrowser(o.as, user, o.token)
	status, page := o.s.connect(t, b, "acme", "crm")
	if status != 200 || !strings.Contains(page, "Connected") {
		t.Fatalf("connect %s = %d %s", user, status, page)
	}
	if strings.Contains(page, "<script") {
		t.Errorf("callback page has a script")
	}
}

func TestOAuthConnectAndCall(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		// Before connecting: reconnect_required with a connect link.
		r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
		if r.code != "reconnect_required" || !strings.HasPrefix(r.connectURL, o.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/link?token=") {
			t.Fatalf("before connect: %+v", r)
		}
		o.connect(t, "alice")
		r = o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
		if r.isError || r.user != "alice" {
			t.Fatalf("after connect: %+v", r)
		}
		// Status says connected; disconnect deletes the grant.
		b := o.s.newBrowser(o.as, "alice", o.token)
		if st, body := get(t, b.client, o.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/status"); st != 200 || !strings.Contains(body, `"connected":true`) {
			t.Fatalf("status = %d %s", st, body)
		}
		req, _ := httpNewRequest("POST", o.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/disconnect")
		resp, err := b.client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("disconnect: %v %v", err, resp)
		}
		resp.Body.Close()
		if n := dbtest.Count(t, db, "auth_grants", "user_id = $1", "alice"); n != 0 {
			t.Errorf("%d grants left after disconnect", n)
		}
		if n := dbtest.Count(t, db, "secrets", "owner LIKE 'grant:%'"); n != 0 {
			t.Errorf("%d token rows left after disconnect", n)
		}
		if r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.code != "reconnect_required" {
			t.Errorf("after disconnect: %+v", r)
		}
	})
}

// 50 concurrent tool calls with an expired access token: one refresh.
func TestConcurrentRefreshIsSingleFlight(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		o.connect(t, "alice")
		o.clk.advance(2 * time.Hour)
		before := o.as.TokenRequests("refresh_token")
		var wg sync.WaitGroup
		results := make([]toolResult, 50)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
			}()
		}
		wg.Wait()
		for i, r := range results {
			if r.isError || r.user != "alice" {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		if n := o.as.TokenRequests("refresh_token") - before; n != 1 {
			t.Errorf("refreshes = %d, want 1", n)
		}
	})
}

// Two replicas on one Postgres database, 25 concurrent calls each: one
// refresh in total.
func TestTwoReplicasRefreshOnce(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	dbA, dbB := replicas[0], replicas[1]
	o := setupOAuth(t, dbA)
	o.connect(t, "alice")
	b := newStack(t, dbB, loadCRM(t), o.clk)
	o.clk.advance(2 * time.Hour)
	before := o.as.TokenRequests("refresh_token")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, failures := 0, []string{}
	for _, s := range []*stack{o.s, b} {
		for range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
				mu.Lock()
				defer mu.Unlock()
				if !r.isError && r.user == "alice" {
					ok++
				} else {
					failures = append(failures, r.raw)
				}
			}()
		}
	}
	wg.Wait()
	if ok != 50 {
		t.Errorf("successes = %d, want 50; failures: %v", ok, failures)
	}
	if n := o.as.TokenRequests("refresh_token") - before; n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
	for _, l := range []string{o.s.logs.String(), b.logs.String()} {
		if strings.Contains(l, "invalid_grant") || strings.Contains(l, "reconnect") {
			t.Errorf("a replica saw invalid_grant or reconnect: %s", l)
		}
	}
}

// The rotated refresh token is what a restarted server uses: reusing the
// old one would make the server revoke the family.
func TestRotatedRefreshTokenSurvivesRestart(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		o.connect(t, "alice")
		o.clk.advance(2 * time.Hour)
		if r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.isError {
			t.Fatalf("first refresh: %+v", r)
		}
		// Restart: a new process on the same store.
		restarted := newStack(t, db, loadCRM(t), o.clk)
		o.clk.advance(2 * time.Hour)
		r := restarted.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
		if r.isError || r.user != "alice" {
			t.Fatalf("after restart: %+v", r)
		}
		if n := o.as.TokenRequests("refresh_token"); n != 2 {
			t.Errorf("refreshes = %d, want 2", n)
		}
	})
}

// Revocation at the server: reconnect_required with the connect URL, at
// most two token requests, and no retry loop afterwards.
func TestRevokedGrantNeedsReconnect(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		o.connect(t, "alice")
		if r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.isError {
			t.Fatalf("warm call: %+v", r)
		}
		before := o.as.TokenRequests("")
		o.as.RevokeSubject("alice")
		for i := range 3 {
			r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil)
			if r.code != "reconnect_required" || !strings.HasPrefix(r.connectURL, o.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/link?token=") {
				t.Fatalf("call %d after revocation: %+v", i, r)
			}
		}
		if n := o.as.TokenRequests("") - before; n > 2 || n < 1 {
			t.Errorf("token requests after revocation = %d, want 1 or 2", n)
		}
		if n := dbtest.Count(t, db, "auth_grants", "status = 'reconnect_required'"); n != 1 {
			t.Errorf("grants marked reconnect_required = %d", n)
		}
		// Reconnecting makes it work again.
		o.connect(t, "alice")
		if r := o.s.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.isError {
			t.Errorf("after reconnect: %+v", r)
		}
	})
}

// state replayed, swapped between users, expired or missing is refused
// without a token request.
func TestStateIsSingleUseBoundAndShortLived(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		alice := o.s.newBrowser(o.as, "alice", o.token)
		bob := o.s.newBrowser(o.as, "bob", o.token)

		authURL := o.s.startFlow(t, alice, "acme", "crm")
		u, _ := url.Parse(authURL)
		if q := u.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
			t.Fatalf("authorize URL lacks PKCE S256 or state: %s", authURL)
		}
		if got := u.Query().Get("redirect_uri"); got != redirectFor(o.s, "acme", "crm") {
			t.Errorf("redirect_uri = %q", got)
		}
		codes := func() int { return o.as.TokenRequests("authorization_code") }

		// Swapped: alice's callback in bob's browser.
		cbA := authorizeOnly(t, alice, authURL)
		if st, _ := get(t, bob.client, cbA); st != 400 {
			t.Errorf("swapped state = %d, want 400", st)
		}
		// The swapped state is spent: alice cannot use it either.
		if st, _ := get(t, alice.client, cbA); st != 400 {
			t.Errorf("spent state = %d, want 400", st)
		}
		// Replayed: a completed flow's callback again.
		authURL = o.s.startFlow(t, alice, "acme", "crm")
		cb := authorizeOnly(t, alice, authURL)
		if st, page := get(t, alice.client, cb); st != 200 {
			t.Fatalf("callback = %d %s", st, page)
		}
		n := codes()
		if st, _ := get(t, alice.client, cb); st != 400 {
			t.Errorf("replayed state = %d, want 400", st)
		}
		// Missing and unknown.
		for _, q := range []string{"?code=x", "?code=x&state=nope", ""} {
			if st, _ := get(t, alice.client, redirectFor(o.s, "acme", "crm")+q); st != 400 {
				t.Errorf("callback%s = %d, want 400", q, st)
			}
		}
		// Expired: 11 minutes later.
		authURL = o.s.startFlow(t, bob, "acme", "crm")
		cb = authorizeOnly(t, bob, authURL)
		o.clk.advance(11 * time.Minute)
		if st, _ := get(t, bob.client, cb); st != 400 {
			t.Errorf("expired state = %d, want 400", st)
		}
		if codes() != n {
			t.Errorf("rejected callbacks made %d token requests", codes()-n)
		}
		if n != 1 {
			t.Errorf("authorization_code requests = %d, want 1 (the one good callback)", n)
		}
	})
}

// targetUserId: ignored for an untrusted caller; honoured for a trusted
// cron caller; a user of another tenant is not found; all audited.
func TestTargetUser(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		o.connect(t, "alice")
		o.connect(t, "bob")
		// mallory is connected in another tenant.
		o.s.tenant(t, "other")
		o.as.AddClient(authztest.Client{ID: "crm-app", Secret: o.secret, Scopes: []string{"contacts.read"},
			RedirectURIs: []string{redirectFor(o.s, "acme", "crm"), redirectFor(o.s, "other", "crm")}})
		o.s.install(t, "other", "crm", "oauth", oauthFields(o.as, o.up, "crm-app", o.secret), agent)
		otherToken := o.s.caller(t, "other", headerPlatform("mallory"))
		mb := o.s.newBrowser(o.as, "mallory", otherToken)
		if st, page := o.s.connect(t, mb, "other", "crm"); st != 200 {
			t.Fatalf("mallory connect = %d %s", st, page)
		}
		cron := o.s.caller(t, "acme", tenants.CallerRequest{Name: "cron", Kind: tenants.KindCron, Trusted: true, AgentID: agent, UserID: "cron-svc",
			ExternalSubjects: []string{"alice", "bob"}})
		// alice's own service: an untrusted caller of fixed user alice.
		own := o.s.caller(t, "acme", tenants.CallerRequest{Name: "alice's", Kind: tenants.KindAgentPlatform, UserID: "alice"})

		cases := []struct {
			name, token, user string
			args, meta        map[string]any
			wantUser, code    string
		}{
			{"untrusted argument ignored", own, "", map[string]any{"targetUserId": "bob"}, nil, "alice", ""},
			{"untrusted meta ignored", own, "", nil, map[string]any{"targetUserId": "bob"}, "alice", ""},
			{"untrusted caller asserting a user", own, "bob", nil, nil, "", "user_assertion_refused"},
			{"platform asserting a non-member", o.token, "dave", nil, nil, "", "user_not_found"},
			{"platform's target not a member", o.token, "alice", map[string]any{"targetUserId": "dave"}, nil, "", "user_not_found"},
			{"trusted cron argument", cron, "", map[string]any{"targetUserId": "bob"}, nil, "bob", ""},
			{"trusted cron meta", cron, "", nil, map[string]any{"targetUserId": "alice"}, "alice", ""},
			{"other tenant's user", cron, "", map[string]any{"targetUserId": "mallory"}, nil, "", "user_not_found"},
		}
		for _, c := range cases {
			r := o.s.callTool(t, "acme", "crm", c.token, agent, c.user, c.args, c.meta)
			if r.user != c.wantUser || r.code != c.code {
				t.Errorf("%s: %+v, want user %q code %q", c.name, r, c.wantUser, c.code)
			}
		}
		o.s.audit.Flush(context.Background())
		ten, _ := o.s.svc.Tenant(context.Background(), "acme")
		rows, err := o.s.astore.List(context.Background(), ten.ID, audit.Query{})
		if err != nil {
			t.Fatal(err)
		}
		type as struct{ actor, subject, outcome string }
		seen := map[as]int{}
		for _, e := range rows {
			if e.Action == "refused" {
				// Refused at authentication: the user a caller named.
				seen[as{"refused", "", e.Outcome}]++
				continue
			}
			if e.Tool != "me" || e.Action != "get" || e.Instance != "crm" || e.Agent != agent || e.Caller == "" {
				t.Errorf("audit row %+v", e)
			}
			seen[as{e.Actor, e.Subject, e.Outcome}]++
		}
		for _, w := range []as{{"alice", "alice", "ok"}, {"cron-svc", "bob", "ok"}, {"cron-svc", "alice", "ok"}, {"cron-svc", "mallory", "user_not_found"},
			{"alice", "dave", "user_not_found"}, {"refused", "", "user_not_found"}, {"refused", "", "user_assertion_refused"}} {
			if seen[w] == 0 {
				t.Errorf("no audit row with actor/subject/outcome %v; rows: %v", w, seen)
			}
		}
	})
}

func TestClientChangeInvalidatesCachedTokens(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		as := authztest.New(t, authztest.Options{})
		up := newUpstream(t, as)
		s := newStack(t, db, loadCRM(t), &clock{})
		for _, id := range []string{"svc-a", "svc-b"} {
			as.AddClient(authztest.Client{ID: id, Secret: "s3cret-" + id, Scopes: []string{"contacts.read", "contacts.write"}})
		}
		s.tenant(t, "acme")
		fields := map[string]string{"API_URL": up.URL, "CLIENT_ID": "svc-a", "CLIENT_SECRET": "s3cret-svc-a", "TOKEN_URL": as.TokenURL()}
		s.install(t, "acme", "crm", "clientCredentials", fields, agent)
		token := s.caller(t, "acme", headerPlatform("alice", "bob", "carol"))
		cc := func() int { return as.TokenRequests("client_credentials") }
		call := func(want string) {
			t.Helper()
			if r := s.callTool(t, "acme", "crm", token, agent, "", nil, nil); r.isError || r.user != want {
				t.Fatalf("call: %+v, want user %s", r, want)
			}
		}
		call("svc-a")
		call("svc-a")
		if cc() != 1 {
			t.Fatalf("client_credentials requests = %d, want 1 (cached)", cc())
		}
		fields["SCOPES"] = "contacts.write contacts.read"
		s.install(t, "acme", "crm", "clientCredentials", fields, agent)
		call("svc-a")
		if cc() != 2 {
			t.Errorf("after a scope change: requests = %d, want 2", cc())
		}
		fields["CLIENT_ID"], fields["CLIENT_SECRET"] = "svc-b", "s3cret-svc-b"
		s.install(t, "acme", "crm", "clientCredentials", fields, agent)
		call("svc-b")
		if cc() != 3 {
			t.Errorf("after a client change: requests = %d, want 3", cc())
		}
		// Same normalised scopes in another order and separator: still cached.
		fields["SCOPES"] = "contacts.read,contacts.write"
		s.install(t, "acme", "crm", "clientCredentials", fields, agent)
		call("svc-b")
		if cc() != 3 {
			t.Errorf("reordered scopes: requests = %d, want 3", cc())
		}
	})
}

func TestJWTBearerGrant(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		key, pemKey := ecKey(t)
		as := authztest.New(t, authztest.Options{Issuers: []authztest.Issuer{{Issuer: "svc@acme", Key: &key.PublicKey}}})
		up := newUpstream(t, as)
		s := newStack(t, db, loadCRM(t), &clock{})
		s.tenant(t, "acme")
		s.install(t, "acme", "crm", "jwt", map[string]string{"API_URL": up.URL, "JWT_ISSUER": "svc@acme", "PRIVATE_KEY": pemKey,
			"TOKEN_URL": as.TokenURL()}, agent)
		token := s.caller(t, "acme", headerPlatform("alice", "bob", "carol"))
		for _, user := range []string{"alice", "bob", "alice"} {
			if r := s.callTool(t, "acme", "crm", token, agent, user, nil, nil); r.isError || r.user != user {
				t.Fatalf("jwt call as %s: %+v", user, r)
			}
		}
		if n := as.TokenRequests("urn:ietf:params:oauth:grant-type:jwt-bearer"); n != 2 {
			t.Errorf("jwt-bearer requests = %d, want 2 (one per user, then cached)", n)
		}
	})
}

func TestOAuthCentralProvider(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		as := authztest.New(t, authztest.Options{})
		up := newUpstream(t, as)
		s := newStack(t, db, loadCRM(t), &clock{})
		as.AddClient(authztest.Client{ID: "platform-client", Secret: "central-secret-canary", Scopes: []string{"contacts.read"},
			RedirectURIs: []string{s.srv.URL + "/oauth/callback"}})
		pid, psec := newSecret("platform-client"), newSecret("central-secret-canary")
		if _, _, err := s.prov.Put(context.Background(), "testidp", providerReq(as, pid, psec)); err != nil {
			t.Fatal(err)
		}
		s.tenant(t, "acme")
		s.install(t, "acme", "crm", "oauthCentral", map[string]string{"API_URL": up.URL}, agent)
		token := s.caller(t, "acme", headerPlatform("alice", "bob", "carol"))
		b := s.newBrowser(as, "carol", token)
		if st, page := s.connect(t, b, "acme", "crm"); st != 200 {
			t.Fatalf("central connect = %d %s", st, page)
		}
		if r := s.callTool(t, "acme", "crm", token, agent, "carol", nil, nil); r.isError || r.user != "carol" {
			t.Fatalf("central call: %+v", r)
		}
		res, err := s.gw.Test(context.Background(), "acme", "crm", "carol")
		if err != nil || !res.OK {
			t.Errorf("Test = %+v, %v", res, err)
		}
		res, err = s.gw.Test(context.Background(), "acme", "crm", "nobody")
		if err != nil || res.OK || res.Details["code"] != "reconnect_required" {
			t.Errorf("Test for an unconnected user = %+v, %v", res, err)
		}
	})
}

// A user who disconnects through one replica is disconnected on all: the
// other replica drops its cached access token at once (LISTEN/NOTIFY),
// even where the vendor would still accept the token.
func TestDisconnectReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	dbA, dbB := replicas[0], replicas[1]
	o := setupOAuth(t, dbA)
	o.up.memo = &sync.Map{} // the vendor keeps accepting tokens it has seen
	o.connect(t, "alice")
	b := newStack(t, dbB, loadCRM(t), o.clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.oauth.Listen(ctx, nil)
	// Let B's listener connect (it drops every cached token when it
	// does), so that below only the notification can drop alice's token.
	time.Sleep(500 * time.Millisecond)
	if r := b.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.isError || r.user != "alice" {
		t.Fatalf("replica B before disconnect: %+v", r)
	}
	br := o.s.newBrowser(o.as, "alice", o.token)
	req, _ := httpNewRequest("POST", o.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/disconnect")
	resp, err := br.client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("disconnect: %v %v", err, resp)
	}
	resp.Body.Close()
	var r toolResult
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = b.callTool(t, "acme", "crm", o.token, agent, "alice", nil, nil); r.code == "reconnect_required" {
			return
		}
	}
	t.Fatalf("replica B still acts for a disconnected user: %+v", r)
}
