package main

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

var callerTokenField = regexp.MustCompile(`id="caller-token" value="([^"]+)"`)

// readmeQuickstartCall returns the README quickstart's step 6, the
// agent's call: the indented sh block after "6. **Call the endpoint**".
func readmeQuickstartCall(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, step, ok := strings.Cut(string(b), "\n6. **Call the endpoint**")
	if !ok {
		t.Fatal("the README's quickstart has no step 6")
	}
	_, block, ok := strings.Cut(step, "   ```sh\n")
	block, _, ok2 := strings.Cut(block, "   ```\n")
	if !ok || !ok2 {
		t.Fatal("the README quickstart's step 6 has no sh block")
	}
	return regexp.MustCompile(`(?m)^   `).ReplaceAllString(block, "")
}

// TestREADMEQuickstart walks the README's five-minute quickstart against
// the built binary's `switchboard serve` on an empty data directory,
// with an HTTP client as the person's browser (TestBrowserJourney does it
// in Chromium): the printed link, a tenant and its owner in the same
// browser, github installed through the form against a loopback
// stand-in of the GitHub API, triage-bot allowed, a caller whose token
// the page shows; then step 6's curl block, as printed in the README,
// lists the tools and gets the repository; and the call is on the audit
// page.
func TestREADMEQuickstart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts a server process")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the README quickstart needs %s", tool)
			}
			t.Skipf("the README quickstart needs %s", tool)
		}
	}
	github := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/repos/octocat/hello-world" || r.Header.Get("Authorization") != "Bearer ghp_example" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": 1, "name": "hello-world", "full_name": "octocat/hello-world", "private": false}`)
	}))
	defer github.Close()
	srv := startServe(t, switchboardBinary(t), t.TempDir(), "SWITCHBOARD_ALLOW_UPSTREAM_CIDRS=127.0.0.1/32")
	link := srv.printedLink()
	if link == "" {
		t.Fatalf("no sign-in link printed:\n%s", srv.terminal.String())
	}

	// Steps 1 and 2.
	b := newBrowserSession(t, srv.url)
	b.becomeOwner(link, "acme", "you@acme.test")

	// 3. Catalog › GitHub › Install GitHub, Verify and save.
	status, page := b.do(http.MethodGet, "/console/catalog/github", nil)
	if status != http.StatusOK || !strings.Contains(page, `href="/console/catalog/github/install">Install GitHub</a>`) {
		t.Fatalf("the github page: %d\n%s", status, page)
	}
	_, page = b.do(http.MethodGet, "/console/catalog/github/install", nil)
	for _, label := range []string{`">GitHub token <span`, `">API base URL</label>`, ">Verify and save<"} {
		if !strings.Contains(page, label) {
			t.Errorf("the install form has no %s the README names", label)
		}
	}
	status, page = b.submit(page, "/console/catalog/github/install", "slug", "github", "auth_mode", "apiKey",
		"field_GITHUB_TOKEN", "ghp_example", "field_GITHUB_API_URL", github.URL, "agents", "")
	endpoint := srv.url + "/workspaces/acme/webhooks/github.mcp"
	if status != http.StatusOK || !strings.Contains(page, endpoint) {
		t.Fatalf("installing github: %d, the instance page does not show %s\n%s", status, endpoint, page)
	}

	// 4. Agents allowed: Add agent.
	if !strings.Contains(page, ">Agent id to allow<") || !strings.Contains(page, ">Add agent<") {
		t.Error("the instance page has no allowlist form as the README names it")
	}
	status, page = b.submit(page, "/console/instances/github/agents", "add", "triage-bot")
	if status != http.StatusOK || !strings.Contains(page, "<code>triage-bot</code>") {
		t.Fatalf("allowing triage-bot: %d\n%s", status, page)
	}

	// 5. Callers › Create a caller (Agent platform is the default kind).
	_, page = b.do(http.MethodGet, "/console/callers", nil)
	if !strings.Contains(page, `value="agent-platform" aria-describedby="kind-agent-platform-help" checked`) {
		t.Error("the caller form's default kind is not Agent platform")
	}
	status, page = b.submit(page, "/console/callers", "name", "agent-factory", "kind", "agent-platform", "user_mode", "fixed")
	m := callerTokenField.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("creating a caller: %d, no token shown\n%s", status, page)
	}
	caller := html.UnescapeString(m[1])

	// 6. The README's curl block, with the token from step 5 and this
	// server's address.
	script := readmeQuickstartCall(t)
	if !strings.Contains(script, "CALLER=sbc_...") || !strings.Contains(script, "http://127.0.0.1:8080/") {
		t.Fatalf("step 6 no longer sets CALLER=sbc_... and the default address:\n%s", script)
	}
	script = strings.NewReplacer("CALLER=sbc_...", "CALLER="+caller, "http://127.0.0.1:8080/", srv.url+"/").Replace(script)
	out, err := exec.Command("bash", "-c", "set -euo pipefail\n"+script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"name":"repositories"`) || !strings.Contains(string(out), `octocat/hello-world`) ||
		strings.Contains(string(out), `"isError":true`) {
		t.Fatalf("step 6: %v\n%s\nserver:\n%s", err, out, srv.log.String())
	}

	// 7. The call on the audit page (written in the background).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, page = b.do(http.MethodGet, "/console/audit", nil)
		if strings.Contains(page, "triage-bot") && strings.Contains(page, "repositories") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call is not on the audit page:\n%s", page)
		}
	}
	for _, secret := range []string{"ghp_example", caller} {
		if strings.Contains(page, secret) {
			t.Error("the audit page shows a secret")
		}
	}
}
