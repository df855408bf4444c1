package auth

import (
	"context"
	"errors"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// A token response can arrive while the store dies: the provider has
// rotated the refresh token, and the old one, still stored, is spent (a
// provider that detects reuse revokes the whole grant when it is
// presented again). So a token that could not be saved is kept in memory,
// never logged, and saved again and again until the store is back; no
// other token request is made for its grant meanwhile, and its access
// token is used only once it is saved.
const (
	// unsavedWait is how long a call waits for its token to be saved.
	unsavedWait = 10 * time.Second
	// unsavedKeep is how long an unsaved token is kept retrying; after
	// it, the grant may need reconnecting.
	unsavedKeep = 15 * time.Minute
)

// unsavedToken is a fetched token not yet in the store.
type unsavedToken struct {
	rotated secrets.Secret // the new refresh token, zero if not rotated
	access  secrets.Secret
	issued  time.Time
	expiry  time.Time
	version int64 // the row's version the token replaces

	done chan struct{} // closed when saved, superseded or given up
	err  error         // nil: saved
}

// errSuperseded is an unsaved token's outcome when the grant changed
// meanwhile (another replica wrote a newer token, or the user
// disconnected): the store's state wins.
var errSuperseded = errors.New("the grant changed while its token was unsaved")

func storeUnavailable(err error) error {
	e := switchboard.E(switchboard.ErrUnavailable, "store_unavailable", "the database is temporarily unavailable; retry later")
	e.RetryAfter = switchboard.StoreRetryAfter
	return e.WithCause(err)
}

// keepUnsaved holds tok, which the store failed to save, and saves it in
// the background until the store is back; it returns as keptToken does.
func (o *OAuth) keepUnsaved(ctx context.Context, k grantKey, tok *oauth2.Token, oldRefresh secrets.Secret, version int64,
	now time.Time, fetch fetchFunc) (*cachedToken, error) {
	u := &unsavedToken{access: secrets.New(tok.AccessToken), issued: now, expiry: expiryOf(tok, now), version: version,
		done: make(chan struct{})}
	if k.perUser && tok.RefreshToken != "" && tok.RefreshToken != oldRefresh.Reveal() {
		u.rotated = secrets.New(tok.RefreshToken)
	}
	o.mu.Lock()
	o.unsaved[k.fp] = u
	o.mu.Unlock()
	go o.saveUnsaved(k, u)
	return o.keptToken(ctx, k, u, fetch)
}

// saveUnsaved saves u with backoff until it is saved, superseded, or
// unsavedKeep has passed.
func (o *OAuth) saveUnsaved(k grantKey, u *unsavedToken) {
	defer func() {
		o.mu.Lock()
		delete(o.unsaved, k.fp)
		o.mu.Unlock()
		close(u.done)
	}()
	start, wait := time.Now(), 100*time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := o.store.LockGrant(ctx, k.id(), false, u.issued, func(g *LockedGrant) error {
			if g.Row == nil || g.Row.Version != u.version {
				return errSuperseded
			}
			_, err := g.SaveTokens(ctx, u.rotated, u.access, u.expiry)
			return err
		})
		cancel()
		if err == nil || errors.Is(err, errSuperseded) {
			u.err = err
			return
		}
		if time.Since(start) > unsavedKeep {
			u.err = storeUnavailable(err)
			o.logger.Error("a refreshed token could not be saved while the store was down; the user may need to reconnect",
				"tenant", string(k.tenant), "instance", k.instance.Slug, "mode", k.mode, "err", err.Error())
			return
		}
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

// keptToken waits (at most unsavedWait, or ctx) for u to be saved and
// returns its token; a superseded one yields to what the store holds.
func (o *OAuth) keptToken(ctx context.Context, k grantKey, u *unsavedToken, fetch fetchFunc) (*cachedToken, error) {
	t := time.NewTimer(unsavedWait)
	defer t.Stop()
	select {
	case <-u.done:
	case <-ctx.Done():
		return nil, storeUnavailable(ctx.Err())
	case <-t.C:
		return nil, storeUnavailable(errors.New("a refreshed token is not saved yet"))
	}
	switch {
	case u.err == nil:
		e := &cachedToken{access: u.access, issued: u.issued, expiry: u.expiry, version: u.version + 1}
		if !u.rotated.IsZero() {
			e.fetched = []secrets.Secret{u.rotated}
		}
		o.remember(k.fp, e)
		return e, nil
	case errors.Is(u.err, errSuperseded):
		return o.obtain(ctx, k, fetch)
	}
	return nil, u.err
}

// unsavedOf returns k's unsaved token, if any.
func (o *OAuth) unsavedOf(k grantKey) *unsavedToken {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.unsaved[k.fp]
}
