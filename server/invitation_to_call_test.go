package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

const pathOperator = "sba_path_test_operator_token"

// person is someone's browser: it keeps cookies, follows redirects and,
// at the authorization server, is logged in as login.
type person struct {
	t      *testing.T
	base   string
	client *http.Client
}

type loginAs struct{ as, login string }

func (l loginAs) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.String(), l.as) {
		r = r.Clone(r.Context())
		r.Header.Set(authztest.LoginHeader, l.login)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newPerson(t *testing.T, base, as, login string) *person {
	jar, _ := cookiejar.New(nil)
	return &person{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: loginAs{as, login}}}
}

var linkToken = regexp.MustCompile(`name="token" value="([^"]+)"`)

// signIn opens a sign-in link or invitation as a person does: the page,
// then its Sign in button.
func (p *person) signIn(link string) {
	p.t.Helper()
	st, page := p.do(http.MethodGet, link, "", nil)
	m := linkToken.FindStringSubmatch(page)
	if st != http.StatusOK || m == nil {
		p.t.Fatalf("GET %s = %d %s", link, st, page)
	}
	token := strings.NewReplacer("&#43;", "+", "&#61;", "=", "&amp;", "&").Replace(m[1])
	req, _ := http.NewRequest(http.MethodPost, p.base+signin.LinkPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.base)
	res, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != signin.Prefix {
		p.t.Fatalf("sign-in = %d at %s", res.StatusCode, res.Request.URL)
	}
}

// do sends a request with the session cookie and, when signed in, the
// session's CSRF token (from GET /signin/session, as the pages do).
func (p *person) do(method, u, body string, header map[string]string) (int, string) {
	p.t.Helper()
	if !strings.HasPrefix(u, "http") {
		u = p.base + u
	}
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet && header["Authorization"] == "" {
		_, s := p.do(http.MethodGet, signin.SessionPath, "", nil)
		var sess struct {
			CSRF string `json:"csrf_token"`
		}
		json.Unmarshal([]byte(s), &sess)
		req.Header.Set(signin.CSRFHeader, sess.CSRF)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := p.client
	if header["Authorization"] != "" {
		client = http.DefaultClient // an API key alone, no cookie
	}
	res, err := client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// must is do that fails the test unless the status is want, and decodes
// the JSON answer.
func (p *person) must(want int, method, u, body string, header map[string]string) map[string]any {
	p.t.Helper()
	st, out := p.do(method, u, body, header)
	if st != want {
		p.t.Fatalf("%s %s = %d %s, want %d", method, u, st, out, want)
	}
	var m map[string]any
	json.Unmarshal([]byte(out), &m)
	return m
}

// The "Done when" path, with the operator token used once: the
// operator invites an owner; the owner invites an admin and a member;
// the admin installs an oauth instance and creates a caller for an agent
// platform; the member connects their own account through the
// authorization server; an agent calls a tool as the member through the
// official MCP client and the upstream sees the member's token.
func TestFromInvitationToAgentCall(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		as := authztest.New(t, authztest.Options{})
		up := as.NewAPI(t)
		srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(pathOperator),
			ConnectorCatalog: registrytest.Load(t, registrytest.Notes)})
		base := srv.URL
		as.AddClient(authztest.Client{ID: "notes-app", Secret: "notes-app-secret", Scopes: []string{"notes.read"},
			RedirectURIs: []string{base + "/workspaces/acme/webhooks/notes/oauth/callback"}})

		// The operator's only step: the tenant and its owner's invitation.
		operator := map[string]string{"Authorization": "Bearer " + pathOperator}
		anon := newPerson(t, base, as.URL, "nobody")
		anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants", `{"slug": "acme", "name": "Acme"}`, operator)
		inv := anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations", `{"email": "olga@acme.test", "role": "owner"}`, operator)

		owner := newPerson(t, base, as.URL, "olga@acme.test")
		owner.signIn(inv["url"].(string))
		admin := newPerson(t, base, as.URL, "adam@acme.test")
		member := newPerson(t, base, as.URL, "mia@acme.test")
		for p, body := range map[*person]string{admin: `{"email": "adam@acme.test", "role": "admin"}`, member: `{"email": "mia@acme.test", "role": "member"}`} {
			p.signIn(owner.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations", body, nil)["url"].(string))
		}

		// The admin creates an API key, and with it installs the instance
		// and the agent platform's caller.
		key := admin.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/api-keys", `{"name": "setup", "role": "admin"}`, nil)["key"].(string)
		withKey := map[string]string{"Authorization": "Bearer " + key}
		admin.must(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/notes", fmt.Sprintf(
			`{"connector_id": "notes", "auth_mode": "oauth", "agents": ["notes-bot"], "fields": {"API_URL": %q,
			  "CLIENT_ID": "notes-app", "CLIENT_SECRET": "notes-app-secret", "AUTHORIZE_URL": %q, "TOKEN_URL": %q}}`,
			up.URL, as.AuthorizeURL(), as.TokenURL()), withKey)
		platform := admin.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/callers",
			`{"name": "agent-platform", "kind": "agent-platform", "trusted": true, "user_mode": "header"}`, withKey)["token"].(string)
		// A member may not do the admin's part.
		if st, _ := member.do(http.MethodPost, "/v1/tenants/acme/callers", `{"name": "mine", "kind": "agent-platform"}`, nil); st != http.StatusForbidden {
			t.Errorf("a member creates a caller = %d, want 403", st)
		}

		// The member mints their own connect link and connects through the
		// authorization server.
		me := member.must(http.StatusOK, http.MethodGet, signin.SessionPath, "", nil)
		userID := me["user_id"].(string)
		link := member.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/instances/notes/connect-links", `{}`, nil)["url"].(string)
		if st, page := member.do(http.MethodGet, link, "", nil); st != http.StatusOK || !strings.Contains(page, "Connected") {
			t.Fatalf("the member's connect link = %d %s", st, page)
		}

		// The agent calls as the member through the official MCP client.
		cs := agentSession(t, base+"/workspaces/acme/webhooks/notes.mcp",
			headerTransport{"Authorization": "Bearer " + platform, "X-Agent-Id": "notes-bot", "X-User-Id": userID})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "me", Arguments: map[string]any{"action": "get"}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		out, _ := json.Marshal(res)
		if res.IsError || !strings.Contains(string(out), "mia@acme.test") {
			t.Fatalf("tools/call as the member = %s", out)
		}
		if saw := up.Saw(); len(saw) != 1 || saw[0] != "mia@acme.test" {
			t.Fatalf("the upstream saw %q, want the member's token once", saw)
		}

		// The operator's /metrics shows the call, its steps, its token
		// request and its upstream answer, with no tenant, user, agent or
		// caller identifier in any label.
		tenant := anon.must(http.StatusOK, http.MethodGet, "/v1/tenants/acme", "", operator)
		text := scrapeMetrics(t, base, pathOperator)
		for _, want := range []struct {
			name   string
			labels []string
		}{
			{"switchboard_calls_total", []string{"connector=notes", "surface=mcp", "mode=oauth", "code=ok"}},
			{"switchboard_call_step_seconds_count", []string{"step=authenticate"}},
			{"switchboard_call_step_seconds_count", []string{"step=resolve"}},
			{"switchboard_call_step_seconds_count", []string{"step=credentials"}},
			{"switchboard_call_step_seconds_count", []string{"step=upstream"}},
			{"switchboard_call_step_seconds_count", []string{"step=total"}},
			{"switchboard_upstream_responses_total", []string{"class=2xx"}},
			{"switchboard_token_requests_total", []string{"mode=oauth", "kind=code", "outcome=ok"}},
			{"switchboard_cache_lookups_total", []string{"cache=token", "result=hit"}},
			{"switchboard_cache_lookups_total", []string{"cache=caller", "result=miss"}},
			{"switchboard_catalog_connectors", nil},
			{"switchboard_audit_spool_rows", nil},
			{"process_cpu_seconds_total", nil},
		} {
			if !hasSeries(text, want.name, want.labels...) && !(want.name == "switchboard_audit_spool_rows" && strings.Contains(text, want.name+" 0")) {
				t.Errorf("/metrics has no %s%v:\n%s", want.name, want.labels, grepLines(text, "switchboard_"))
			}
		}
		noIdentityLabels(t, text, "acme", tenant["id"].(string), userID, "notes-bot", "mia@acme.test", "agent-platform")
	})
}

// headerTransport adds fixed headers: the agent platform's credential and
// the user it acts for.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
