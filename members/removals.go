package members

import (
	"context"
	"encoding/json"
	"slices"
	"time"

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

// announce delivers r on this replica and publishes it to the others
// (nothing to publish on the embedded store). The removal is committed
// already; a failed publication goes to Listen's error handler.
func (s *Store) announce(r Removal) {
	s.deliver(r)
	payload, err := json.Marshal(r)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.db.Notify(ctx, RemovalsChannel, string(payload)); err != nil {
		if onError := s.onNotifyError.Load(); onError != nil {
			(*onError)(err)
		}
	}
}

func (s *Store) deliver(r Removal) {
	s.removalMu.RLock()
	fns := slices.Clone(s.onRemoval)
	s.removalMu.RUnlock()
	for _, fn := range fns {
		fn(r)
	}
}

// Listen delivers the removals other replicas make to OnRemoval's
// functions until ctx is done; after every (re)connection of its
// listener it delivers Removal{All: true}, since removals made meanwhile
// were not heard. It returns at once on the embedded store. Run it in its
// own goroutine.
func (s *Store) Listen(ctx context.Context, onError func(error)) {
	if onError != nil {
		s.onNotifyError.Store(&onError)
	}
	s.db.Listen(ctx, RemovalsChannel, func(payload string) {
		var r Removal
		if err := json.Unmarshal([]byte(payload), &r); err != nil || r.UserID == "" {
			r = Removal{All: true}
		}
		s.deliver(r)
	}, func() { s.deliver(Removal{All: true}) }, onError)
}
