package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
)

// Usage dimensions: what a usage summary may be grouped by.
const (
	ByDay      = "day"
	ByInstance = "instance"
	ByAgent    = "agent"
	ByOutcome  = "outcome"
)

// usageColumns maps a dimension to its rollup column.
var usageColumns = map[string]string{ByDay: "day", ByInstance: "instance", ByAgent: "agent_id", ByOutcome: "outcome"}

// MaxUsageRows bounds the groups of one usage summary.
const MaxUsageRows = 10000

// UsageQuery selects a span of days and how to group them.
type UsageQuery struct {
	// From and To are the first and last day (UTC, inclusive); zero From
	// is 30 days before To, zero To is today.
	From, To time.Time
	// By lists the dimensions rows are grouped by (ByDay, ByInstance,
	// ByAgent, ByOutcome); none sums the whole span.
	By []string
}

// UsageRow is one group of a usage summary; the dimensions not grouped by
// are empty.
type UsageRow struct {
	Day      string `json:"day,omitempty"`
	Instance string `json:"instance,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Calls    int64  `json:"calls"`
}

// Usage is a tenant's agent calls over a span of days, from the rollup
// the writer keeps (never a scan of the audit log).
type Usage struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Calls counts every call; OK those whose outcome was ok, Failed the
	// others (refused calls included).
	Calls  int64      `json:"calls"`
	OK     int64      `json:"ok"`
	Failed int64      `json:"failed"`
	Rows   []UsageRow `json:"rows"`
	// Truncated says that there were more than MaxUsageRows groups;
	// the totals still count every call.
	Truncated bool `json:"truncated,omitempty"`
}

var errUsageBy = switchboard.E(switchboard.ErrInvalid, "invalid_usage_by",
	"by lists dimensions among day, instance, agent and outcome, separated by commas")

// ParseUsageQuery reads a usage request's from, to (YYYY-MM-DD) and by.
func ParseUsageQuery(from, to, by string) (UsageQuery, error) {
	var q UsageQuery
	for _, d := range []struct {
		v   string
		at  *time.Time
		key string
	}{{from, &q.From, "from"}, {to, &q.To, "to"}} {
		if d.v == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, d.v)
		if err != nil {
			return q, switchboard.E(switchboard.ErrInvalid, "invalid_time", "%s must be a day, YYYY-MM-DD", d.key)
		}
		*d.at = t
	}
	if by != "" {
		for _, d := range strings.Split(by, ",") {
			if _, ok := usageColumns[d]; !ok {
				return q, errUsageBy
			}
			q.By = append(q.By, d)
		}
	}
	return q, nil
}

// span is the query's first and last day.
func (q UsageQuery) span(now time.Time) (from, to string, err error) {
	if q.To.IsZero() {
		q.To = now.UTC()
	}
	if q.From.IsZero() {
		q.From = q.To.AddDate(0, 0, -30)
	}
	from, to = q.From.UTC().Format(time.DateOnly), q.To.UTC().Format(time.DateOnly)
	if from > to {
		return "", "", switchboard.E(switchboard.ErrInvalid, "invalid_time", "from is after to")
	}
	return from, to, nil
}

// Usage sums a tenant's calls over the query's days, grouped as asked.
func (s *Store) Usage(ctx context.Context, tenant switchboard.TenantID, q UsageQuery) (Usage, error) {
	from, to, err := q.span(time.Now())
	if err != nil {
		return Usage{}, err
	}
	u := Usage{From: from, To: to, Rows: []UsageRow{}}
	err = s.db.QueryRowContext(ctx, `SELECT COALESCE(sum(calls), 0),
		COALESCE(sum(CASE WHEN outcome = 'ok' THEN calls ELSE 0 END), 0)
		FROM audit_usage WHERE tenant_id = $1 AND day >= $2 AND day <= $3`, string(tenant), from, to).Scan(&u.Calls, &u.OK)
	if err != nil {
		return u, fmt.Errorf("reading usage: %w", err)
	}
	u.Failed = u.Calls - u.OK
	if len(q.By) == 0 {
		return u, nil
	}
	cols := make([]string, 0, len(q.By))
	seen := map[string]bool{}
	for _, d := range q.By {
		if !seen[d] {
			seen[d] = true
			cols = append(cols, usageColumns[d])
		}
	}
	list := strings.Join(cols, ", ")
	rows, err := s.db.QueryContext(ctx, `SELECT `+list+`, sum(calls) FROM audit_usage
		WHERE tenant_id = $1 AND day >= $2 AND day <= $3 GROUP BY `+list+` ORDER BY `+list+` LIMIT `+strconv.Itoa(MaxUsageRows+1),
		string(tenant), from, to)
	if err != nil {
		return u, fmt.Errorf("reading usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r UsageRow
		dest := make([]any, 0, len(cols)+1)
		for _, c := range cols {
			switch c {
			case "day":
				dest = append(dest, &r.Day)
			case "instance":
				dest = append(dest, &r.Instance)
			case "agent_id":
				dest = append(dest, &r.Agent)
			case "outcome":
				dest = append(dest, &r.Outcome)
			}
		}
		if err := rows.Scan(append(dest, &r.Calls)...); err != nil {
			return u, fmt.Errorf("reading usage: %w", err)
		}
		u.Rows = append(u.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return u, fmt.Errorf("reading usage: %w", err)
	}
	if len(u.Rows) > MaxUsageRows {
		u.Rows, u.Truncated = u.Rows[:MaxUsageRows], true
	}
	return u, nil
}

// TenantUsage is one tenant's calls over a span of days.
type TenantUsage struct {
	Tenant switchboard.TenantID `json:"tenant_id"`
	Calls  int64                `json:"calls"`
	OK     int64                `json:"ok"`
	Failed int64                `json:"failed"`
}

// UsageByTenant sums every tenant's calls over the query's days (its By is
// ignored), one page of tenants in id order after the tenant id after;
// more says whether tenants follow.
func (s *Store) UsageByTenant(ctx context.Context, q UsageQuery, after string, limit int) (list []TenantUsage, from, to string, more bool, err error) {
	from, to, err = q.span(time.Now())
	if err != nil {
		return nil, "", "", false, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT tenant_id, sum(calls), sum(CASE WHEN outcome = 'ok' THEN calls ELSE 0 END)
		FROM audit_usage WHERE day >= $1 AND day <= $2 AND tenant_id > $3
		GROUP BY tenant_id ORDER BY tenant_id LIMIT $4`, from, to, after, limit+1)
	if err != nil {
		return nil, from, to, false, fmt.Errorf("reading usage: %w", err)
	}
	defer rows.Close()
	list = []TenantUsage{}
	for rows.Next() {
		var (
			u  TenantUsage
			id string
		)
		if err := rows.Scan(&id, &u.Calls, &u.OK); err != nil {
			return nil, from, to, false, fmt.Errorf("reading usage: %w", err)
		}
		u.Tenant, u.Failed = switchboard.TenantID(id), u.Calls-u.OK
		list = append(list, u)
	}
	if err := rows.Err(); err != nil {
		return nil, from, to, false, fmt.Errorf("reading usage: %w", err)
	}
	if len(list) > limit {
		return list[:limit], from, to, true, nil
	}
	return list, from, to, false, nil
}
