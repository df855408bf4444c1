package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

// acme returns the test's tenant.
func (s *consoleServer) acme(t testing.TB) *tenants.Tenant {
	t.Helper()
	tenant, err := s.Tenants().Tenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

// sessionAs adds a person of acme with role and signs them in; it
// returns their user id and session token.
func (s *consoleServer) sessionAs(t testing.TB, email string, role members.Role) (string, string) {
	t.Helper()
	ctx := context.Background()
	tenant := s.acme(t)
	m, err := s.Members().AddMember(ctx, members.ActorOperator, tenant.ID, email, role)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := s.Members().CreateSession(ctx, tenant.ID, m.UserID)
	if err != nil {
		t.Fatal(err)
	}
	return m.UserID, token.Reveal()
}

// form returns values with the CSRF token of session.
func form(session string, kv ...string) url.Values {
	v := url.Values{"csrf_token": {members.CSRFToken(session)}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// shownOnce finds the value of the read-only input id in a creation page.
func shownOnce(t testing.TB, p page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<input id="` + id + `" value="([^"]+)" readonly`).FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("creation page: status %d, no %s input\n%s", p.status, id, p.body)
	}
	for _, w := range []string{"will not be shown again", `<button type="button" class="copy" data-copy="` + id + `" hidden>Copy</button><span class="copy-status" role="status"></span>`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("creation page lacks %q", w)
		}
	}
	if p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("creation page: Cache-Control %q", p.header.Get("Cache-Control"))
	}
	if m := inlineCode.FindString(p.body); m != "" {
		t.Errorf("creation page: inline code %q", m)
	}
	return m[1]
}

// v1 calls the admin API with a bearer key and returns the status.
func (s *consoleServer) v1(t testing.TB, path, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCallersPage creates, lists and revokes a caller through the
// console: the form offers the API's choices, a refused form is shown
// again with its typed error and creates nothing, the token is shown in
// the creation response only and works, and revoking it is final.
func TestCallersPage(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()

	empty := s.get(t, "/console/callers", s.Session)
	for _, w := range []string{"No caller yet", `name="csrf_token" value="` + members.CSRFToken(s.Session) + `"`,
		`id="kind-agent-platform" name="kind" value="agent-platform"`, `id="mode-jwt" name="user_mode" value="jwt"`,
		`<label for="caller-name">`, `<label for="external-subjects">`, `href="/console/callers" aria-current="page"`} {
		if empty.status != 200 || !strings.Contains(empty.body, w) {
			t.Errorf("empty callers page (status %d) lacks %q", empty.status, w)
		}
	}

	bad := s.post(t, "/console/callers", s.Session, form(s.Session, "name", "platform", "kind", "agent-platform", "user_mode", "header"))
	if bad.status != 400 || !strings.Contains(bad.body, "invalid_user_mode") || !strings.Contains(bad.body, `value="platform"`) ||
		!strings.Contains(bad.body, "Correct the value named above") {
		t.Errorf("untrusted header caller: status %d, want 400 with the typed error and the form kept\n%s", bad.status, bad.body)
	}
	if list, _ := s.Tenants().ListCallers(ctx, "acme"); len(list) != 0 {
		t.Fatalf("a refused form created %d callers", len(list))
	}

	created := s.post(t, "/console/callers", s.Session, form(s.Session, "name", "agent-factory", "kind", "agent-platform",
		"trusted", "on", "user_mode", "header", "external_subjects", "ext-1\next-*"))
	token := shownOnce(t, created, "caller-token")
	if !strings.HasPrefix(token, tenants.TokenPrefix) {
		t.Fatalf("caller token %q", token)
	}
	caller, err := s.Tenants().Store().CallerByToken(ctx, token)
	if err != nil || caller.Name != "agent-factory" || !caller.Trusted || caller.UserMode != tenants.UserHeader ||
		strings.Join(caller.ExternalSubjects, ",") != "ext-1,ext-*" {
		t.Fatalf("the created caller: %+v, %v", caller, err)
	}

	list := s.get(t, "/console/callers", s.Session)
	if !strings.Contains(list.body, "agent-factory") || strings.Contains(list.body, token) || strings.Contains(list.body, "No caller yet") ||
		!strings.Contains(list.body, `<td data-label="Last used">never</td>`) {
		t.Errorf("callers list: lacks the caller or its 'never used', or shows its token")
	}
	// A call with the token (to an instance that does not exist: the
	// caller is authenticated first) shows as its last use, written off
	// the call's path.
	mcp, err := http.NewRequest(http.MethodPost, s.URL+"/workspaces/acme/webhooks/nothing.mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	mcp.Header.Set("Authorization", "Bearer "+token)
	mcp.Header.Set("Content-Type", "application/json")
	mcp.Header.Set("Accept", "application/json, text/event-stream")
	s.do(t, mcp, "")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p := s.get(t, "/console/callers", s.Session); regexp.MustCompile(`<td data-label="Last used">20\d\d-\d\d-\d\d \d\d:\d\d UTC</td>`).MatchString(p.body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the caller's call never shows as its last use")
		}
	}
	if p := s.post(t, "/console/callers/"+string(caller.ID)+"/revoke", s.Session, form(s.Session)); p.status != http.StatusSeeOther ||
		p.header.Get("Location") != "/console/callers" {
		t.Fatalf("revoke: status %d\n%s", p.status, p.body)
	}
	if got, err := s.Tenants().Store().CallerByToken(ctx, token); err == nil && got.RevokedAt == nil {
		t.Fatalf("the revoked caller's token still resolves to a live caller")
	}
	if p := s.get(t, "/console/callers", s.Session); !strings.Contains(p.body, `<span class="state revoked">revoked</span>`) || strings.Contains(p.body, token) {
		t.Errorf("callers list after revoking: not shown as revoked, or shows the token")
	}
	if p := s.post(t, "/console/callers/cal_nothing/revoke", s.Session, form(s.Session)); p.status != 404 || !strings.Contains(p.body, "Check the address") {
		t.Errorf("revoking an unknown caller: status %d", p.status)
	}
}

// TestAPIKeysPage creates, lists and revokes a tenant API key through the
// console: the key is shown once, works against /v1 with its role, its
// use shows as last used, and once revoked it is refused.
func TestAPIKeysPage(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	tenant := s.acme(t)
	keys := tenants.NewAPIKeys(s.DB())

	if p := s.get(t, "/console/api-keys", s.Session); p.status != 200 || !strings.Contains(p.body, "No API key yet") ||
		!strings.Contains(p.body, `<option value="">No one (automation)</option>`) || !strings.Contains(p.body, `<label for="key-expiry">`) {
		t.Fatalf("empty API keys page: status %d\n%s", p.status, p.body)
	}
	for _, tc := range []struct {
		name string
		f    url.Values
		code string
	}{
		{"owner role", form(s.Session, "name", "ci", "role", "owner", "expiry", "90"), "invalid_role"},
		{"no name", form(s.Session, "name", " ", "role", "member", "expiry", "90"), "invalid_name"},
		{"odd expiry", form(s.Session, "name", "ci", "role", "member", "expiry", "soon"), "invalid_expiry"},
	} {
		p := s.post(t, "/console/api-keys", s.Session, tc.f)
		if p.status != 400 || !strings.Contains(p.body, tc.code) || !strings.Contains(p.body, "Nothing was changed") {
			t.Errorf("%s: status %d, want 400 %s", tc.name, p.status, tc.code)
		}
	}
	if list, _ := keys.List(ctx, tenant.ID); len(list) != 0 {
		t.Fatalf("refused forms created %d keys", len(list))
	}

	key := shownOnce(t, s.post(t, "/console/api-keys", s.Session, form(s.Session, "name", "CI deploy", "role", "member", "expiry", "30")), "api-key")
	if !strings.HasPrefix(key, tenants.APIKeyPrefix) {
		t.Fatalf("API key %q", key)
	}
	list := s.get(t, "/console/api-keys", s.Session)
	if !strings.Contains(list.body, "CI deploy") || !strings.Contains(list.body, "owner@acme.test") || !strings.Contains(list.body, "<td data-label=\"Last used\">never</td>") || strings.Contains(list.body, key) {
		t.Errorf("API keys list: lacks the key, its creator or 'never used', or shows the key")
	}
	if st := s.v1(t, "/v1/tenants/acme/instances", key); st != 200 {
		t.Fatalf("the created key against /v1: status %d", st)
	}
	if st := s.v1(t, "/v1/tenants/acme/callers", key); st != 403 {
		t.Errorf("the member key on an admin route: status %d, want 403", st)
	}
	if p := s.get(t, "/console/api-keys", s.Session); strings.Contains(p.body, "<td data-label=\"Last used\">never</td>") {
		t.Errorf("the key's use is not shown as its last use")
	}
	created, _ := keys.List(ctx, tenant.ID)
	if len(created) != 1 || created[0].ExpiresAt == nil || created[0].CreatedBy == "" {
		t.Fatalf("stored keys: %+v", created)
	}
	if p := s.post(t, "/console/api-keys/"+created[0].ID+"/revoke", s.Session, form(s.Session)); p.status != http.StatusSeeOther {
		t.Fatalf("revoke: status %d\n%s", p.status, p.body)
	}
	if st := s.v1(t, "/v1/tenants/acme/instances", key); st != 401 {
		t.Errorf("the revoked key against /v1: status %d, want 401", st)
	}
	if p := s.get(t, "/console/api-keys", s.Session); !strings.Contains(p.body, `<span class="state revoked">revoked</span>`) || strings.Contains(p.body, key) {
		t.Errorf("API keys list after revoking: not shown as revoked, or shows the key")
	}
}

// TestMembersPage invites, changes a role and removes a member through
// the console, as an owner: the invitation's link is shown once and
// works, a pending invitation can be revoked, the confirmation names what
// removal revokes and the removal revokes exactly that.
func TestMembersPage(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	tenant := s.acme(t)

	p := s.get(t, "/console/members", s.Session)
	for _, w := range []string{"owner@acme.test", "No pending invitation", `<label for="invite-email">`, `id="invite-role-owner"`,
		`<label class="visually-hidden" for="role-`} {
		if p.status != 200 || !strings.Contains(p.body, w) {
			t.Errorf("members page (status %d) lacks %q", p.status, w)
		}
	}

	link := shownOnce(t, s.post(t, "/console/members/invitations", s.Session,
		form(s.Session, "email", "New@Acme.test", "role", "admin", "lifetime", "168")), "invitation-link")
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(link, s.URL+"/signin/") || !strings.HasPrefix(u.Query().Get("token"), members.InvitationTokenPrefix) {
		t.Fatalf("invitation link %q (%v)", link, err)
	}
	after := s.get(t, "/console/members", s.Session)
	if !strings.Contains(after.body, "new@acme.test") || strings.Contains(after.body, link) || strings.Contains(after.body, u.Query().Get("token")) {
		t.Errorf("members page after inviting: no pending invitation, or the link is shown again")
	}
	if p := s.post(t, "/console/members/invitations", s.Session, form(s.Session, "email", "owner@acme.test", "role", "member", "lifetime", "24")); p.status != 409 ||
		!strings.Contains(p.body, "member_exists") || !strings.Contains(p.body, "Nothing was changed") {
		t.Errorf("inviting a member: status %d, want 409 member_exists on the page", p.status)
	}
	newcomer, err := s.Members().Redeem(ctx, u.Query().Get("token"))
	if err != nil || newcomer.Role != members.RoleAdmin {
		t.Fatalf("redeeming the invitation: %+v, %v", newcomer, err)
	}

	// A second invitation, revoked: its link no longer works.
	other := shownOnce(t, s.post(t, "/console/members/invitations", s.Session, form(s.Session, "email", "later@acme.test", "role", "member", "lifetime", "24")), "invitation-link")
	invs, err := s.Members().Invitations(ctx, tenant.ID)
	if err != nil || len(invs) != 1 {
		t.Fatalf("pending invitations: %d (%v)", len(invs), err)
	}
	if p := s.post(t, "/console/members/invitations/"+invs[0].ID+"/revoke", s.Session, form(s.Session)); p.status != http.StatusSeeOther {
		t.Fatalf("revoking the invitation: status %d\n%s", p.status, p.body)
	}
	ou, _ := url.Parse(other)
	if _, err := s.Members().Redeem(ctx, ou.Query().Get("token")); err == nil {
		t.Fatal("a revoked invitation's link still works")
	}

	// Role changes: the newcomer becomes a member; the last owner cannot
	// be demoted.
	if p := s.post(t, "/console/members/"+newcomer.UserID+"/role", s.Session, form(s.Session, "role", "member")); p.status != http.StatusSeeOther {
		t.Fatalf("changing the role: status %d\n%s", p.status, p.body)
	}
	if m, _ := s.Members().Member(ctx, tenant.ID, newcomer.UserID); m.Role != members.RoleMember {
		t.Fatalf("role after the change: %s", m.Role)
	}
	owner, _ := s.Members().MemberByEmail(ctx, tenant.ID, "owner@acme.test")
	if p := s.post(t, "/console/members/"+owner.UserID+"/role", s.Session, form(s.Session, "role", "admin")); p.status != 409 || !strings.Contains(p.body, "last_owner") {
		t.Errorf("demoting the last owner: status %d, want 409 last_owner", p.status)
	}

	// Removal: the member has a session and an API key that acts as them
	// (created by the owner on the API keys page).
	_, token, err := s.Members().CreateSession(ctx, tenant.ID, newcomer.UserID)
	if err != nil {
		t.Fatal(err)
	}
	key := shownOnce(t, s.post(t, "/console/api-keys", s.Session, form(s.Session, "name", "newcomer's bot", "role", "member", "user_id", newcomer.UserID, "expiry", "0")), "api-key")
	confirm := s.get(t, "/console/members/"+newcomer.UserID+"/remove", s.Session)
	for _, w := range []string{"Remove new@acme.test?", "1 signed-in session, ended", "newcomer&#39;s bot", "no instance of the tenant uses per-user OAuth",
		`name="csrf_token" value="` + members.CSRFToken(s.Session) + `"`, `id="grants-revoke" name="grants" value="revoke" checked`} {
		if confirm.status != 200 || !strings.Contains(confirm.body, w) {
			t.Errorf("removal confirmation (status %d) lacks %q", confirm.status, w)
		}
	}
	removed := s.post(t, "/console/members/"+newcomer.UserID+"/remove", s.Session, form(s.Session, "grants", "revoke"))
	if removed.status != 200 || !strings.Contains(removed.body, "new@acme.test removed") || !strings.Contains(removed.body, "1 tenant API key revoked") {
		t.Fatalf("removal: status %d\n%s", removed.status, removed.body)
	}
	if _, err := s.Members().Member(ctx, tenant.ID, newcomer.UserID); err == nil {
		t.Error("the removed member is still a member")
	}
	if _, err := s.Members().ResolveSession(ctx, token.Reveal()); err == nil {
		t.Error("the removed member's session still resolves")
	}
	if st := s.v1(t, "/v1/tenants/acme/instances", key); st != 401 {
		t.Errorf("the removed member's key against /v1: status %d, want 401", st)
	}
	// The audit writer is asynchronous: wait (generously) for the rows.
	want := []string{"api_key.create:member", "api_key.revoke_member", "member.remove", "member.role:member", "invitation.create:admin", "invitation.revoke"}
	actions := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rows, err := s.AuditStore().List(ctx, tenant.ID, audit.Query{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			actions[r.Action] = true
		}
		if all(want, actions) {
			break
		}
	}
	for _, a := range want {
		if !actions[a] {
			t.Errorf("no audit row %s (have %v)", a, actions)
		}
	}
}

// all reports whether every one of want is in have.
func all(want []string, have map[string]bool) bool {
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// peopleState is everything the people pages change, to check that a
// refused request changed nothing.
func (s *consoleServer) peopleState(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tenant := s.acme(t)
	var b strings.Builder
	callers, err := s.Tenants().ListCallers(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		b.WriteString("caller " + string(c.ID) + " " + c.Name + " revoked=" + strconv.FormatBool(c.RevokedAt != nil) + "\n")
	}
	keys, err := tenants.NewAPIKeys(s.DB()).List(ctx, tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		b.WriteString("key " + k.ID + " revoked=" + strconv.FormatBool(k.RevokedAt != nil) + "\n")
	}
	people, err := s.Members().Members(ctx, tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range people {
		b.WriteString("member " + m.Email + " " + string(m.Role) + "\n")
	}
	invs, err := s.Members().Invitations(ctx, tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		b.WriteString("invitation " + inv.ID + " " + inv.Email + "\n")
	}
	return b.String()
}

// peopleFixture gives acme a caller, an API key, a pending invitation and
// an admin and a member besides the owner; it returns their ids.
type peopleFixture struct {
	caller, key, invitation   string
	adminID, admin            string
	memberID, member          string
	callerToken, apiKey, link string
}

func (s *consoleServer) peopleFixture(t testing.TB) peopleFixture {
	t.Helper()
	ctx := context.Background()
	tenant := s.acme(t)
	var f peopleFixture
	f.adminID, f.admin = s.sessionAs(t, "admin@acme.test", members.RoleAdmin)
	f.memberID, f.member = s.sessionAs(t, "member@acme.test", members.RoleMember)
	f.callerToken = shownOnce(t, s.post(t, "/console/callers", s.Session, form(s.Session, "name", "cron", "kind", "cron", "user_mode", "fixed", "user_id", "svc-1")), "caller-token")
	f.apiKey = shownOnce(t, s.post(t, "/console/api-keys", s.Session, form(s.Session, "name", "ci", "role", "admin", "expiry", "365")), "api-key")
	f.link = shownOnce(t, s.post(t, "/console/members/invitations", s.Session, form(s.Session, "email", "pending@acme.test", "role", "member", "lifetime", "24")), "invitation-link")
	callers, _ := s.Tenants().ListCallers(ctx, "acme")
	keys, _ := tenants.NewAPIKeys(s.DB()).List(ctx, tenant.ID)
	invs, _ := s.Members().Invitations(ctx, tenant.ID)
	if len(callers) != 1 || len(keys) != 1 || len(invs) != 1 {
		t.Fatalf("fixture: %d callers, %d keys, %d invitations", len(callers), len(keys), len(invs))
	}
	f.caller, f.key, f.invitation = string(callers[0].ID), keys[0].ID, invs[0].ID
	return f
}

// peoplePosts are the people pages' changes, each with a valid form.
func (f peopleFixture) posts() []struct {
	path string
	kv   []string
} {
	return []struct {
		path string
		kv   []string
	}{
		{"/console/callers", []string{"name", "x", "kind", "cron"}},
		{"/console/callers/" + f.caller + "/revoke", nil},
		{"/console/api-keys", []string{"name", "x", "role", "member", "expiry", "30"}},
		{"/console/api-keys/" + f.key + "/revoke", nil},
		{"/console/members/invitations", []string{"email", "x@acme.test", "role", "member", "lifetime", "24"}},
		{"/console/members/invitations/" + f.invitation + "/revoke", nil},
		{"/console/members/" + f.memberID + "/role", []string{"role", "admin"}},
		{"/console/members/" + f.memberID + "/remove", []string{"grants", "revoke"}},
	}
}

// TestPeopleRoles checks who may do what: a member gets role_required on
// every people page and change; an admin manages callers, API keys and
// invitations (but invites no owner) and may neither change roles nor
// remove members, as in the /v1 route table. Nothing refused changes
// anything.
func TestPeopleRoles(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	f := s.peopleFixture(t)
	before := s.peopleState(t)

	for _, path := range []string{"/console/callers", "/console/api-keys", "/console/members", "/console/members/" + f.adminID + "/remove"} {
		if p := s.get(t, path, f.member); p.status != 403 || !strings.Contains(p.body, "role_required") || !strings.Contains(p.body, "ask an owner") {
			t.Errorf("member GET %s: status %d, want 403 role_required", path, p.status)
		}
	}
	for _, tc := range f.posts() {
		if p := s.post(t, tc.path, f.member, form(f.member, tc.kv...)); p.status != 403 || !strings.Contains(p.body, "role_required") {
			t.Errorf("member POST %s: status %d, want 403 role_required", tc.path, p.status)
		}
	}
	if p := s.get(t, "/console/instances", f.member); strings.Contains(p.body, `href="/console/callers"`) || strings.Contains(p.body, `href="/console/members"`) {
		t.Error("a member's navigation links to the people pages")
	}
	if after := s.peopleState(t); after != before {
		t.Fatalf("a member's requests changed something:\n%s\nwas\n%s", after, before)
	}

	// An admin: sees the pages, no role or removal controls.
	m := s.get(t, "/console/members", f.admin)
	if m.status != 200 || strings.Contains(m.body, "/role\"") || strings.Contains(m.body, "/remove\"") || strings.Contains(m.body, `id="invite-role-owner"`) {
		t.Errorf("admin's members page: status %d, or it offers role changes, removal or owner invitations", m.status)
	}
	for _, path := range []string{"/console/callers", "/console/api-keys"} {
		if p := s.get(t, path, f.admin); p.status != 200 {
			t.Errorf("admin GET %s: status %d", path, p.status)
		}
	}
	for _, tc := range []struct {
		path string
		kv   []string
	}{
		{"/console/members/" + f.memberID + "/role", []string{"role", "admin"}},
		{"/console/members/" + f.memberID + "/remove", []string{"grants", "revoke"}},
		{"/console/members/invitations", []string{"email", "boss@acme.test", "role", "owner", "lifetime", "24"}},
	} {
		if p := s.post(t, tc.path, f.admin, form(f.admin, tc.kv...)); p.status != 403 || !strings.Contains(p.body, "role_required") {
			t.Errorf("admin POST %s: status %d, want 403 role_required", tc.path, p.status)
		}
	}
	if p := s.get(t, "/console/members/"+f.memberID+"/remove", f.admin); p.status != 403 || !strings.Contains(p.body, "only an owner") {
		t.Errorf("admin opening the removal confirmation: status %d", p.status)
	}
	if after := s.peopleState(t); after != before {
		t.Fatalf("an admin's refused requests changed something:\n%s\nwas\n%s", after, before)
	}
	// What an admin may do, they can.
	if p := s.post(t, "/console/callers/"+f.caller+"/revoke", f.admin, form(f.admin)); p.status != http.StatusSeeOther {
		t.Errorf("admin revoking a caller: status %d", p.status)
	}
	shownOnce(t, s.post(t, "/console/members/invitations", f.admin, form(f.admin, "email", "helper@acme.test", "role", "admin", "lifetime", "24")), "invitation-link")
}

// TestPeopleCSRF checks that every change of the people pages is refused,
// changing nothing, without the session's CSRF token, with another
// session's, or sent cross-site.
func TestPeopleCSRF(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	f := s.peopleFixture(t)
	before := s.peopleState(t)
	for _, tc := range f.posts() {
		noToken := form(s.Session, tc.kv...)
		noToken.Del("csrf_token")
		for name, vals := range map[string]url.Values{"no token": noToken, "another session's token": form(f.admin, tc.kv...)} {
			if p := s.post(t, tc.path, s.Session, vals); p.status != 403 || !strings.Contains(p.body, "csrf_failed") {
				t.Errorf("POST %s with %s: status %d, want 403 csrf_failed", tc.path, name, p.status)
			}
		}
		req, err := http.NewRequest(http.MethodPost, s.URL+tc.path, strings.NewReader(form(s.Session, tc.kv...).Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if p := s.do(t, req, s.Session); p.status != 403 {
			t.Errorf("cross-site POST %s: status %d, want 403", tc.path, p.status)
		}
	}
	if after := s.peopleState(t); after != before {
		t.Fatalf("refused forms changed something:\n%s\nwas\n%s", after, before)
	}
}

// TestPeopleSecretsShownOnce checks that a caller token, an API key and
// an invitation link appear in their creation response only: no page of
// the console shows them afterwards, to any role.
func TestPeopleSecretsShownOnce(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	f := s.peopleFixture(t)
	u, err := url.Parse(f.link)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{f.callerToken, f.apiKey, u.Query().Get("token")}
	for _, session := range []string{s.Session, f.admin, f.member} {
		for _, path := range []string{"/console/callers", "/console/api-keys", "/console/members", "/console/members/" + f.memberID + "/remove",
			"/console/instances", "/console/catalog"} {
			p := s.get(t, path, session)
			if m := inlineCode.FindString(p.body); m != "" {
				t.Errorf("GET %s: inline code %q", path, m)
			}
			for _, secret := range secrets {
				if strings.Contains(p.body, secret) {
					t.Errorf("GET %s shows a secret created earlier", path)
				}
			}
		}
	}
}
