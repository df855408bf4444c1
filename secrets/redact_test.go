package secrets_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/secrets"
)

func pemKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func jsonString(v string) string {
	b, _ := json.Marshal(map[string]string{"echo": v})
	return string(b)
}

// TestRedactorFindsEchoedForms echoes each secret back in the forms a
// vendor might use and checks that nothing of it survives.
func TestRedactorFindsEchoedForms(t *testing.T) {
	t.Parallel()
	token := "ory_at_Zm9v+bar/baz=&<tok>\"q\"" // characters every encoding changes
	clientID, clientSecret := "svc-client", "cs_8f2e41c9aa/+=x"
	key := pemKey(t)
	keyBody := strings.Join(strings.Split(strings.TrimSpace(key), "\n")[1:len(strings.Split(strings.TrimSpace(key), "\n"))-1], "")
	r := secrets.NewRedactor(token, clientSecret, key)

	type echo struct{ name, text, secret string }
	var echoes []echo
	for name, v := range map[string]string{"token": token, "client secret": clientSecret} {
		echoes = append(echoes,
			echo{name + " raw", "you sent Bearer " + v + " which is wrong", v},
			echo{name + " JSON", jsonString("Bearer " + v), v},
			echo{name + " query", "?access_token=" + url.QueryEscape(v) + "&x=1", v},
			echo{name + " path", "/tokens/" + url.PathEscape(v) + "/info", v},
			echo{name + " base64", base64.StdEncoding.EncodeToString([]byte(v)), v},
			echo{name + " base64url", base64.URLEncoding.EncodeToString([]byte(v)), v},
			echo{name + " raw base64url", base64.RawURLEncoding.EncodeToString([]byte(v)), v},
		)
		// Embedded in a longer base64 text at every offset (mod 3).
		for _, prefix := range []string{"", "a", "ab", clientID + ":", "x" + clientID + ":"} {
			echoes = append(echoes, echo{name + " in base64 after " + prefix,
				"Basic " + base64.StdEncoding.EncodeToString([]byte(prefix+v+":tail")), v})
		}
	}
	lines := strings.Split(strings.TrimSpace(key), "\n")
	echoes = append(echoes,
		echo{"private key PEM", "key: " + key, lines[1]},
		echo{"private key JSON", jsonString(key), lines[1]},
		echo{"private key line", "line " + lines[2] + " of your key", lines[2]},
		echo{"private key body", "body=" + keyBody, keyBody[:40]},
	)
	for _, e := range echoes {
		got := r.String(e.text)
		if !strings.Contains(got, secrets.Redacted) {
			t.Errorf("%s: nothing redacted in %q", e.name, got)
		}
		if strings.Contains(got, e.secret) {
			t.Errorf("%s: the secret survives: %q", e.name, got)
		}
		// Decoding what is left never yields the secret either.
		for _, f := range strings.FieldsFunc(got, func(c rune) bool { return strings.ContainsRune(" \"{}:?&=/", c) }) {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
				if b, err := enc.DecodeString(f); err == nil && strings.Contains(string(b), e.secret) {
					t.Errorf("%s: %q still decodes to the secret", e.name, f)
				}
			}
		}
		if !r.Contains(e.text) {
			t.Errorf("%s: Contains = false", e.name)
		}
	}
}

func TestRedactorEdges(t *testing.T) { // not parallel: AllocsPerRun
	var none *secrets.Redactor
	if none.String("abc secret") != "abc secret" || none.Len() != 0 || none.Contains("x") {
		t.Fatal("a nil redactor changes text")
	}
	// Short values are not redacted; the longest value wins.
	r := secrets.NewRedactor("eu", "", "key-123", "key-123456")
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (short values ignored)", r.Len())
	}
	if got := r.String("region eu, key-123456 and key-123"); got != "region eu, [REDACTED] and [REDACTED]" {
		t.Fatalf("String = %q", got)
	}
	// With adds values; headers and decoded JSON values are redacted.
	r2 := r.WithSecrets(secrets.New("tok-abcdef"))
	h := http.Header{"X-Echo": {"got tok-abcdef"}, "X-Other": {"fine"}}
	r2.Header(h)
	if h.Get("X-Echo") != "got [REDACTED]" || h.Get("X-Other") != "fine" {
		t.Fatalf("Header = %v", h)
	}
	v := r2.Value(map[string]any{"tok-abcdef": []any{"key-123", 5.0, json.Number("1")}})
	if b, _ := json.Marshal(v); strings.Contains(string(b), "tok-abcdef") || strings.Contains(string(b), "key-123") {
		t.Fatalf("Value = %s", b)
	}
	if r.Contains("tok-abcdef") {
		t.Fatal("With changed the original redactor")
	}
	// Text without a secret is returned as is, without allocating.
	body := []byte(`{"id": 1, "name": "hello-world", "full_name": "octocat/hello-world"}`)
	if allocs := testing.AllocsPerRun(100, func() { r2.Bytes(body) }); allocs != 0 {
		t.Errorf("Bytes of clean text allocates %.0f times", allocs)
	}
	if got := r2.Bytes([]byte("x tok-abcdef")); string(got) != "x [REDACTED]" {
		t.Errorf("Bytes = %q", got)
	}
}
