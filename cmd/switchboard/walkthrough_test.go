package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

const walkthroughOperator = "sba_readme_walkthrough_operator_token"

// readmeWalkthrough returns the sh block of the README's "From invitation
// to an agent call" section, split before its step 5 (the agent's call),
// so that the person's browser consent (a step the README leaves to a
// browser) runs between the two halves.
func readmeWalkthrough(t *testing.T) (before, after string) {
	t.Helper()
	block := readmeShBlock(t, "From invitation to an agent call")
	before, after, ok := strings.Cut(block, "\n# 5. ")
	if !ok {
		t.Fatal("the walkthrough has no step 5")
	}
	return before, "# 5. " + after
}

// readmeShBlock returns the first sh block of the README's section
// "## <section>".
func readmeShBlock(t *testing.T, section string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## "+section+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %s", section)
	}
	block := readme[i:]
	start := strings.Index(block, "```sh\n")
	end := strings.Index(block[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("the README's section %s has no sh block", section)
	}
	return block[start+6 : start+6+end]
}

// TestREADMEInvitationWalkthrough runs the README's walkthrough from an
// invitation to an agent call, command by command as bash runs them,
// against a `switchboard serve` process built from this tree: the
// operator's invitation with `switchboard admin invite`, each person's
// sign-in with curl as their browser, the admin's API key, instance and
// caller, the member's connect link, and the agent's tools/call. The
// vendor is stood in for on loopback: the fosite authorization server
// (https://idp.example.com in the README) and an API that answers whose
// token it got (https://notes.example.com); the member's browser consent,
// which the README leaves to her browser, is a curl that follows the
// connect link with her cookies. The call must come back with the
// member's identity, from the vendor that saw her token once.
func TestREADMEInvitationWalkthrough(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts a server process")
	}
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the README walkthrough needs %s", tool)
			}
			t.Skipf("the README walkthrough needs %s", tool)
		}
	}
	as := authztest.New(t, authztest.Options{})
	vendor := as.NewAPI(t)

	bin := switchboardBinary(t)
	work, data := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "SWITCHBOARD_DATA_DIR="+data, "SWITCHBOARD_ADMIN_TOKEN="+walkthroughOperator,
		"SWITCHBOARD_ALLOW_UPSTREAM_CIDRS=127.0.0.1/32", "SWITCHBOARD_CATALOG="+registrytest.Write(t, registrytest.Notes))
	srv := startReplica(t, bin, env)
	as.AddClient(authztest.Client{ID: "notes-app", Secret: "notes-app-secret", Scopes: []string{"notes.read"},
		RedirectURIs: []string{srv.url + "/workspaces/acme/webhooks/notes/oauth/callback"}})

	before, after := readmeWalkthrough(t)
	vendorURLs := strings.NewReplacer("https://idp.example.com", as.URL, "https://notes.example.com", vendor.URL)
	// What Mia's browser does with the connect link: the authorization
	// server signs in whom the login header names (its stand-in for a
	// login page).
	consent := `CONSENT=$(curl -s -L -b mia.jar -c mia.jar -H 'X-Test-Login: mia@acme.test' "$CONNECT_URL")
case "$CONSENT" in *Connected*) ;; *) echo "the connect link did not connect: $CONSENT" >&2; exit 1 ;; esac
`
	script := "set -euo pipefail\n" + vendorURLs.Replace(before) + consent + after
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	cmd.Env = append(env, "PATH="+strings.TrimSuffix(bin, "/switchboard")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SWITCHBOARD_ADDR="+strings.TrimPrefix(srv.url, "http://"),
		"SB="+srv.url, "AUTH=Authorization: Bearer "+walkthroughOperator)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README walkthrough failed: %v\n%s\nserver:\n%s", err, out, srv.logs.String())
	}
	// The last command's answer: the tool's result, as the member.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"structuredContent":{"user":"mia@acme.test"}`) || strings.Contains(last, `"isError":true`) {
		t.Fatalf("the agent's call did not act as Mia: %s\nwhole output:\n%s", last, out)
	}
	if saw := vendor.Saw(); len(saw) != 1 || saw[0] != "mia@acme.test" {
		t.Fatalf("the vendor saw %q, want Mia's token once", saw)
	}
}
