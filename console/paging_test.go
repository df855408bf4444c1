package console_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

// nextLink finds a list's "Next page" link.
var nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">Next page</a>`)

// TestListPagesPage fills console lists beyond one page and follows their
// "Next page" links: each page holds at most the default number of rows,
// the second page holds the rest, with a "First page" link and no "Next
// page", and no row is on both pages. A forged cursor is invalid_cursor.
func TestListPagesPage(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	op := s.operatorSession(t)
	acme, err := s.Tenants().Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	n := switchboard.DefaultPageLimit + 3
	for i := range n {
		if _, err := s.Tenants().CreateTenant(ctx, fmt.Sprintf("t%03d", i), "T"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: fmt.Sprintf("caller-%03d", i), Kind: tenants.KindAgentPlatform}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Members().AddMember(ctx, members.ActorOperator, acme.ID, fmt.Sprintf("m%03d@acme.test", i), members.RoleMember); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path, session string
		row           *regexp.Regexp
		total         int
	}{
		{"/console/operator/tenants", op, regexp.MustCompile(`<td><code>(t\d{3}|acme)</code>`), n + 1},
		{"/console/callers", s.Session, regexp.MustCompile(`caller-\d{3}`), n},
		{"/console/members", s.Session, regexp.MustCompile(`m\d{3}@acme\.test`), n},
	} {
		// The rows of a page, each once (a row may name itself twice,
		// in an aria-label, say).
		rows := func(body string) []string {
			var out []string
			for _, m := range tc.row.FindAllString(body, -1) {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
			return out
		}
		first := s.get(t, tc.path, tc.session)
		m := nextLink.FindStringSubmatch(first.body)
		if first.status != 200 || m == nil {
			t.Fatalf("%s: %d, no Next page link", tc.path, first.status)
		}
		if strings.Contains(first.body, ">First page</a>") {
			t.Errorf("%s: the first page links to the first page", tc.path)
		}
		one := rows(first.body)
		next := html.UnescapeString(m[1])
		u, err := url.Parse(next)
		if err != nil || u.Path != tc.path || u.Query().Get("cursor") == "" {
			t.Fatalf("%s: Next page link %q", tc.path, next)
		}
		second := s.get(t, next, tc.session)
		if second.status != 200 || nextLink.MatchString(second.body) || !strings.Contains(second.body, `<a href="`+tc.path+`">First page</a>`) {
			t.Fatalf("%s second page: %d, want a First page link and no Next page\n%s", tc.path, second.status, second.body)
		}
		two := rows(second.body)
		seen := map[string]bool{}
		for _, r := range append(one, two...) {
			if seen[r] {
				t.Errorf("%s: %s on both pages", tc.path, r)
			}
			seen[r] = true
		}
		if len(one) != switchboard.DefaultPageLimit || len(seen) != tc.total {
			t.Errorf("%s: %d rows on the first page, %d in all; want %d and %d", tc.path, len(one), len(seen), switchboard.DefaultPageLimit, tc.total)
		}
		if bad := s.get(t, tc.path+"?cursor=forged", tc.session); bad.status != 400 || !strings.Contains(bad.body, "invalid_cursor") {
			t.Errorf("%s with a forged cursor: %d", tc.path, bad.status)
		}
	}
}
