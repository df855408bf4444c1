package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// Operator tokens through the admin API: a named token is created and
// shown once, works, is listed without its value and with its last use,
// and once revoked is refused; a bad name or an unknown id are typed
// errors.
func TestOperatorTokensAPI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		e.expect(e.do("POST", "/v1/operator-tokens", `{"name": ""}`), http.StatusBadRequest)
		r := e.expect(e.do("POST", "/v1/operator-tokens", `{"name": "deploy bot"}`), http.StatusCreated)
		var created struct {
			ID, Name, Source, Token string
		}
		if err := json.Unmarshal(r.body, &created); err != nil || created.Token == "" || created.Name != "deploy bot" || created.Source != "created" {
			t.Fatalf("created = %s (%v)", r.body, err)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Fatal("the response carrying a token may be cached")
		}
		e.expect(e.req("GET", "/v1/tenants", created.Token, "", nil), http.StatusOK)

		var list struct {
			OperatorTokens []map[string]any `json:"operator_tokens"`
		}
		r = e.expect(e.do("GET", "/v1/operator-tokens", ""), http.StatusOK)
		if err := json.Unmarshal(r.body, &list); err != nil || len(list.OperatorTokens) != 2 {
			t.Fatalf("list = %s (%v)", r.body, err)
		}
		for _, tok := range list.OperatorTokens {
			if _, leaked := tok["token"]; leaked {
				t.Fatalf("the list shows a token: %s", r.body)
			}
			if tok["id"] == created.ID && tok["last_used_at"] == nil {
				t.Fatalf("the used token has no last use: %s", r.body)
			}
		}
		e.expect(e.do("DELETE", "/v1/operator-tokens/"+created.ID, ""), http.StatusOK)
		if got := e.req("GET", "/v1/tenants", created.Token, "", nil); got.status != http.StatusUnauthorized {
			t.Fatalf("a revoked token answers %d", got.status)
		}
		if code := e.expect(e.do("DELETE", "/v1/operator-tokens/opt_nope", ""), http.StatusNotFound).errCode(t); code != "operator_token_not_found" {
			t.Fatalf("unknown id: code %s", code)
		}
		if strings.Contains(e.logs.String(), created.Token) {
			t.Fatal("a log line holds the operator token")
		}
	})
}
