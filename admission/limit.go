package admission

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
)

// Limit bounds the calls of one key (a tenant, an instance, a user, a
// connector): at most Concurrency calls in flight, and a token bucket of
// Rate calls a second holding at most Burst. A zero field is no bound.
type Limit struct {
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
}

// IsZero reports whether l bounds nothing.
func (l Limit) IsZero() bool { return l.Concurrency == 0 && l.Rate == 0 }

// burst is the bucket's size: Burst, or one second of Rate (at least 1).
func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(math.Ceil(l.Rate)))
}

// String is l in the syntax ParseLimit reads.
func (l Limit) String() string {
	if l.IsZero() {
		return "off"
	}
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, "concurrency="+strconv.Itoa(l.Concurrency))
	}
	if l.Rate > 0 {
		parts = append(parts, "rate="+strconv.FormatFloat(l.Rate, 'f', -1, 64)+"/s")
		if l.Burst > 0 {
			parts = append(parts, "burst="+strconv.Itoa(l.Burst))
		}
	}
	return strings.Join(parts, ",")
}

// ParseLimit reads a limit: "off" (or empty), or comma-separated
// concurrency=N, rate=R[/s|/m|/h] and burst=N, any of them left out.
// A rate per minute or hour is converted to calls a second.
func ParseLimit(s string) (Limit, error) {
	var l Limit
	s = strings.TrimSpace(s)
	if s == "" || s == "off" {
		return l, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Limit{}, fmt.Errorf("%q: want concurrency=N, rate=R[/s|/m|/h] or burst=N", part)
		}
		switch strings.TrimSpace(k) {
		case "concurrency":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return Limit{}, fmt.Errorf("concurrency %q is not a whole number ≥ 0", v)
			}
			l.Concurrency = n
		case "rate":
			r, err := ParseRate(v)
			if err != nil {
				return Limit{}, err
			}
			l.Rate = r
		case "burst":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return Limit{}, fmt.Errorf("burst %q is not a whole number ≥ 0", v)
			}
			l.Burst = n
		default:
			return Limit{}, fmt.Errorf("%q: unknown key %q (concurrency, rate, burst)", part, k)
		}
	}
	return l, nil
}

// ParseRate reads a rate "R", "R/s", "R/m" or "R/h" as calls a second.
func ParseRate(v string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(v), "/")
	r, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("rate %q is not a number ≥ 0", v)
	}
	switch strings.TrimSpace(unit) {
	case "", "s":
	case "m":
		r /= 60
	case "h":
		r /= 3600
	default:
		return 0, fmt.Errorf("rate %q: the unit is /s, /m or /h", v)
	}
	return r, nil
}

// Limits are the limits of each scope. The operator's defaults apply to
// every tenant; a tenant's admins may lower them (Within).
type Limits struct {
	// Tenant bounds all the calls of one tenant.
	Tenant Limit `json:"tenant"`
	// Instance bounds the calls of each app instance.
	Instance Limit `json:"instance"`
	// User bounds the calls made as each user (the call's subject) of
	// each instance.
	User Limit `json:"user"`
	// Connector bounds the calls of each connector across all tenants:
	// the operator's only (a tenant's value is ignored).
	Connector Limit `json:"connector"`
}

// IsZero reports whether no scope is bounded.
func (ls Limits) IsZero() bool {
	return ls.Tenant.IsZero() && ls.Instance.IsZero() && ls.User.IsZero() && ls.Connector.IsZero()
}

// errOverLimit is the refusal of a tenant's limit above the operator's.
func errOverLimit(scope, field string, op float64) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_limits",
		"the %s %s may be at most the operator's, %s (0 keeps the operator's)", scope, field, strconv.FormatFloat(op, 'f', -1, 64))
}

// Check refuses a tenant's limits that are negative or above the
// operator's ops (where the operator set one), or that set the connector
// scope, which is the operator's only.
func (ls Limits) Check(ops Limits) error {
	if !ls.Connector.IsZero() || ls.Connector.Burst != 0 {
		return switchboard.E(switchboard.ErrInvalid, "invalid_limits", "connector limits are set by the operator only")
	}
	for _, s := range []struct {
		name    string
		own, op Limit
	}{{"tenant", ls.Tenant, ops.Tenant}, {"instance", ls.Instance, ops.Instance}, {"user", ls.User, ops.User}} {
		if s.own.Concurrency < 0 || s.own.Rate < 0 || s.own.Burst < 0 || math.IsNaN(s.own.Rate) || math.IsInf(s.own.Rate, 0) {
			return switchboard.E(switchboard.ErrInvalid, "invalid_limits", "the %s limits must not be negative", s.name)
		}
		if s.op.Concurrency > 0 && s.own.Concurrency > s.op.Concurrency {
			return errOverLimit(s.name, "concurrency", float64(s.op.Concurrency))
		}
		if s.op.Rate > 0 && s.own.Rate > s.op.Rate {
			return errOverLimit(s.name, "rate", s.op.Rate)
		}
		if s.op.Rate > 0 && s.own.Burst > s.op.burst() {
			return errOverLimit(s.name, "burst", float64(s.op.burst()))
		}
	}
	return nil
}

// Within is the limits in force for a tenant whose own are ls under the
// operator's ops: per field, the lower of the two that are set.
func (ls Limits) Within(ops Limits) Limits {
	return Limits{Tenant: lower(ls.Tenant, ops.Tenant), Instance: lower(ls.Instance, ops.Instance),
		User: lower(ls.User, ops.User), Connector: ops.Connector}
}

func lower(own, op Limit) Limit {
	out := op
	if own.Concurrency > 0 && (op.Concurrency == 0 || own.Concurrency < op.Concurrency) {
		out.Concurrency = own.Concurrency
	}
	if own.Rate > 0 && (op.Rate == 0 || own.Rate < op.Rate) {
		out.Rate = own.Rate
		out.Burst = 0
		if op.Rate == 0 {
			out.Burst = own.Burst
		}
	}
	if own.Burst > 0 && out.Rate > 0 && own.Burst < out.burst() {
		out.Burst = own.Burst
	}
	return out
}

// retryIn rounds a wait up to a whole millisecond (retryAfterMs), at
// least 1.
func retryIn(d time.Duration) time.Duration {
	return max(time.Millisecond, d.Round(time.Millisecond))
}
