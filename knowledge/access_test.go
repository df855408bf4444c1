package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// accessAnswer is the knowledge tool's answer to checkAccess: per URI
// results, or the error that refused the whole request.
type accessAnswer struct {
	results map[string]string // uri -> allowed | denied | not_found
	codes   map[string]string // uri -> the code of a denial that is not the upstream's 403
	order   []string
	errCode string
}

// checkAccess calls the knowledge tool's checkAccess action as a sync
// service would, for targetUserId target ("" for none).
func checkAccess(t *testing.T, cs *mcp.ClientSession, target string, uris []string) accessAnswer {
	t.Helper()
	args := map[string]any{"action": "checkAccess", "uris": uris}
	if target != "" {
		args["targetUserId"] = target
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "knowledge", Arguments: args})
	if err != nil {
		t.Fatalf("checkAccess: %v", err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var body struct {
		Results []struct {
			URI, Access, Code string
		} `json:"results"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &body); err != nil {
		t.Fatalf("checkAccess answered %s: %v", text, err)
	}
	a := accessAnswer{results: map[string]string{}, codes: map[string]string{}, errCode: body.Error.Code}
	if res.IsError != (a.errCode != "") || res.IsError && len(body.Results) > 0 {
		t.Fatalf("checkAccess answered isError=%v with %s", res.IsError, text)
	}
	for _, r := range body.Results {
		a.results[r.URI], a.codes[r.URI] = r.Access, r.Code
		a.order = append(a.order, r.URI)
	}
	return a
}

// TestCheckAccess: the knowledge tool's checkAccess, end to end on the
// WebDAV connector against a real WebDAV server, through a trusted
// knowledge-sync caller reading for members with their own credentials.
//
//   - Per reader: ann and bob (refused hr/ by the server) synced the same
//     tree and got different sets; checkAccess, asked about every URI
//     either of them saw, answers allowed exactly for what each read or
//     listed, and denied for the rest.
//   - Per URI: the server's 403 is denied, its 404 not_found, a URI that is
//     not one of the source's (another scheme, an unknown level, the
//     profile, a path escaping the root) not_found without any upstream
//     request, and any other failure (the server's 500) denied with its
//     code: it fails closed, never allowed.
//   - The server's 401 (the member's credential refused) fails the whole
//     request with reconnect_required, even next to URIs that are allowed
//     or denied; a 403 never does.
//   - More URIs than maximum_uris refuse the whole request before any
//     upstream request; exactly the cap is answered.
//   - An agent caller may not check access.
func TestCheckAccess(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		w := startWebDAV(t, db)
		cs := w.session("webdav", headers{"Authorization": "Bearer " + w.syncToken})

		ann := newSyncer(cs, mcp.Meta{"targetUserId": w.ann})
		ann.run(t)
		bob := newSyncer(cs, mcp.Meta{"targetUserId": w.bob})
		bob.run(t)
		folders := []string{"webdav://folder/hr", "webdav://folder/notes", "webdav://folder/notes/2026", "webdav://folder/notes/2026/deep"}
		every := append(keys(ann.docs), folders...)
		for _, u := range keys(bob.docs) {
			if !slices.Contains(every, u) {
				t.Fatalf("bob read %s, which ann did not", u)
			}
		}
		// What each may read, as the sync walk found it.
		mayRead := func(s *syncer, uri string) bool {
			if strings.HasPrefix(uri, "webdav://folder/") {
				return !slices.Contains(s.refused, uri)
			}
			_, ok := s.docs[uri]
			return ok
		}
		allowed := map[string]int{}
		for name, who := range map[string]struct {
			id string
			s  *syncer
		}{"ann": {w.ann, ann}, "bob": {w.bob, bob}} {
			got := checkAccess(t, cs, who.id, every)
			if got.errCode != "" || len(got.results) != len(every) || !slices.Equal(got.order, every) {
				t.Fatalf("%s: checkAccess = %+v, want one answer per URI in order", name, got)
			}
			for _, u := range every {
				want := "denied"
				if mayRead(who.s, u) {
					want = "allowed"
					allowed[name]++
				}
				if got.results[u] != want {
					t.Errorf("%s: %s is %s, but the sync walk says %s", name, u, got.results[u], want)
				}
				if want == "denied" && got.codes[u] != "" {
					t.Errorf("%s: %s denied with code %q, want the upstream's 403 (no code)", name, u, got.codes[u])
				}
			}
		}
		if allowed["ann"] != len(every) || allowed["bob"] != len(every)-2 {
			t.Errorf("allowed: %v of %d; want ann all, bob all but hr and hr/salaries.txt", allowed, len(every))
		}

		// Per URI, in one request: found, 403, 404, and URIs that are
		// not the source's (answered without asking the server).
		before := w.dav.count("PROPFIND") + w.dav.count("GET")
		notOurs := []string{"box://file/1001", "webdav://drive/x", "webdav://profile/knowledge", "webdav://file/../etc/passwd", "not a uri"}
		got := checkAccess(t, cs, w.bob, append([]string{"webdav://file/readme.md", "webdav://file/hr/salaries.txt", "webdav://file/notes/nothing.txt"}, notOurs...))
		want := map[string]string{"webdav://file/readme.md": "allowed", "webdav://file/hr/salaries.txt": "denied", "webdav://file/notes/nothing.txt": "not_found"}
		for _, u := range notOurs {
			want[u] = "not_found"
		}
		if got.errCode != "" || !maps.Equal(got.results, want) {
			t.Errorf("bob's answers = %v, want %v", got.results, want)
		}
		if n := w.dav.count("PROPFIND") + w.dav.count("GET") - before; n != 3 {
			t.Errorf("checkAccess sent %d upstream requests for 3 URIs of the source", n)
		}

		// Fails closed: a server failure is a denial with its code.
		w.dav.mu.Lock()
		w.dav.fail = []string{"notes/plan.txt"}
		w.dav.mu.Unlock()
		got = checkAccess(t, cs, w.ann, []string{"webdav://file/notes/plan.txt", "webdav://file/readme.md"})
		if got.results["webdav://file/notes/plan.txt"] != "denied" || got.codes["webdav://file/notes/plan.txt"] != "upstream_unavailable" ||
			got.results["webdav://file/readme.md"] != "allowed" {
			t.Errorf("a failing document: %+v, want denied (upstream_unavailable), the other allowed", got)
		}

		// 401: the member's credential is refused by the server; the
		// whole request asks to reconnect, whatever the other URIs are.
		carl := w.member("carl@acme.test")
		w.setUserField("webdav", carl, "WEBDAV_AUTHORIZATION", basic("carl", "revoked-pass-0003"))
		got = checkAccess(t, cs, carl, []string{"webdav://file/nothing.txt", "webdav://file/readme.md"})
		if got.errCode != "reconnect_required" {
			t.Errorf("a refused credential: %+v, want the whole request refused with reconnect_required", got)
		}
		// A member whose credential is not set yet: not a denial of
		// the documents either.
		dora := w.member("dora@acme.test")
		got = checkAccess(t, cs, dora, []string{"webdav://file/readme.md"})
		if got.errCode == "" {
			t.Errorf("a member without a credential: %+v, want the whole request refused", got)
		}

		// The cap: maximum_uris (100) is answered, one more refuses it
		// all before any upstream request.
		uris := make([]string, 101)
		for i := range uris {
			uris[i] = fmt.Sprintf("other://file/%d", i)
		}
		before = w.dav.count("PROPFIND") + w.dav.count("GET")
		if got := checkAccess(t, cs, w.ann, uris[:100]); got.errCode != "" || len(got.results) != 100 {
			t.Errorf("100 URIs: %d answers, error %q", len(got.results), got.errCode)
		}
		uris[100] = "webdav://file/readme.md"
		if got := checkAccess(t, cs, w.ann, uris); got.errCode != "invalid_arguments" || len(got.results) != 0 {
			t.Errorf("101 URIs: %+v, want the whole request refused with invalid_arguments", got)
		}
		if n := w.dav.count("PROPFIND") + w.dav.count("GET") - before; n != 0 {
			t.Errorf("the refused request reached the server %d times", n)
		}

		// Not for agents, even on the allowlist.
		agent := w.caller("platform", "agent-platform", true, map[string]any{"user_mode": "header"})
		acs := w.session("webdav", headers{"Authorization": "Bearer " + agent, "X-Agent-Id": "bot", "X-User-Id": w.ann})
		if got := checkAccess(t, acs, w.ann, []string{"webdav://file/readme.md"}); got.errCode != "reader_not_allowed" {
			t.Errorf("an agent caller: %+v, want reader_not_allowed", got)
		}
	})
}

// TestBoxCheckAccess: checkAccess on a REST source (the Box connector
// from the shared box.json, perimeter-only, the instance's token): a file
// and a folder found are allowed, a 403 file denied, an id the upstream
// does not find and a file id asked for as a folder not_found; the
// section's cap (50) holds, and a URI sent 50 times is asked for once;
// when the upstream answers 401 (the token revoked) the whole request asks
// to reconnect instead of denying.
func TestBoxCheckAccess(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	e, box, token := startBoxToken(t, db, false)
	cs := e.session("box", headers{"Authorization": "Bearer " + token})
	want := map[string]string{
		"box://file/1001":   "allowed",
		"box://folder/100":  "allowed",
		"box://file/1003":   "denied",
		"box://file/424242": "not_found",
		"box://folder/1001": "not_found",
	}
	uris := slices.Sorted(maps.Keys(want))
	got := checkAccess(t, cs, "", uris)
	if got.errCode != "" || !maps.Equal(got.results, want) || got.codes["box://file/1003"] != "" {
		t.Errorf("checkAccess = %+v, want %v", got, want)
	}

	over := make([]string, 51)
	for i := range over {
		over[i] = "box://file/1001"
	}
	before := box.count()
	if got := checkAccess(t, cs, "", over[:50]); got.errCode != "" || len(got.order) != 50 || got.results["box://file/1001"] != "allowed" {
		t.Errorf("50 URIs: %+v", got)
	}
	if n := box.count() - before; n != 1 {
		t.Errorf("50 times the same URI asked Box %d times, want once", n)
	}
	before = box.count()
	if got := checkAccess(t, cs, "", over); got.errCode != "invalid_arguments" {
		t.Errorf("51 URIs: %+v, want invalid_arguments", got)
	}
	if n := box.count() - before; n != 0 {
		t.Errorf("the refused request reached Box %d times", n)
	}

	box.mu.Lock()
	box.revoked = true
	box.mu.Unlock()
	if got := checkAccess(t, cs, "", uris); got.errCode != "reconnect_required" || len(got.results) != 0 {
		t.Errorf("the token revoked: %+v, want the whole request refused with reconnect_required", got)
	}
}
