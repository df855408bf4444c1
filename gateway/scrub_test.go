package gateway

import (
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// A vendor that echoes the API key in its error text does not pass it on.
func TestScrubRemovesSecretFieldValues(t *testing.T) {
	t.Parallel()
	m := &registry.Manifest{Env: []registry.Field{{Name: "KEY", Secret: true}, {Name: "URL"}}}
	fields := map[string]secrets.Secret{"KEY": secrets.New("canary-k3y-0001"), "URL": secrets.New("https://api.example")}
	got := scrub("bad key canary-k3y-0001 for https://api.example", m, fields)
	if strings.Contains(got, "canary-k3y-0001") {
		t.Fatalf("scrub left the key: %s", got)
	}
	if !strings.Contains(got, secrets.Redacted) || !strings.Contains(got, "https://api.example") {
		t.Fatalf("scrub = %q: want the key redacted and the non-secret URL kept", got)
	}
}
