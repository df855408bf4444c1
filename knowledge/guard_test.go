package knowledge_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/server"
)

// issuer is an OAuth authorization server's signing side on loopback: a
// JWKS document and access tokens signed with its key.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// token is an access token of sub for the MCP endpoint aud.
func (is *issuer) token(t *testing.T, sub, aud string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": is.srv.URL, "sub": sub, "aud": aud,
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "client_id": "kb-desktop", "scope": "mcp"})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// auditCount waits (bounded) until the audit log holds a row with the
// outcome, and returns how many it holds.
func auditCount(t *testing.T, db *database.DB, outcome string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := dbtest.Count(t, db, "audit_log", "outcome = $1", outcome)
		if n > 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestResourceGuards: who may read. Without a credential, only the
// profile and the templates; an agent caller (even one on the allowlist)
// is refused, as is an untrusted knowledge-sync caller, whose targetUserId
// is ignored and audited; a trusted knowledge-sync caller must name a
// member on a per-reader source; a signed-in person (an MCP access token)
// reads with their own grant once found a member, and two members with
// different upstream permissions get different trees.
func TestResourceGuards(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		is := newIssuer(t)
		w := startWebDAVWith(t, db, func(c *server.Config) {
			c.MCPAuthServers, c.MCPJWKSURL, c.MCPScopes = []string{is.srv.URL}, is.srv.URL+"/jwks", []string{"mcp"}
		})
		ctx := context.Background()
		readmeURI := "webdav://file/readme.md"
		refused := func(cs *mcp.ClientSession, meta mcp.Meta, code string) {
			t.Helper()
			_, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Meta: meta})
			if err == nil || !strings.Contains(err.Error(), code) {
				t.Errorf("resources/list = %v, want %s", err, code)
			}
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: readmeURI, Meta: meta})
			if err == nil || !strings.Contains(err.Error(), code) {
				t.Errorf("resources/read = %v, want %s", err, code)
			}
		}
		before := w.dav.count("PROPFIND") + w.dav.count("GET")

		// No credential: beyond the profile and templates, nothing.
		anon := w.session("webdav", nil)
		refused(anon, mcp.Meta{"targetUserId": w.ann}, "unauthorized")

		// An agent platform's caller, its agent on the allowlist.
		agent := w.caller("platform", "agent-platform", true, map[string]any{"user_mode": "header"})
		refused(w.session("webdav", headers{"Authorization": "Bearer " + agent, "X-Agent-Id": "bot", "X-User-Id": w.ann}),
			mcp.Meta{"targetUserId": w.ann}, "reader_not_allowed")

		// An untrusted knowledge-sync caller naming a member.
		untrusted := w.caller("kb-untrusted", "knowledge-sync", false, nil)
		refused(w.session("webdav", headers{"Authorization": "Bearer " + untrusted}), mcp.Meta{"targetUserId": w.ann}, "reader_not_allowed")

		// A trusted one: a per-reader source needs a member named.
		trusted := w.session("webdav", headers{"Authorization": "Bearer " + w.syncToken})
		refused(trusted, nil, "user_required")
		refused(trusted, mcp.Meta{"targetUserId": "stranger"}, "user_not_found")

		if n := w.dav.count("PROPFIND") + w.dav.count("GET"); n != before {
			t.Fatalf("refused requests reached the upstream %d times", n-before)
		}
		if n := auditCount(t, db, "reader_not_allowed"); n == 0 {
			t.Error("the refused readers are not audited")
		}
		if n := auditCount(t, db, "target_user_ignored"); n == 0 {
			t.Error("the ignored targetUserId is not audited")
		}

		// The same tree for two members, by the trusted caller: bob is
		// refused hr/ upstream, so his set lacks it.
		annSync := newSyncer(trusted, mcp.Meta{"targetUserId": w.ann})
		annSync.run(t)
		bobSync := newSyncer(trusted, mcp.Meta{"targetUserId": w.bob})
		bobSync.run(t)
		if _, ok := annSync.docs["webdav://file/hr/salaries.txt"]; !ok || len(annSync.docs) != len(davTree) {
			t.Errorf("ann's set = %v", keys(annSync.docs))
		}
		if _, ok := bobSync.docs["webdav://file/hr/salaries.txt"]; ok || len(bobSync.docs) != len(davTree)-1 ||
			!slices.Equal(bobSync.refused, []string{"webdav://folder/hr"}) {
			t.Errorf("bob's set = %v, refused %v", keys(bobSync.docs), bobSync.refused)
		}

		// Signed-in people, with their own access tokens: their own
		// grant, whatever targetUserId they send.
		endpoint := w.srv.URL + "/workspaces/acme/webhooks/webdav.mcp"
		bobPerson := newSyncer(w.session("webdav", headers{"Authorization": "Bearer " + is.token(t, w.bob, endpoint)}),
			mcp.Meta{"targetUserId": w.ann})
		bobPerson.run(t)
		if _, ok := bobPerson.docs["webdav://file/hr/salaries.txt"]; ok || len(bobPerson.docs) != len(davTree)-1 {
			t.Errorf("bob signed in reads %v", keys(bobPerson.docs))
		}
		annPerson := w.session("webdav", headers{"Authorization": "Bearer " + is.token(t, w.ann, endpoint)})
		if doc, err := annPerson.ReadResource(ctx, &mcp.ReadResourceParams{URI: "webdav://file/hr/salaries.txt"}); err != nil ||
			doc.Contents[0].Text != "secret numbers" {
			t.Errorf("ann signed in reads hr: %v %v", doc, err)
		}
		stranger := w.session("webdav", headers{"Authorization": "Bearer " + is.token(t, "not-a-member", endpoint)})
		refused(stranger, nil, "user_not_found")
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
