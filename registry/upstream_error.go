package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/egress"
)

// UpstreamError is the typed, secret-free form of a vendor's failure: its
// Code is one of reconnect_required, forbidden, not_found, rate_limited,
// upstream_unavailable, upstream_rejected and egress_refused, and it
// unwraps to the matching error kind of the vocabulary (and to Cause).
type UpstreamError struct {
	Code string
	// Status is the upstream HTTP status, or 0 when no answer came.
	Status int
	// RetryAfter is how long to wait before retrying (rate_limited).
	RetryAfter time.Duration
	// Message is a bounded, client-safe sentence. It holds at most a short,
	// sanitized excerpt of the vendor's own error message, never the body.
	Message string
	// Cause, when set, is the internal cause, for logs (such as the
	// egress guard's refusal with the resolved address); never rendered.
	Cause error
}

// Error implements error.
func (e *UpstreamError) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the vocabulary kind of the error's code, for errors.Is,
// and the cause when there is one.
func (e *UpstreamError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.kind(), e.Cause}
	}
	return []error{e.kind()}
}

// kind is the vocabulary kind of the error's code.
func (e *UpstreamError) kind() error {
	if k := switchboard.KindOf(e.Code); k != nil {
		return k
	}
	return switchboard.ErrUnavailable
}

// TypedError renders e through the error table: an upstream's own 4xx
// status (other than a rate limit) is passed through, anything else takes
// the code's status (429 rate_limited, 502 upstream_unavailable, ...).
func (e *UpstreamError) TypedError() *switchboard.Error {
	t := &switchboard.Error{Kind: e.kind(), Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	if e.Status >= 400 && e.Status < 500 && e.Code != "rate_limited" {
		t.Status = e.Status
	}
	return t
}

// EgressRefused returns the typed egress_refused error when err's chain
// holds the egress guard's refusal of the upstream's address: its message
// names the rule (loopback, private, link-local, metadata, ...) and never
// the resolved address, which stays in Cause for the operator's log.
func EgressRefused(err error) (*UpstreamError, bool) {
	re, ok := egress.Refusal(err)
	if !ok {
		return nil, false
	}
	return &UpstreamError{Code: "egress_refused", Cause: re, Message: fmt.Sprintf(
		"the server's outbound policy refuses the upstream's address (rule: %s); an operator can allow it with SWITCHBOARD_ALLOW_UPSTREAM_CIDRS",
		re.Rule)}, true
}

// maxExcerpt bounds the vendor message excerpt in an UpstreamError.
const maxExcerpt = 200

// NewUpstreamError maps a non-2xx upstream answer to an UpstreamError. Only
// the vendor's error message field is looked at in body, and only a short,
// sanitized excerpt of it is kept (for statuses the agent can act on).
func NewUpstreamError(status int, header http.Header, body []byte) *UpstreamError {
	e := &UpstreamError{Status: status}
	retry, hasRetry := retryAfter(header.Get("Retry-After"), time.Now())
	switch {
	case status == http.StatusUnauthorized:
		e.Code = "reconnect_required"
		e.Message = "the upstream service rejected the app's credentials; reconnect the app"
	case status == http.StatusForbidden:
		e.Code = "forbidden"
		e.Message = "the upstream service denied access to this resource"
	case status == http.StatusNotFound:
		e.Code = "not_found"
		e.Message = "the upstream service found no such resource"
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable && hasRetry:
		e.Code = "rate_limited"
		if !hasRetry {
			retry = time.Second
		}
		e.RetryAfter = retry
		e.Message = fmt.Sprintf("the upstream service is rate limiting; retry after %s", retry.Round(time.Second))
	case status >= 500:
		e.Code = "upstream_unavailable"
		e.Message = fmt.Sprintf("the upstream service failed with status %d", status)
	default:
		e.Code = "upstream_rejected"
		e.Message = fmt.Sprintf("the upstream service rejected the request with status %d", status)
		if x := vendorMessage(body); x != "" {
			e.Message += ": " + x
		}
	}
	return e
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
// Delays are bounded to a day.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(min(n, 86400)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, 24*time.Hour), true
}

// vendorMessage extracts a short, sanitized excerpt of the error message of
// a JSON error body: "message", "error.message", "error" (a string),
// "errors[0].message" or "error_description". Anything else in the body
// is ignored.
func vendorMessage(body []byte) string {
	if len(body) == 0 || len(body) > 1<<20 {
		return ""
	}
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	pick := func(m map[string]any, k string) string {
		s, _ := m[k].(string)
		return s
	}
	msg := pick(v, "message")
	if msg == "" {
		switch er := v["error"].(type) {
		case map[string]any:
			msg = pick(er, "message")
		case string:
			msg = er
		}
	}
	if msg == "" {
		if list, ok := v["errors"].([]any); ok && len(list) > 0 {
			if m, ok := list[0].(map[string]any); ok {
				msg = pick(m, "message")
			}
		}
	}
	if msg == "" {
		msg = pick(v, "error_description")
	}
	return sanitize(msg, maxExcerpt)
}

// sanitize strips control characters, collapses white space and bounds s
// to n runes.
func sanitize(s string, n int) string {
	var b strings.Builder
	space := false
	count := 0
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if count >= n {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			count++
			space = false
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}
