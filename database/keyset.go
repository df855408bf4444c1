package database

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
)

// Row is what a scan function of one row reads: *sql.Row or *sql.Rows.
type Row = interface{ Scan(...any) error }

// Key is one column of a list's order.
type Key struct {
	// Col is the column (as the query's SELECT can name it).
	Col string
	// Time says the column is a timestamp; other keys are text.
	Time bool
}

// Keyset is the order a list is paged in: columns whose last one is
// unique (within the list), so that the order is total, all ascending or
// all descending. Paging is keyset-based — each page continues after the
// row-value of the previous page's last row — never OFFSET, so a walk
// through every page returns every row once, rows that share a timestamp
// included, and every page costs one index range scan (each Keyset needs
// an index on (scope columns..., Keys...) on both stores).
type Keyset struct {
	Keys []Key
	Desc bool
}

// Page runs query, a SELECT of a list's rows with its own WHERE clause
// (args numbered $1 up) and no ORDER BY or LIMIT, for the page q asks
// for, in ks order. list names the list and its scope (such as
// "callers:" and the tenant id), so that a cursor of one list or tenant is
// refused by another (switchboard.ErrInvalidCursor); the part before the
// colon names the list in errors. scan reads one row;
// keys returns a row's values of ks.Keys, a time.Time for a time key and
// a string otherwise. Page returns the rows and the cursor of the next
// page, empty when there is none.
func Page[T any](ctx context.Context, db Querier, list string, ks Keyset, q switchboard.PageQuery,
	query string, args []any, scan func(Row) (T, error), keys func(T) []any) ([]T, string, error) {
	after, err := q.After(list, len(ks.Keys))
	if err != nil {
		return nil, "", err
	}
	cols := make([]string, len(ks.Keys))
	for i, k := range ks.Keys {
		cols[i] = k.Col
	}
	dir := " ASC"
	if ks.Desc {
		dir = " DESC"
	}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if after != nil {
		ps := make([]string, len(after))
		for i, v := range after {
			if !ks.Keys[i].Time {
				ps[i] = arg(v)
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, "", switchboard.ErrInvalidCursor
			}
			ps[i] = arg(t.UTC())
		}
		op := " > "
		if ks.Desc {
			op = " < "
		}
		// A row-value comparison, which both stores match to the index
		// on the order's columns.
		query += " AND (" + strings.Join(cols, ", ") + ")" + op + "(" + strings.Join(ps, ", ") + ")"
	}
	size := q.Size()
	// One row more than the page says whether there is a page beyond.
	query += " ORDER BY " + strings.Join(cols, dir+", ") + dir + " LIMIT " + arg(size+1)
	what, _, _ := strings.Cut(list, ":")
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("listing %s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, "", fmt.Errorf("listing %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("listing %s: %w", what, err)
	}
	if len(out) <= size {
		return out, "", nil
	}
	out = out[:size]
	vals := keys(out[size-1])
	next := make([]string, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case time.Time:
			next[i] = v.UTC().Format(time.RFC3339Nano)
		case string:
			next[i] = v
		default:
			panic(fmt.Sprintf("database.Page: key of type %T", v))
		}
	}
	return out, switchboard.NextCursor(list, next...), nil
}

// NewestFirst is the order of the lists of things made over time: by
// created_at, newest first, ties broken by id.
var NewestFirst = Keyset{Keys: []Key{{Col: "created_at", Time: true}, {Col: "id"}}, Desc: true}

// By is the order by one text column that is unique in the list (a slug,
// an email), ascending.
func By(col string) Keyset { return Keyset{Keys: []Key{{Col: col}}} }
