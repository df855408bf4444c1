package gateway

import (
	"encoding/base64"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// tokenApplier puts an access token in the request, as auth's do.
type tokenApplier struct{ tok secrets.Secret }

func (a tokenApplier) Apply(r *http.Request) error {
	r.Header.Set("Authorization", "Bearer "+a.tok.Reveal())
	return nil
}

func (a tokenApplier) Secrets() []secrets.Secret { return []secrets.Secret{a.tok} }

// A vendor that echoes the API key or the access token, in its error
// text, its body or its headers, passes none of them on; non-secret field
// values stay.
func TestRedactRemovesEverySecretOfTheCall(t *testing.T) {
	t.Parallel()
	m := &registry.Manifest{Env: []registry.Field{{Name: "KEY", Secret: true}, {Name: "URL"}}}
	fields := map[string]secrets.Secret{"KEY": secrets.New("canary-k3y-0001"), "URL": secrets.New("https://api.example")}
	c := newCredentials(&registry.Connector{Manifest: *m}, fields)
	tok := "canary-t0ken-ab12cd"
	for i := range 2 { // the second call reuses the redactor of the same token
		red := c.redactor(tokenApplier{secrets.New(tok)})
		resp := &registry.Response{Status: 401,
			Header: http.Header{"X-Echo": {"Bearer " + tok}},
			Body:   []byte(`{"error": "bad key canary-k3y-0001 or token ` + base64.StdEncoding.EncodeToString([]byte(tok)) + ` for https://api.example"}`)}
		ue := &registry.UpstreamError{Code: "upstream_rejected", Message: "you sent Bearer " + tok + " and canary-k3y-0001"}
		redact(red, resp, error(ue))
		got := string(resp.Body) + resp.Header.Get("X-Echo") + ue.Message
		if strings.Contains(got, "canary-") || strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(tok))) {
			t.Fatalf("call %d: a secret survives: %s", i, got)
		}
		if !strings.Contains(got, secrets.Redacted) || !strings.Contains(got, "https://api.example") {
			t.Fatalf("call %d: %q: want the secrets redacted and the non-secret URL kept", i, got)
		}
	}
	if red := c.redactor(tokenApplier{secrets.New("canary-other-token")}); !red.Contains("canary-other-token") || !red.Contains("canary-k3y-0001") {
		t.Fatal("a new token is not redacted")
	}
	redact(c.red, nil, errors.New("x")) // no response, no upstream error: nothing to do
}

// A warm target keeps its field values; the credentials built from them
// (field map, redactor) are the collector's once no call holds them, and
// built again from the values they redact as before.
func TestBuiltCredentialsAreCollected(t *testing.T) {
	m := registry.Manifest{Env: []registry.Field{{Name: "KEY", Secret: true}, {Name: "URL"}}}
	conn := &registry.Connector{Manifest: m}
	h := holdFields(&conn.Manifest, map[string]secrets.Secret{"KEY": secrets.New("canary-k3y-0002"), "URL": secrets.New("https://api.example")})
	c := newCredentials(conn, h.fieldMap())
	h.keep(c)
	if h.built() != c {
		t.Fatal("the credentials just built are not returned")
	}
	runtime.KeepAlive(c)
	c = nil
	runtime.GC()
	if h.built() != nil {
		t.Fatal("credentials no call holds survive a collection")
	}
	again := newCredentials(conn, h.fieldMap())
	if got := again.red.String("key canary-k3y-0002 at https://api.example"); got != "key "+secrets.Redacted+" at https://api.example" {
		t.Fatalf("rebuilt redactor: %q", got)
	}
	if again.fields["KEY"].Reveal() != "canary-k3y-0002" || len(again.fields) != 2 {
		t.Fatal("rebuilt fields differ from the held ones")
	}
}
