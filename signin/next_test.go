package signin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/signin"
)

// SafeNext keeps local paths and refuses anything a browser could follow
// to another origin.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"/", "/signin/session", "/workspaces/acme/webhooks/crm/oauth/link?token=abc%2B%3D", "/a/b?x=1#f",
	} {
		if got := signin.SafeNext(ok); got != ok {
			t.Errorf("SafeNext(%q) = %q, want it kept", ok, got)
		}
	}
	for _, bad := range []string{
		"", "https://evil.example/", "http:/evil.example", "//evil.example", "///evil.example", "/\\evil.example",
		"\\\\evil.example", "/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", "javascript:alert(1)",
		"evil.example", "relative/path", " /leading-space", "mailto:a@b", "/" + strings.Repeat("a", 3000),
		"/%zz", "/\x7f", "/%2F%2Fevil.example",
	} {
		if got := signin.SafeNext(bad); got != "" {
			t.Errorf("SafeNext(%q) = %q, want it refused", bad, got)
		}
	}
}

// The sign-in page remembers a safe ?next= in this browser, and the
// sign-in link opened afterwards returns there; the link's own ?next=
// travels in its form; an unsafe next is ignored (the status page).
func TestSignInLinkReturnsToNext(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := start(t, db)
		next := signin.SessionPath + "?from=link"

		// Remembered by the sign-in page.
		b := e.browser()
		res, err := b.Get(e.srv.URL + signin.Prefix + "?tenant=acme&next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		res, _ = e.openLink(b, e.invite("ann@example.com", "owner"), nil)
		if res.StatusCode != http.StatusOK || res.Request.URL.RequestURI() != next {
			t.Fatalf("after the link: %d at %s, want %s", res.StatusCode, res.Request.URL, next)
		}
		// Spent: the next sign-in in this browser goes to the status page.
		res, _ = e.openLink(b, e.invite("bea@example.com", "member"), nil)
		if res.Request.URL.Path != signin.Prefix {
			t.Fatalf("a second sign-in went to %s, want the status page", res.Request.URL)
		}

		// Carried by the link's own form.
		link := e.invite("cid@example.com", "member")
		res, err = b.Get(link + "&next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		token, _ := url.Parse(link)
		res = e.post(b, signin.LinkPath, url.Values{"token": {token.Query().Get("token")}, "next": {next}}, http.Header{"Origin": {e.srv.URL}})
		if res.StatusCode != http.StatusOK || res.Request.URL.RequestURI() != next {
			t.Fatalf("link with next: %d at %s", res.StatusCode, res.Request.URL)
		}

		// Refused: another origin, remembered or posted, is never followed.
		for i, bad := range []string{"//evil.example/x", "https://evil.example/x", "/\\evil.example", "/\t/evil.example"} {
			nb := e.browser()
			nb.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			res, err := nb.Get(e.srv.URL + signin.Prefix + "?next=" + url.QueryEscape(bad))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if u, _ := url.Parse(e.srv.URL + signin.Prefix); len(nb.Jar.Cookies(u)) != 0 {
				t.Errorf("the sign-in page remembered %q", bad)
			}
			link := e.invite(fmt.Sprintf("refused%d@example.com", i), "member")
			token, _ := url.Parse(link)
			res = e.post(nb, signin.LinkPath, url.Values{"token": {token.Query().Get("token")}, "next": {bad}}, http.Header{"Origin": {e.srv.URL}})
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != signin.Prefix {
				t.Errorf("next %q: %d to %q, want the status page", bad, res.StatusCode, res.Header.Get("Location"))
			}
		}
	})
}

// OpenID Connect sign-in started with ?next= returns there; the sign-in
// page links to it carrying next.
func TestOIDCSignInReturnsToNext(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, _ := oidcEnv(t, db)
		next := signin.SessionPath + "?from=oidc"
		b := e.browser()
		res, err := b.Get(e.srv.URL + signin.Prefix + "?tenant=acme&next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		page := string(body)
		start := signin.OIDCStartPath + "?" + url.Values{"issuer": {"corp"}, "tenant": {"acme"}, "next": {next}}.Encode()
		if !strings.Contains(page, strings.ReplaceAll(start, "&", "&amp;")) {
			t.Fatalf("the sign-in page does not link to %s:\n%s", start, page)
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+start, nil)
		req.Header.Set(authztest.LoginHeader, "ann@example.com")
		res, err = b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Request.URL.RequestURI() != next {
			t.Fatalf("OIDC sign-in with next: %d at %s", res.StatusCode, res.Request.URL)
		}

		// An unsafe next is dropped at the start.
		req, _ = http.NewRequest(http.MethodGet, e.srv.URL+signin.OIDCStartPath+"?tenant=acme&next="+url.QueryEscape("//evil.example/"), nil)
		req.Header.Set(authztest.LoginHeader, "ann@example.com")
		res, err = e.browser().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Request.URL.Host != strings.TrimPrefix(e.srv.URL, "http://") || res.Request.URL.Path != signin.Prefix {
			t.Fatalf("OIDC sign-in with an unsafe next ended at %s", res.Request.URL)
		}
	})
}
