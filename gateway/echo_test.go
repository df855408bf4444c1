package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/tenants"
)

// echoForms are the forms in which the echoing vendor sends a secret back.
func echoForms(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		url.QueryEscape(v), base64.StdEncoding.EncodeToString([]byte("client:" + v))}
}

// TestEchoedSecretsReachNoOne is the acceptance test of the one redactor:
// a loopback vendor echoes every secret it received (the API key, the
// access tokens of client credentials and jwt) and every secret it could
// know (the client secret, the private key) in each form, in a 401 body,
// a 200 body and its headers. No canary reaches what the agent receives
// (MCP results, App mode), the logs or the audit rows.
func TestEchoedSecretsReachNoOne(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		key, pemKey := ecKey(t)
		as := authztest.New(t, authztest.Options{Issuers: []authztest.Issuer{{Issuer: "svc@acme", Key: &key.PublicKey}}})
		apiKey, ccSecret := "canary-echo-apikey-7f3a91", "canary-echo-ccsecret-2b8d44"
		as.AddClient(authztest.Client{ID: "svc", Secret: ccSecret, Scopes: []string{"contacts.read"}})
		pemLines := strings.Split(strings.TrimSpace(pemKey), "\n")
		// What each instance holds besides what it sends: the vendor knows
		// the instance by the first segment of the path.
		known := map[string][]string{"key": {apiKey}, "cc": {ccSecret}, "sa": append([]string{pemKey}, pemLines[1:len(pemLines)-1]...)}
		var fail atomic.Bool
		vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			instance, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
			echoed := append([]string{r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}, known[instance]...)
			var all []string
			for _, v := range echoed {
				if v != "" {
					all = append(all, echoForms(v)...)
				}
			}
			for _, v := range all {
				if !strings.ContainsAny(v, "\r\n") {
					w.Header().Add("X-Echo", v)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			msg := "you sent " + strings.Join(all, " ")
			if fail.Load() {
				w.WriteHeader(http.StatusUnauthorized)
				json.NewEncoder(w).Encode(map[string]any{"message": msg, "error": map[string]any{"message": msg}})
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"user": "someone", "echo": all, "message": msg})
		}))
		defer vendor.Close()

		s := newStack(t, db, loadCRM(t), &clock{})
		s.tenant(t, "acme")
		s.svc.SetVerifier(nil) // the vendor echoes, it does not verify
		s.install(t, "acme", "key", "apiKey", map[string]string{"API_URL": vendor.URL + "/key", "API_KEY": apiKey}, agent)
		s.install(t, "acme", "cc", "clientCredentials", map[string]string{"API_URL": vendor.URL + "/cc", "CLIENT_ID": "svc",
			"CLIENT_SECRET": ccSecret, "TOKEN_URL": as.TokenURL()}, agent)
		s.install(t, "acme", "sa", "jwt", map[string]string{"API_URL": vendor.URL + "/sa", "JWT_ISSUER": "svc@acme", "PRIVATE_KEY": pemKey,
			"TOKEN_URL": as.TokenURL()}, agent)
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindAgentPlatform})

		appCall := func(instance string) {
			req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/workspaces/acme/apps/"+instance+"/ops/getMe", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Agent-Id", agent)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			s.bodies.Write(b)
			for k, vs := range resp.Header {
				s.bodies.Write([]byte(k + ": " + strings.Join(vs, ", ") + "\n"))
			}
		}
		for _, failing := range []bool{false, true} {
			fail.Store(failing)
			// The credentials built from an instance's fields (its
			// redactor among them) are held weakly: collected, the next
			// call builds them again, and they must redact as the first.
			runtime.GC()
			for _, inst := range []string{"key", "cc", "sa"} {
				r := s.callTool(t, "acme", inst, token, agent, "", nil, nil)
				if r.isError != failing {
					t.Errorf("%s (vendor failing %v): %+v", inst, failing, r)
				}
				if !failing && !strings.Contains(r.raw, "[REDACTED]") {
					t.Errorf("%s: the echo was not redacted, or not passed on: %s", inst, r.raw)
				}
				appCall(inst)
			}
		}
		s.audit.Flush(ctx)
		ten, _ := s.svc.Tenant(ctx, "acme")
		rows, _ := s.astore.List(ctx, ten.ID, audit.Query{Limit: 1000})
		ab, _ := json.Marshal(rows)
		if len(rows) < 12 {
			t.Errorf("audit rows = %d, want one per call", len(rows))
		}
		canaries := map[string]string{"api key": apiKey, "client secret": ccSecret, "private key": pemLines[1]}
		issued := as.Issued()
		if len(issued) < 2 {
			t.Fatalf("the server issued %d tokens", len(issued))
		}
		for i, tok := range issued {
			canaries["access token "+string(rune('0'+i))] = tok
		}
		places := map[string]string{"logs": s.logs.String(), "agent responses": s.bodies.String(), "audit rows": string(ab)}
		for what, c := range canaries {
			for _, form := range echoForms(c) {
				for where, text := range places {
					if strings.Contains(text, form) {
						t.Errorf("%s (as %.12s…) found in %s", what, form, where)
					}
				}
			}
		}
	})
}
