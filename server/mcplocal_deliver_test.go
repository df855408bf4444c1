package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

// mailbox is an mcp_local connector whose users connect their own OAuth
// accounts; the host delivers each user's access token to their own
// server process in the environment (deliver as env).
func mailbox(t *testing.T) map[string]string {
	js, err := os.ReadFile(filepath.Join("testdata", "mcplocal", "server.js"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"mailbox/connector.json": `{
  "id": "mailbox", "name": "Mailbox", "version": "1.0.0", "type": "mcp_local", "scope": "user", "requires": ["NODE", "OAUTH"],
  "auth": {"type": "oauth2", "modes": ["oauth"], "scopes": ["notes.read"], "provider": "mailbox",
           "deliver": {"as": "env", "format": "access_token", "env": "ACCESS_TOKEN"}},
  "env": [
    {"name": "CLIENT_ID", "label": "Client id", "scope": "global"},
    {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true, "scope": "global"},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL", "scope": "global"},
    {"name": "TOKEN_URL", "label": "Token URL", "scope": "global"}
  ],
  "mcp_config": {"command": ["node", "server.js"]}
}`,
		"mailbox/server.js": string(js),
	}
}

// TestLocalDeliver: a member connects their account at the test
// authorization server (fosite); the agent's call for them launches their
// own server process with their access token in its environment (never in
// its argv, never in a log line); when the token machinery renews the
// token before it expires, the next call runs on a new process holding
// the new token.
func TestLocalDeliver(t *testing.T) {
	t.Parallel()
	npmServer(t, "@modelcontextprotocol/server-everything") // node is needed
	db := dbtest.SQLite(t)
	as := authztest.New(t, authztest.Options{AccessTokenLifespan: time.Hour})
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	logs := &logtest.Buffer{}
	srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(pathOperator), DataDir: t.TempDir(), Now: now,
		Logger:           slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnectorCatalog: registrytest.Load(t, mailbox(t))})
	base := srv.URL
	as.AddClient(authztest.Client{ID: "mail-app", Secret: "mail-app-secret", Scopes: []string{"notes.read"},
		RedirectURIs: []string{base + "/workspaces/acme/webhooks/mailbox/oauth/callback"}})
	operator := map[string]string{"Authorization": "Bearer " + pathOperator}
	anon := newPerson(t, base, as.URL, "nobody")
	anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants", `{"slug": "acme", "name": "Acme"}`, operator)
	inv := anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations", `{"email": "olga@acme.test", "role": "owner"}`, operator)
	owner := newPerson(t, base, as.URL, "olga@acme.test")
	owner.signIn(inv["url"].(string))
	member := newPerson(t, base, as.URL, "mia@acme.test")
	member.signIn(owner.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations", `{"email": "mia@acme.test", "role": "member"}`, nil)["url"].(string))
	owner.must(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/mailbox", fmt.Sprintf(
		`{"connector_id": "mailbox", "auth_mode": "oauth", "agents": ["bot"], "fields": {
		  "CLIENT_ID": "mail-app", "CLIENT_SECRET": "mail-app-secret", "AUTHORIZE_URL": %q, "TOKEN_URL": %q}}`,
		as.AuthorizeURL(), as.TokenURL()), nil)
	platform := owner.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/callers",
		`{"name": "agent-platform", "kind": "agent-platform", "trusted": true, "user_mode": "header"}`, nil)["token"].(string)
	userID := member.must(http.StatusOK, http.MethodGet, signin.SessionPath, "", nil)["user_id"].(string)
	link := member.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/instances/mailbox/connect-links", `{}`, nil)["url"].(string)
	if st, page := member.do(http.MethodGet, link, "", nil); st != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Fatalf("connect = %d %s", st, page)
	}

	cs := agentSession(t, base+"/workspaces/acme/webhooks/mailbox.mcp",
		headerTransport{"Authorization": "Bearer " + platform, "X-Agent-Id": "bot", "X-User-Id": userID})
	whoami := func() (sha string, pid int) {
		t.Helper()
		res, out := call(t, cs, "whoami", nil)
		var who struct {
			Access string `json:"access_sha256"`
			PID    int    `json:"pid"`
		}
		if res.IsError || json.Unmarshal([]byte(resultText(res)), &who) != nil {
			t.Fatalf("whoami = %s", out)
		}
		return who.Access, who.PID
	}
	// tokenOf finds the issued access token with the digest, and checks
	// it is valid and the member's.
	tokenOf := func(sha string) string {
		t.Helper()
		for _, tok := range as.Issued() {
			sum := sha256.Sum256([]byte(tok))
			if hex.EncodeToString(sum[:]) != sha {
				continue
			}
			req, _ := http.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if sub, ok := as.Validate(req); !ok || sub != "mia@acme.test" {
				t.Errorf("the delivered token: valid %v, subject %q", ok, sub)
			}
			return tok
		}
		t.Fatalf("the process holds no token the authorization server issued")
		return ""
	}
	sha1, pid1 := whoami()
	tok1 := tokenOf(sha1)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid1))
	if strings.Contains(string(cmdline), tok1) {
		t.Error("the access token is in the process's argv")
	}
	if sha, pid := whoami(); sha != sha1 || pid != pid1 {
		t.Errorf("a second call: new process %d (was %d) or token", pid, pid1)
	}

	// The token nears its expiry: the machinery renews it, and the call
	// runs on a new process with the new token.
	offset.Store(int64(time.Hour - time.Second))
	sha2, pid2 := whoami()
	if sha2 == sha1 || pid2 == pid1 {
		t.Fatalf("after renewal: token changed %v, process %d (was %d)", sha2 != sha1, pid2, pid1)
	}
	tok2 := tokenOf(sha2)
	t.Logf("processes %d then %d", pid1, pid2)
	waitFor(t, "the old process to stop", func() bool { return !alive(pid1) })
	for _, tok := range []string{tok1, tok2, "mail-app-secret"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("a secret is in the log")
		}
	}
}
