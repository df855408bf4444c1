package console_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/console"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// acmeID returns the id of tenant acme.
func (s *consoleServer) acmeID(t testing.TB) switchboard.TenantID {
	t.Helper()
	tn, err := s.Tenants().Tenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

// userOf returns the user id of a session token.
func (s *consoleServer) userOf(t testing.TB, session string) string {
	t.Helper()
	sess, err := s.Members().ResolveSession(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	return sess.UserID
}

// insertAudit writes rows of tenant acme straight to the audit store.
func (s *consoleServer) insertAudit(t testing.TB, rows []audit.Entry) {
	t.Helper()
	tenant := s.acmeID(t)
	for i := range rows {
		rows[i].Tenant = tenant
	}
	if err := s.AuditStore().Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// actionMark finds the marker actions ("act-0042") of the rows a page
// shows, in order.
var actionMark = regexp.MustCompile(`act-\d{4}`)

// olderLink and newerLink find the paging links of the audit page.
var (
	olderLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">Older</a>`)
	newerLink = regexp.MustCompile(`<a href="([^"]+)" rel="prev">Newer</a>`)
)

// TestAuditPaging walks the audit page by its Older links through 123
// rows, most of them sharing a time, and gets every row exactly once,
// newest first; then back by Newer links to the first page.
func TestAuditPaging(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var rows []audit.Entry
	for i := range 123 {
		rows = append(rows, audit.Entry{ID: fmt.Sprintf("aud_%04d", i), Time: base.Add(time.Duration(i/40) * time.Second),
			Instance: "github", Agent: "claude", Actor: "usr_x", Subject: "usr_x", Tool: "issues", Action: fmt.Sprintf("act-%04d", i), Outcome: "ok"})
	}
	s.insertAudit(t, rows)
	var want []string
	for i := 122; i >= 0; i-- { // (time, id) descending: ids grow with time here
		want = append(want, fmt.Sprintf("act-%04d", i))
	}

	var got []string
	var pages []string
	path := "/console/audit?instance=github"
	for n := 0; ; n++ {
		if n > 10 {
			t.Fatal("paging does not end")
		}
		p := s.get(t, path, s.Session)
		if p.status != 200 {
			t.Fatalf("%s: %d", path, p.status)
		}
		pages = append(pages, path)
		got = append(got, actionMark.FindAllString(p.body, -1)...)
		if n > 0 && !newerLink.MatchString(p.body) {
			t.Errorf("page %d has no Newer link", n)
		}
		m := olderLink.FindStringSubmatch(p.body)
		if m == nil {
			break
		}
		path = html.UnescapeString(m[1])
		if !strings.Contains(path, "instance=github") || !strings.Contains(path, "cursor=") {
			t.Fatalf("the Older link %s drops the filter or the cursor", path)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d rows, want each of the 123 once, newest first: %v", len(got), got)
	}
	if len(pages) != 3 {
		t.Errorf("%d pages of 50, want 3", len(pages))
	}
	// Back from the last page: Newer reaches the first page's rows.
	p := s.get(t, pages[2], s.Session)
	m := newerLink.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatal("the last page has no Newer link")
	}
	p = s.get(t, html.UnescapeString(m[1]), s.Session)
	if rows := actionMark.FindAllString(p.body, -1); !slices.Equal(rows, want[50:100]) {
		t.Errorf("Newer from the last page shows %v, want the second page", rows)
	}
	if p := s.get(t, "/console/audit?cursor=Zm9yZ2Vk", s.Session); p.status != 400 || !strings.Contains(p.body, "invalid_cursor") {
		t.Errorf("a forged cursor: %d", p.status)
	}
}

// TestAuditFilters checks each filter of the audit page, the rule that a
// member sees only the rows where they are the actor or the subject
// (also with a user filter naming someone else, which is refused), bad
// input as a typed error on the page, and the empty states.
func TestAuditFilters(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	if p := s.get(t, "/console/audit", s.Session); p.status != 200 || !strings.Contains(p.body, "No calls yet") ||
		!strings.Contains(p.body, `href="/console/instances"`) {
		t.Fatalf("empty audit page: %d %s", p.status, p.body)
	}
	member := s.memberSession(t)
	memberID, ownerID := s.userOf(t, member), s.userOf(t, s.Session)
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	s.insertAudit(t, []audit.Entry{
		{Time: base, Instance: "github", Agent: "claude", Actor: ownerID, Subject: ownerID, Tool: "issues", Action: "act-0001", Outcome: "ok"},
		{Time: base.Add(time.Hour), Instance: "github", Agent: "cursor", Actor: memberID, Subject: memberID, Tool: "issues", Action: "act-0002", Outcome: "rate_limited", Status: 429},
		{Time: base.Add(2 * time.Hour), Instance: "slack", Agent: "claude", Actor: "cal_cron", Subject: memberID, Tool: "chat", Action: "act-0003", Outcome: "ok"},
		{Time: base.Add(3 * time.Hour), Instance: "slack", Agent: "claude", Actor: ownerID, Subject: ownerID, Tool: "chat", Action: "act-0004", Outcome: "upstream_error", Status: 502},
	})
	rowsOf := func(path, session string, status int) []string {
		t.Helper()
		p := s.get(t, path, session)
		if p.status != status {
			t.Fatalf("%s: %d, want %d: %s", path, p.status, status, p.body)
		}
		return actionMark.FindAllString(p.body, -1)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/console/audit", []string{"act-0004", "act-0003", "act-0002", "act-0001"}},
		{"/console/audit?instance=github", []string{"act-0002", "act-0001"}},
		{"/console/audit?agent=cursor", []string{"act-0002"}},
		{"/console/audit?user=" + memberID, []string{"act-0003", "act-0002"}},
		{"/console/audit?user=member%40acme.test", []string{"act-0003", "act-0002"}},
		{"/console/audit?outcome=ok", []string{"act-0003", "act-0001"}},
		{"/console/audit?outcome=%21ok", []string{"act-0004", "act-0002"}},
		{"/console/audit?outcome=rate_limited", []string{"act-0002"}},
		{"/console/audit?from=2026-11-30T09:00&to=2026-11-30T11:00", []string{"act-0003", "act-0002"}},
		{"/console/audit?from=2026-11-30T09:00:00", []string{"act-0004", "act-0003", "act-0002"}},
		{"/console/audit?instance=slack&agent=claude&outcome=ok", []string{"act-0003"}},
	} {
		if got := rowsOf(tc.path, s.Session, 200); !slices.Equal(got, tc.want) {
			t.Errorf("owner %s: %v, want %v", tc.path, got, tc.want)
		}
	}
	// The filter form shows what was asked.
	p := s.get(t, "/console/audit?instance=slack&agent=claude&outcome=rate_limited&from=2026-11-30T09:00", s.Session)
	for _, want := range []string{`<option value="slack" selected>`, `id="agent" name="agent" type="text" value="claude"`,
		`<option value="rate_limited" selected>rate_limited</option>`, `value="2026-11-30T09:00"`, "No calls match these filters"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("filtered page lacks %s", want)
		}
	}

	for _, path := range []string{"/console/audit", "/console/audit.csv"} {
		p := s.get(t, path, s.Session)
		if p.header.Get("Content-Security-Policy") == "" || p.header.Get("Cache-Control") != "no-store" || inlineCode.MatchString(p.body) {
			t.Errorf("%s: security headers missing or inline code", path)
		}
	}

	// A member: their own rows (actor or subject), whatever they ask.
	if got := rowsOf("/console/audit", member, 200); !slices.Equal(got, []string{"act-0003", "act-0002"}) {
		t.Errorf("member sees %v, want their own rows", got)
	}
	if got := rowsOf("/console/audit?user="+memberID+"&instance=github", member, 200); !slices.Equal(got, []string{"act-0002"}) {
		t.Errorf("member naming themself: %v", got)
	}
	if got := rowsOf("/console/audit?user=member%40acme.test", member, 200); !slices.Equal(got, []string{"act-0003", "act-0002"}) {
		t.Errorf("member naming their own email: %v", got)
	}
	if p := s.get(t, "/console/audit?user=owner%40acme.test", member); p.status != 403 {
		t.Errorf("member naming the owner's email: %d", p.status)
	}
	p = s.get(t, "/console/audit?user="+ownerID, member)
	if p.status != 403 || !strings.Contains(p.body, "role_required") || actionMark.MatchString(p.body) {
		t.Errorf("member naming the owner: %d, rows %v", p.status, actionMark.FindAllString(p.body, -1))
	}
	if strings.Contains(p.body, `id="user"`) {
		t.Errorf("a member's page offers the user filter")
	}

	// Bad input: a typed error on the page, no rows.
	for _, tc := range []struct{ query, code string }{
		{"from=yesterday", "invalid_time"},
		{"to=2026-13-01T00:00", "invalid_time"},
		{"from=2026-11-30T10:00&to=2026-11-30T09:00", "invalid_time"},
		{"agent=a%01b", "invalid_query"},
		{"kind=secrets", "invalid_query"},
		{"instance=" + strings.Repeat("x", 201), "invalid_query"},
	} {
		p := s.get(t, "/console/audit?"+tc.query, s.Session)
		if p.status != 400 || !strings.Contains(p.body, tc.code) || actionMark.MatchString(p.body) || !strings.Contains(p.body, `role="alert"`) {
			t.Errorf("%s: %d, want 400 %s on the page", tc.query, p.status, tc.code)
		}
		if p := s.get(t, "/console/audit.csv?"+tc.query, s.Session); p.status != 400 || !strings.Contains(p.body, tc.code) {
			t.Errorf("export %s: %d, want 400 %s", tc.query, p.status, tc.code)
		}
	}
	if p := s.get(t, "/console/audit", ""); p.status != 401 {
		t.Errorf("signed out: %d", p.status)
	}
	if p := s.get(t, "/console/audit.csv", ""); p.status != 401 || strings.Contains(p.body, "act-") {
		t.Errorf("signed-out export: %d", p.status)
	}
}

// readCSV fetches an export and parses it.
func (s *consoleServer) readCSV(t *testing.T, path, session string) (page, [][]string) {
	t.Helper()
	p := s.get(t, path, session)
	if p.status != 200 {
		t.Fatalf("%s: %d %s", path, p.status, p.body)
	}
	if ct := p.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := p.header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="audit-acme-`) || !strings.HasSuffix(cd, `.csv"`) {
		t.Errorf("Content-Disposition %q", cd)
	}
	recs, err := csv.NewReader(strings.NewReader(p.body)).ReadAll()
	if err != nil {
		t.Fatalf("the export is not RFC 4180 CSV: %v", err)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != "time,id,instance,caller,agent,actor,subject,tool,action,outcome,status,latency_us" {
		t.Fatalf("header row %v", recs)
	}
	return p, recs[1:]
}

// TestAuditExport checks the CSV export: the header row, quoting of
// commas, quotes and line breaks, formula-looking cells defused, the same
// filters and member rule as the page, and every matching row across the
// store's pages.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	member := s.memberSession(t)
	memberID := s.userOf(t, member)
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	tricky := []string{`=HYPERLINK("http://127.0.0.1/x","y")`, "+1+1", "-2", "@SUM(A1)", "\tcmd", "\rcmd", `a "quoted", b`, "line\nbreak"}
	var rows []audit.Entry
	for i, v := range tricky {
		rows = append(rows, audit.Entry{Time: base.Add(time.Duration(i) * time.Minute), Instance: "github", Agent: v, Actor: memberID, Subject: memberID,
			Tool: "issues", Action: "act-tricky", Outcome: "ok"})
	}
	// More rows than one store page, sharing times.
	for i := range 2100 {
		rows = append(rows, audit.Entry{ID: fmt.Sprintf("aud_bulk_%04d", i), Time: base.Add(-time.Duration(i%3) * time.Hour), Instance: "slack",
			Agent: "claude", Actor: "usr_other", Subject: "usr_other", Tool: "chat", Action: "send", Outcome: "ok", LatencyUs: 1500})
	}
	s.insertAudit(t, rows)

	_, recs := s.readCSV(t, "/console/audit.csv?instance=github", s.Session)
	if len(recs) != len(tricky) {
		t.Fatalf("%d rows, want %d", len(recs), len(tricky))
	}
	for i, r := range recs {
		v := tricky[len(tricky)-1-i] // newest first
		want := v
		if strings.ContainsAny(v[:1], "=+-@\t\r") {
			want = "'" + v
		}
		if r[4] != want {
			t.Errorf("agent cell %q, want %q", r[4], want)
		}
		for j, cell := range r {
			if j != 4 && cell != "" && strings.ContainsAny(cell[:1], "=+-@\t\r") {
				t.Errorf("cell %d %q starts like a formula", j, cell)
			}
		}
	}

	_, recs = s.readCSV(t, "/console/audit.csv?instance=slack", s.Session)
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r[1]] = true
	}
	if len(recs) != 2100 || len(ids) != 2100 {
		t.Errorf("slack export: %d rows, %d distinct, want 2100", len(recs), len(ids))
	}
	if recs[0][10] != "0" || recs[0][11] != "1500" || recs[0][0] != base.Format(time.RFC3339Nano) {
		t.Errorf("first slack row %v", recs[0])
	}
	// A member exports their own rows only.
	_, recs = s.readCSV(t, "/console/audit.csv", member)
	if len(recs) != len(tricky) {
		t.Errorf("member export: %d rows, want their %d", len(recs), len(tricky))
	}
	if p := s.get(t, "/console/audit.csv?user=usr_other", member); p.status != 403 {
		t.Errorf("member exporting another's rows: %d", p.status)
	}
	// The page links to the export with the same filters.
	if p := s.get(t, "/console/audit?instance=slack&agent=claude", s.Session); !strings.Contains(p.body, `href="/console/audit.csv?agent=claude&amp;instance=slack"`) {
		t.Errorf("the page's export link does not carry the filters")
	}
}

// TestAuditRealCalls makes agent calls through the MCP endpoint with the
// official SDK client against a loopback upstream, with a canary in the
// instance's secret and in the arguments: the page and the export show
// the calls and never the canary.
func TestAuditRealCalls(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	const canary = "ghp_canary_never_in_audit_0042"
	calls := agentCalls(t, s, canary)
	calls.call(t, "claude", "repositories", map[string]any{"action": "list_mine", "affiliation": canary})
	calls.call(t, "cursor", "repositories", map[string]any{"action": "get", "owner": canary})
	s.Audit().Flush(context.Background())

	p := s.get(t, "/console/audit", s.Session)
	if p.status != 200 || !strings.Contains(p.body, "list_mine") || !strings.Contains(p.body, "cursor") {
		t.Fatalf("audit page after two calls: %d %s", p.status, p.body)
	}
	_, recs := s.readCSV(t, "/console/audit.csv", s.Session)
	body := p.body + fmt.Sprint(recs)
	if strings.Contains(body, canary) {
		t.Errorf("the canary is in the audit page or export")
	}
	if len(recs) != 2 || recs[0][4] != "cursor" || recs[1][4] != "claude" || recs[1][9] != "ok" {
		t.Errorf("export of two calls: %v", recs)
	}
}

// agentClient makes agent calls to tenant acme's github instance.
type agentClient struct {
	s     *consoleServer
	token string
	user  string
}

// agentCalls installs the github connector as instance github of acme
// against a loopback upstream (with secret as its token), for agents
// claude and cursor, and creates a trusted agent platform caller that
// names the owner as its user.
func agentCalls(t testing.TB, s *consoleServer, secret string) *agentClient {
	t.Helper()
	ctx := context.Background()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/user/repos") {
			fmt.Fprint(w, `[{"name": "switchboard", "full_name": "acme/switchboard"}]`)
			return
		}
		fmt.Fprint(w, `{"login": "octo"}`)
	}))
	t.Cleanup(up.Close)
	tok, api := secrets.New(secret), secrets.New(up.URL)
	if _, _, err := s.Tenants().Install(ctx, "acme", "github", tenants.InstallRequest{ConnectorID: "github", AuthMode: "apiKey",
		Fields: map[string]*secrets.Secret{"GITHUB_TOKEN": &tok, "GITHUB_API_URL": &api}, Agents: []string{"claude", "cursor"}}); err != nil {
		t.Fatal(err)
	}
	_, token, err := s.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform",
		Kind: tenants.KindAgentPlatform, Trusted: true, UserMode: tenants.UserHeader})
	if err != nil {
		t.Fatal(err)
	}
	return &agentClient{s: s, token: token.Reveal(), user: s.userOf(t, s.Session)}
}

// call calls tool as agent through the MCP endpoint with the official
// SDK client.
func (a *agentClient) call(t testing.TB, agent, tool string, args map[string]any) {
	t.Helper()
	a.repeat(t, agent, tool, args, 1)
}

// repeat makes n calls of tool as agent in one MCP session.
func (a *agentClient) repeat(t testing.TB, agent, tool string, args map[string]any, n int) {
	t.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: agent, Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: a.s.URL + "/workspaces/acme/webhooks/github.mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: agentHeaders{"Authorization": "Bearer " + a.token, "X-Agent-Id": agent, "X-User-Id": a.user}},
	}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	defer cs.Close()
	for range n {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
			t.Fatalf("tools/call: %v", err)
		}
	}
}

// agentHeaders adds an agent platform's headers to every request.
type agentHeaders map[string]string

func (h agentHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestAuditExportBound exports a tenant with more rows than the bound:
// the file holds exactly the newest console.ExportMaxRows, each once, and
// says the bound in a header.
func TestAuditExportBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,005 audit rows")
	}
	t.Parallel()
	s := startConsole(t)
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const total = console.ExportMaxRows + 5
	batch := make([]audit.Entry, 0, 5000)
	for i := range total {
		batch = append(batch, audit.Entry{ID: fmt.Sprintf("aud_%06d", i), Time: base.Add(time.Duration(i/10) * time.Millisecond),
			Instance: "github", Agent: "claude", Tool: "issues", Action: "list", Outcome: "ok"})
		if len(batch) == cap(batch) || i == total-1 {
			s.insertAudit(t, batch)
			batch = batch[:0]
		}
	}
	p, recs := s.readCSV(t, "/console/audit.csv", s.Session)
	if p.header.Get("X-Export-Row-Limit") != strconv.Itoa(console.ExportMaxRows) {
		t.Errorf("X-Export-Row-Limit %q", p.header.Get("X-Export-Row-Limit"))
	}
	if len(recs) != console.ExportMaxRows {
		t.Fatalf("%d rows, want the bound %d", len(recs), console.ExportMaxRows)
	}
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		seen[r[1]] = true
	}
	// The newest rows: the five oldest ids are the ones left out.
	if len(seen) != console.ExportMaxRows || seen["aud_000004"] || !seen["aud_000005"] || !seen[fmt.Sprintf("aud_%06d", total-1)] {
		t.Errorf("%d distinct rows; oldest kept %v", len(seen), seen["aud_000005"])
	}
}
