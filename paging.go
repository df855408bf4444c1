package switchboard

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// The page sizes of every list of the /v1 API and of the console: a list
// returns DefaultPageLimit rows unless asked for another limit, and never
// more than MaxPageLimit.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
)

// maxCursor bounds the length of a cursor read from a request.
const maxCursor = 1024

// PageQuery asks for one page of a list: at most Limit rows, after the
// row that Cursor names.
type PageQuery struct {
	// Limit is the page size, 1 to MaxPageLimit; 0 means DefaultPageLimit.
	Limit int
	// Cursor is the NextCursor of the previous page, opaque to clients;
	// empty for the first page.
	Cursor string
}

// ErrInvalidLimit refuses a limit that is not an integer from 1 to
// MaxPageLimit. Out-of-range limits are refused rather than clamped, so
// that a client never gets fewer rows per page than it believes it asked
// for.
var ErrInvalidLimit = E(ErrInvalid, "invalid_limit", "limit must be an integer from 1 to %d", MaxPageLimit)

// ErrInvalidCursor refuses a cursor that the list it is given to did not
// make: forged, truncated, or from another list or tenant.
var ErrInvalidCursor = E(ErrInvalid, "invalid_cursor", "cursor is not one this list gave out: start again from the first page")

// ParsePageQuery reads the limit and cursor parameters of a list request.
// An empty limit is the default; anything but an integer from 1 to
// MaxPageLimit is ErrInvalidLimit. The cursor is checked by the list that
// reads it (PageQuery.After).
func ParsePageQuery(limit, cursor string) (PageQuery, error) {
	q := PageQuery{Cursor: cursor}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxPageLimit {
			return PageQuery{}, ErrInvalidLimit
		}
		q.Limit = n
	}
	if len(cursor) > maxCursor {
		return PageQuery{}, ErrInvalidCursor
	}
	return q, nil
}

// Size is the number of rows the page holds at most.
func (q PageQuery) Size() int {
	if q.Limit <= 0 {
		return DefaultPageLimit
	}
	return min(q.Limit, MaxPageLimit)
}

// After returns the n order keys of the row the cursor continues after,
// or nil when the query has no cursor (the first page). list names the
// list and its scope (such as "callers" and the tenant id): a cursor made
// for another list, another tenant, or with another number of keys is
// ErrInvalidCursor, as is anything NextCursor did not make.
func (q PageQuery) After(list string, n int) ([]string, error) {
	if q.Cursor == "" {
		return nil, nil
	}
	if len(q.Cursor) > maxCursor {
		return nil, ErrInvalidCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil {
		return nil, ErrInvalidCursor
	}
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != n+1 || parts[0] != list {
		return nil, ErrInvalidCursor
	}
	// Only the one encoding NextCursor makes is accepted.
	if NextCursor(list, parts[1:]...) != q.Cursor {
		return nil, ErrInvalidCursor
	}
	return parts[1:], nil
}

// NextCursor is the cursor of the page that continues after the row whose
// order keys are keys, in list: base64url of a JSON array of the list and
// the keys. Opaque to clients, who only pass it back; it carries nothing
// secret (the keys are values the page showed).
func NextCursor(list string, keys ...string) string {
	b, err := json.Marshal(append([]string{list}, keys...))
	if err != nil {
		panic("encoding a cursor of strings: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// All collects every page of a list, MaxPageLimit rows at a time, for the
// few readers that need every row of a bounded list (a page's select of
// the tenant's instances, say); listings shown to people page instead.
func All[T any](page func(PageQuery) ([]T, string, error)) ([]T, error) {
	q := PageQuery{Limit: MaxPageLimit}
	var out []T
	for {
		rows, next, err := page(q)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if next == "" {
			if out == nil {
				out = []T{}
			}
			return out, nil
		}
		q.Cursor = next
	}
}
