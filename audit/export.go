package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/switchboardhq/switchboard"
)

// Export writes every row q selects (its Limit and Cursor are ignored) to
// w as NDJSON, one Entry a line, newest first: for archiving before
// retention deletes them. It reads the rows a page of MaxLimit at a time
// in the (time, id) keyset order, so memory does not grow with the
// tenant's history and no row is skipped or repeated, and calls flush
// (when not nil) after each page. It returns how many rows it wrote.
func (s *Store) Export(ctx context.Context, tenant switchboard.TenantID, q Query, w io.Writer, flush func()) (int64, error) {
	q.Limit, q.Cursor = MaxLimit, ""
	enc := json.NewEncoder(w)
	var n int64
	for {
		p, err := s.Page(ctx, tenant, q)
		if err != nil {
			return n, err
		}
		for i := range p.Entries {
			if err := enc.Encode(&p.Entries[i]); err != nil {
				return n, fmt.Errorf("exporting audit rows: %w", err)
			}
			n++
		}
		if flush != nil {
			flush()
		}
		if p.Older == "" {
			return n, nil
		}
		q.Cursor = p.Older
	}
}
