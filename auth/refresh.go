package auth

import (
	"context"
	"errors"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// reconnectMemory is how long a replica remembers that a grant needs
// reconnecting before it reads the store again.
const reconnectMemory = 10 * time.Second

// obtain runs once per key at a time in this process.
func (o *OAuth) obtain(ctx context.Context, k grantKey, fetch fetchFunc) (*cachedToken, error) {
	now := o.now()
	o.mu.RLock()
	e := o.mem[k.fp]
	o.mu.RUnlock()
	if e != nil && !e.reconnect && o.fresh(e.issued, e.expiry, now) {
		return e, nil
	}
	// A token fetched while the store failed is saved before anything
	// else happens to the grant.
	if u := o.unsavedOf(k); u != nil {
		return o.keptToken(ctx, k, u, fetch)
	}
	// Unlocked read: another replica, or this one before a restart, may
	// hold a fresh token.
	row, err := o.store.Grant(ctx, k.id())
	if err != nil {
		return nil, err
	}
	if row == nil && k.perUser {
		return nil, errNoGrant
	}
	if row != nil && row.Status == StatusReconnectRequired {
		o.remember(k.fp, &cachedToken{reconnect: true, until: now.Add(reconnectMemory)})
		return nil, errReconnect
	}
	if row != nil && o.fresh(row.UpdatedAt, row.ExpiresAt, now) {
		if e := o.stored(ctx, k, row); e != nil {
			o.remember(k.fp, e)
			return e, nil
		}
	}
	if row != nil && row.RetryAt.After(now) {
		return nil, o.backingOff(k, row.Failure, row.RetryAt, now)
	}
	return o.refreshLocked(ctx, k, fetch)
}

// backingOff remembers that k's token requests wait until retryAt after
// a failure with code, and returns the error calls get meanwhile.
func (o *OAuth) backingOff(k grantKey, code string, retryAt, now time.Time) error {
	o.remember(k.fp, &cachedToken{failure: code, until: retryAt})
	return backoffError(code, retryAt.Sub(now))
}

// stored returns the grant's stored access token as of row, or nil when
// it cannot be read.
func (o *OAuth) stored(ctx context.Context, k grantKey, row *Grant) *cachedToken {
	access, err := o.store.Token(ctx, k.id(), tokenAccess)
	if err != nil {
		return nil
	}
	return &cachedToken{access: access, issued: row.UpdatedAt, expiry: row.ExpiresAt, version: row.Version}
}

// refreshLocked takes the grant's lock, re-reads, and fetches a new token
// only if the stored one is still stale.
func (o *OAuth) refreshLocked(ctx context.Context, k grantKey, fetch fetchFunc) (*cachedToken, error) {
	var out *cachedToken
	var outErr error
	// fetched is a token the endpoint gave, with what it replaces, in
	// case the store fails before it is saved.
	var (
		fetched    *oauth2.Token
		oldRefresh secrets.Secret
		oldVersion int64
		fetchedAt  time.Time
	)
	err := o.store.LockGrant(ctx, k.id(), !k.perUser, o.now(), func(g *LockedGrant) error {
		now := o.now()
		row := g.Row
		if row == nil {
			outErr = errNoGrant
			return nil
		}
		if row.Status == StatusReconnectRequired {
			outErr = errReconnect
			return nil
		}
		if o.fresh(row.UpdatedAt, row.ExpiresAt, now) {
			if out = o.stored(ctx, k, row); out != nil {
				return nil
			}
		}
		// Another replica's request failed meanwhile: wait as it does.
		if row.RetryAt.After(now) {
			outErr = o.backingOff(k, row.Failure, row.RetryAt, now)
			return nil
		}
		var refresh secrets.Secret
		if k.perUser {
			var err error
			refresh, err = o.store.Token(ctx, k.id(), tokenRefresh)
			if errors.Is(err, switchboard.ErrNotFound) {
				outErr = errReconnect
				return o.markReconnect(ctx, g, k)
			}
			if err != nil {
				return err
			}
		}
		o.tokenRequests.Add(1)
		tok, ferr := fetch(ctx, refresh)
		kind := "fetch"
		if !refresh.IsZero() {
			kind = "refresh"
		}
		if ferr != nil {
			o.metrics.Token(k.mode, kind, tokenErrorCode(ferr))
		} else {
			o.metrics.Token(k.mode, kind, "ok")
		}
		if ferr != nil {
			if k.perUser && tokenErrorCode(ferr) == "invalid_grant" {
				// Re-read: a changed token means another replica won.
				again, err := g.Reread(ctx)
				if err != nil {
					return err
				}
				if again != nil && again.Version != row.Version && o.fresh(again.UpdatedAt, again.ExpiresAt, now) {
					if out = o.stored(ctx, k, again); out != nil {
						return nil
					}
				}
				outErr = errReconnect
				return o.markReconnect(ctx, g, k)
			}
			if _, ok := switchboard.AsError(ferr); ok {
				// Our own configuration failed (a key that does not sign),
				// not the endpoint: nothing to back off from.
				return ferr
			}
			// Every replica waits before the next request of this grant.
			code := tokenErrorCode(ferr)
			retryAt := now.Add(backoffDelay(row.Failures + 1))
			o.logger.Warn("token request failed; backing off", "tenant", string(k.tenant), "instance", k.instance.Slug,
				"mode", k.mode, "code", code, "failures", row.Failures+1, "retry_at", retryAt)
			outErr = o.backingOff(k, code, retryAt, now)
			return g.RecordFailure(ctx, code, retryAt)
		}
		if tok.AccessToken != "" {
			fetched, oldRefresh, oldVersion, fetchedAt = tok, refresh, row.Version, now
		}
		e, err := o.save(ctx, g, k, tok, refresh, now)
		if err != nil {
			return err
		}
		out = e
		return nil
	})
	if err != nil && fetched != nil {
		// The store failed after the endpoint answered: keep the token.
		return o.keepUnsaved(ctx, k, fetched, oldRefresh, oldVersion, fetchedAt, fetch)
	}
	if err == nil && outErr != nil {
		if errors.Is(outErr, errReconnect) {
			o.remember(k.fp, &cachedToken{reconnect: true, until: o.now().Add(reconnectMemory)})
		}
		return nil, outErr
	}
	if err != nil {
		return nil, err
	}
	o.remember(k.fp, out)
	return out, nil
}

// markReconnect marks the locked grant reconnect_required.
func (o *OAuth) markReconnect(ctx context.Context, g *LockedGrant, k grantKey) error {
	if err := g.MarkReconnect(ctx); err != nil {
		return err
	}
	o.logger.Info("grant needs reconnecting", "tenant", string(k.tenant), "instance", k.instance.Slug, "mode", k.mode)
	return nil
}

// defaultLifetime is assumed for a token the server gave no expiry.
const defaultLifetime = time.Hour

// expiryOf is when tok expires, counted from this server's clock
// (golang.org/x/oauth2 stamps Expiry with the wall clock).
func expiryOf(tok *oauth2.Token, now time.Time) time.Time {
	switch {
	case tok.ExpiresIn > 0:
		return now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	case !tok.Expiry.IsZero():
		return now.Add(time.Until(tok.Expiry))
	}
	return now.Add(defaultLifetime)
}

var errNoAccessToken = switchboard.E(switchboard.ErrUnavailable, "token_request_failed", "the token endpoint answered without an access token")

// save writes a new token inside the locked transaction: the rotated
// refresh token first, then the access token and the row. It commits with
// the transaction, before the access token is used.
func (o *OAuth) save(ctx context.Context, g *LockedGrant, k grantKey, tok *oauth2.Token, oldRefresh secrets.Secret, now time.Time) (*cachedToken, error) {
	if tok.AccessToken == "" {
		return nil, errNoAccessToken
	}
	expiry := expiryOf(tok, now)
	var rotated secrets.Secret
	if k.perUser && tok.RefreshToken != "" && tok.RefreshToken != oldRefresh.Reveal() {
		rotated = secrets.New(tok.RefreshToken)
	}
	access := secrets.New(tok.AccessToken)
	version, err := g.SaveTokens(ctx, rotated, access, expiry)
	if err != nil {
		return nil, err
	}
	return &cachedToken{access: access, issued: now, expiry: expiry, version: version, fetched: inPlay(tok, oldRefresh)}, nil
}

// assertionExtra carries the JWT assertion a token was obtained with on
// the token (oauth2.Token.WithExtra), for SecretsInPlay.
const assertionExtra = "switchboard.assertion"

// inPlay are the secrets besides the access token of the request that
// obtained tok: the refresh token sent, the one received, the assertion.
func inPlay(tok *oauth2.Token, sent secrets.Secret) []secrets.Secret {
	var out []secrets.Secret
	if !sent.IsZero() {
		out = append(out, sent)
	}
	if tok.RefreshToken != "" && tok.RefreshToken != sent.Reveal() {
		out = append(out, secrets.New(tok.RefreshToken))
	}
	if a, _ := tok.Extra(assertionExtra).(string); a != "" {
		out = append(out, secrets.New(a))
	}
	return out
}

// reject drops a token the upstream refused, here and in the store (if it
// is still the stored one), so that the next call obtains a new one.
func (o *OAuth) reject(ctx context.Context, k grantKey, version int64) {
	o.forget(k.fp)
	if err := o.store.MarkStale(ctx, k.id(), version); err != nil {
		o.logger.Warn("marking a refused token stale", "err", err.Error())
	}
}
