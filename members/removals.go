package members

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/switchboardhq/switchboard"
)

// RemovalsChannel is the Postgres NOTIFY channel on which a replica tells
// the others that a member was removed, so that they drop what they
// cached about that member at once.
const RemovalsChannel = "switchboard_member_removals"

// Removal is a member's removal, as delivered to OnRemoval's functions.
type Removal struct {
	Tenant switchboard.TenantID `json:"tenant,omitempty"`
	UserID string               `json:"user_id,omitempty"`
	// All says that removals may have been missed (this replica's
	// listener (re)connected): drop everything cached about members.
	All bool `json:"all,omitempty"`
}

// OnRemoval registers fn, called after every committed removal: at once
// for those made through this store, and, while Listen runs, for those
// other replicas make. Register before serving.
func (s *Store) OnRemoval(fn func(Removal)) {
	s.removalMu.Lock()
	defer s.removalMu.Unlock()
	s.onRemoval = append(s.onRemoval, fn)
}

// publish logs r inside tx, the removal's own transaction, and so tells
// the other replicas when it commits, never if it rolls back
// (database.DB.LogChangeTx): a replica whose listener was away reads it
// from the log.
func (s *Store) publish(ctx context.Context, tx *sql.Tx, r Removal) error {
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.db.LogChangeTx(ctx, tx, RemovalsChannel, payload)
	return err
}

func (s *Store) deliver(r Removal) {
	s.removalMu.RLock()
	fns := slices.Clone(s.onRemoval)
	s.removalMu.RUnlock()
	for _, fn := range fns {
		fn(r)
	}
}

// MarkRemovals notes where the change log stands, before anything is
// cached: the listener's first connection then replays the removals made
// since instead of delivering Removal{All: true}.
func (s *Store) MarkRemovals(ctx context.Context) error { return s.removals.Mark(ctx) }

// Listen delivers the removals other replicas make to OnRemoval's
// functions until ctx is done. After every connection of its listener it
// replays the removals logged since the last one heard (or since
// MarkRemovals); only when it cannot does it deliver Removal{All: true}.
// It returns at once on the embedded store. Run it in its own goroutine.
func (s *Store) Listen(ctx context.Context, onError func(error)) {
	s.removals.Listen(ctx, func(payload string) {
		var r Removal
		if err := json.Unmarshal([]byte(payload), &r); err != nil || r.UserID == "" {
			r = Removal{All: true}
		}
		s.deliver(r)
	}, func() { s.deliver(Removal{All: true}) }, onError)
}
