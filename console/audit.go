package console

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/tenants"
)

// auditPageSize is how many rows the audit page shows at once.
const auditPageSize = 50

// ExportMaxRows bounds a CSV export: the newest rows that match, at most
// this many. The page and docs/console.md say so; narrow the time range
// to export older rows.
const ExportMaxRows = 100_000

// exportMaxRowsText is ExportMaxRows as the page writes it.
const exportMaxRowsText = "100,000"

// exportChunk is how many rows an export reads from the store at a time
// (the largest page the store gives), so that no query runs for the
// whole download.
const exportChunk = audit.MaxLimit

// datetimeLocal is the value format of <input type="datetime-local">;
// browsers send seconds only when the value has them.
const (
	datetimeLocal        = "2006-01-02T15:04"
	datetimeLocalSeconds = "2006-01-02T15:04:05"
)

var (
	errAuditOff   = switchboard.E(switchboard.ErrUnavailable, "audit_unavailable", "the audit log is not enabled on this server")
	errOthersRows = switchboard.E(switchboard.ErrForbidden, "role_required",
		"members see their own calls only; an admin or owner of the tenant sees everyone's")
)

// kindAll is the kind filter that shows every row.
const kindAll = "all"

// auditFilters are the audit page's filters, as the GET form sends them.
type auditFilters struct {
	// Kind is audit.KindCalls (the default, left out of URLs),
	// audit.KindChanges or kindAll.
	Kind                           string
	Instance, Agent, User, Outcome string
	// From and To are the datetime-local values, in UTC.
	From, To string
}

// values returns the filters as query parameters (empty ones left out).
func (f auditFilters) values() url.Values {
	v := url.Values{}
	kind := f.Kind
	if kind == audit.KindCalls {
		kind = ""
	}
	for _, p := range []struct{ k, v string }{
		{"kind", kind}, {"instance", f.Instance}, {"agent", f.Agent}, {"user", f.User},
		{"outcome", f.Outcome}, {"from", f.From}, {"to", f.To},
	} {
		if p.v != "" {
			v.Set(p.k, p.v)
		}
	}
	return v
}

// set reports whether a filter is set.
func (f auditFilters) set() bool { return len(f.values()) > 0 }

// auditQuery reads the filters of the request and turns them into the
// audit store's query for viewer v: the one query the API's
// GET /v1/tenants/{t}/audit runs too, with the same rule that a member
// sees only the rows where they are the actor or the subject. The user
// filter takes a user id or a member's email. Bad input is a typed error.
func (c *Console) auditQuery(ec echo.Context, v *Viewer) (auditFilters, audit.Query, error) {
	f := auditFilters{
		Kind:     ec.QueryParam("kind"),
		Instance: ec.QueryParam("instance"), Agent: ec.QueryParam("agent"), User: ec.QueryParam("user"),
		Outcome: ec.QueryParam("outcome"), From: ec.QueryParam("from"), To: ec.QueryParam("to"),
	}
	for _, p := range []struct{ name, v string }{
		{"instance", f.Instance}, {"agent", f.Agent}, {"user", f.User}, {"outcome", f.Outcome},
	} {
		if err := checkText(p.name, p.v); err != nil {
			return f, audit.Query{}, err
		}
	}
	q := audit.Query{Instance: f.Instance, Agent: f.Agent, Outcome: f.Outcome, User: f.User, Kind: f.Kind}
	if strings.Contains(q.User, "@") && c.cfg.Members != nil {
		if m, err := c.cfg.Members.MemberByEmail(ec.Request().Context(), v.Session.Tenant, q.User); err == nil {
			q.User = m.UserID
		}
	}
	switch f.Kind {
	case "":
		f.Kind, q.Kind = audit.KindCalls, audit.KindCalls
	case kindAll:
		q.Kind = ""
	case audit.KindCalls, audit.KindChanges:
	default:
		return f, audit.Query{}, switchboard.E(switchboard.ErrInvalid, "invalid_query", "show must be calls, changes or all")
	}
	if !v.Admin() {
		if q.User != "" && q.User != v.Session.UserID {
			return f, audit.Query{}, errOthersRows
		}
		q.User = v.Session.UserID
	}
	var err error
	if q.From, err = parseLocalTime("from", f.From); err != nil {
		return f, audit.Query{}, err
	}
	if q.To, err = parseLocalTime("to", f.To); err != nil {
		return f, audit.Query{}, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return f, audit.Query{}, switchboard.E(switchboard.ErrInvalid, "invalid_time", "“From” must be before “To”")
	}
	return f, q, nil
}

// checkText refuses a filter value the store could not hold or that is
// longer than any stored value: control characters (NUL among them),
// invalid UTF-8, more than 200 bytes.
func checkText(name, s string) error {
	if len(s) > 200 || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return switchboard.E(switchboard.ErrInvalid, "invalid_query",
			"the %s filter must be at most 200 characters of text, without control characters", name)
	}
	return nil
}

// parseLocalTime parses a datetime-local value as UTC; "" is no bound.
func parseLocalTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{datetimeLocal, datetimeLocalSeconds} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, switchboard.E(switchboard.ErrInvalid, "invalid_time",
		"%s must be a date and time like 2026-12-01T09:30 (UTC)", strings.ToUpper(name[:1])+name[1:])
}

// auditRow is one row of the audit page.
type auditRow struct {
	audit.Entry
	// OnBehalf is set when the subject differs from the actor (a trusted
	// caller acting for a user).
	OnBehalf bool
	// Latency is the call's latency in milliseconds.
	Latency string
	// ActorName and SubjectName are the actor's and subject's emails when
	// they are members the viewer may see, else their ids.
	ActorName, SubjectName string
}

// auditData is the audit page.
type auditData struct {
	Tenant    string
	Admin     bool
	Filters   auditFilters
	Filtered  bool
	Instances []string
	Rows      []auditRow
	// Older and Newer are the paging links' URLs, empty when there is no
	// such page; First is set on any page but the first.
	Older, Newer, First string
	// Export is the CSV export's URL, with the same filters.
	Export  string
	MaxRows string
	Problem *errorData
}

func (auditData) title() string { return "Audit" }

// KindChoices are the "Show" filter's options.
func (auditData) KindChoices() []choice {
	return []choice{{Value: audit.KindCalls, Label: "Agent calls"}, {Value: audit.KindChanges, Label: "Changes by people"}, {Value: kindAll, Label: "Everything"}}
}

// OutcomeChoices are the outcome filter's options, with the filter's
// value added when it names one error code.
func (d auditData) OutcomeChoices() []choice {
	out := []choice{{Value: "", Label: "Any outcome"}, {Value: "ok", Label: "Succeeded"}, {Value: audit.OutcomeFailed, Label: "Failed"}}
	switch d.Filters.Outcome {
	case "", "ok", audit.OutcomeFailed:
	default:
		out = append(out, choice{Value: d.Filters.Outcome, Label: d.Filters.Outcome})
	}
	return out
}

// auditTenant returns the viewer's tenant, or audit_unavailable when the
// server keeps no audit log.
func (c *Console) auditTenant(ec echo.Context, v *Viewer) (*tenants.Tenant, error) {
	if c.cfg.Audit == nil {
		return nil, errAuditOff
	}
	return c.tenantOf(ec, v)
}

// auditPage renders one page of the tenant's audit rows (a member's own
// rows only) with the filters, the paging links and the export link.
func (c *Console) auditPage(ec echo.Context, v *Viewer) error {
	ctx := ec.Request().Context()
	t, err := c.auditTenant(ec, v)
	if err != nil {
		return err
	}
	d := auditData{Tenant: t.Name, Admin: v.Admin(), MaxRows: exportMaxRowsText}
	if list, err := c.cfg.Tenants.ListInstances(ctx, t.Slug); err == nil {
		for _, in := range list {
			d.Instances = append(d.Instances, in.Slug)
		}
	} else {
		return err
	}
	f, q, err := c.auditQuery(ec, v)
	d.Filters, d.Filtered = f, f.set()
	// An instance removed since keeps its rows: offer the filter's value.
	if f.Instance != "" && !slices.Contains(d.Instances, f.Instance) {
		d.Instances = append(d.Instances, f.Instance)
	}
	if err != nil {
		if !errorsInvalidOrForbidden(err) {
			return err
		}
		d.Problem = problemData(err)
		c.render(ec, d.Problem.Status, "audit", v, d)
		return nil
	}
	q.Limit, q.Cursor = auditPageSize, ec.QueryParam("cursor")
	page, err := c.cfg.Audit.Page(ctx, t.ID, q)
	if err != nil {
		return err
	}
	names, err := c.memberNames(ec, v)
	if err != nil {
		return err
	}
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		return id
	}
	for _, e := range page.Entries {
		d.Rows = append(d.Rows, auditRow{Entry: e, OnBehalf: e.Subject != "" && e.Subject != e.Actor,
			Latency:   strconv.FormatFloat(float64(e.LatencyUs)/1000, 'f', 1, 64) + " ms",
			ActorName: name(e.Actor), SubjectName: name(e.Subject)})
	}
	link := func(cursor string) string {
		vals := f.values()
		if cursor != "" {
			vals.Set("cursor", cursor)
		}
		if len(vals) == 0 {
			return Prefix + "audit"
		}
		return Prefix + "audit?" + vals.Encode()
	}
	if page.Older != "" {
		d.Older = link(page.Older)
	}
	if page.Newer != "" {
		d.Newer = link(page.Newer)
	}
	if q.Cursor != "" {
		d.First = link("")
	}
	d.Export = Prefix + "audit.csv"
	if vals := f.values(); len(vals) > 0 {
		d.Export += "?" + vals.Encode()
	}
	c.render(ec, http.StatusOK, "audit", v, d)
	return nil
}

// memberNames maps user ids to the emails the viewer may see: every
// member's for admins and owners, their own for a member.
func (c *Console) memberNames(ec echo.Context, v *Viewer) (map[string]string, error) {
	names := map[string]string{}
	if v.Email != "" {
		names[v.Session.UserID] = v.Email
	}
	if !v.Admin() || c.cfg.Members == nil {
		return names, nil
	}
	list, err := c.cfg.Members.Members(ec.Request().Context(), v.Session.Tenant)
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		names[m.UserID] = m.Email
	}
	return names, nil
}

// errorsInvalidOrForbidden reports a filter the page shows as a problem
// above the form rather than as an error page.
func errorsInvalidOrForbidden(err error) bool {
	k := switchboard.ProblemOf(err).Status
	return k == http.StatusBadRequest || k == http.StatusForbidden
}

// csvHeader is the export's header row.
var csvHeader = []string{"time", "id", "instance", "caller", "agent", "actor", "subject", "tool", "action", "outcome", "status", "latency_us"}

// auditCSV streams every row that matches the filters (the viewer's own
// only, for a member), newest first, at most ExportMaxRows, as CSV
// (RFC 4180 quoting by encoding/csv). Cells that a spreadsheet would run
// as a formula are defused (safeCell). Filters are checked and the first
// rows read before anything is written, so bad input gets its typed
// error page; a store failure midway aborts the response, so that a
// partial file is never mistaken for a whole one.
func (c *Console) auditCSV(ec echo.Context, v *Viewer) error {
	ctx := ec.Request().Context()
	t, err := c.auditTenant(ec, v)
	if err != nil {
		return err
	}
	_, q, err := c.auditQuery(ec, v)
	if err != nil {
		return err
	}
	q.Limit = exportChunk
	page, err := c.cfg.Audit.Page(ctx, t.ID, q)
	if err != nil {
		return err
	}
	h := ec.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="audit-`+t.Slug+"-"+time.Now().UTC().Format("20060102T150405Z")+`.csv"`)
	h.Set("X-Export-Row-Limit", strconv.Itoa(ExportMaxRows))
	ec.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(ec.Response())
	_ = w.Write(csvHeader)
	written := 0
	for {
		for _, e := range page.Entries {
			if written == ExportMaxRows {
				break
			}
			_ = w.Write([]string{
				e.Time.UTC().Format(time.RFC3339Nano), e.ID, safeCell(e.Instance), safeCell(e.Caller), safeCell(e.Agent),
				safeCell(e.Actor), safeCell(e.Subject), safeCell(e.Tool), safeCell(e.Action), safeCell(e.Outcome),
				strconv.Itoa(e.Status), strconv.FormatInt(e.LatencyUs, 10),
			})
			written++
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return nil // the client went away
		}
		ec.Response().Flush()
		if page.Older == "" || written == ExportMaxRows {
			return nil
		}
		q.Cursor = page.Older
		if page, err = c.cfg.Audit.Page(ctx, t.ID, q); err != nil {
			c.logger.Error("audit export failed midway", "tenant", t.Slug, "rows", written, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// safeCell defuses a cell that a spreadsheet would evaluate as a formula
// (CSV injection): one starting with = + - @, a tab or a carriage return
// gets a leading apostrophe, which spreadsheets show as text.
func safeCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
