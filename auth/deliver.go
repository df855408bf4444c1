package auth

import (
	"context"
	"time"

	"github.com/switchboardhq/switchboard/secrets"
)

// TokenHolder is an Applier that holds an OAuth token which can be
// handed to a local MCP server (mcp_local's auth.deliver) instead of
// being put on an HTTP request: the access token and when it expires, the
// client it was issued to, and, on demand, the grant's refresh token.
type TokenHolder interface {
	// AccessToken returns the access token and its expiry (zero: none
	// known).
	AccessToken() (secrets.Secret, time.Time)
	// Client returns the OAuth client id and secret and the token URL.
	Client() (id, secret secrets.Secret, tokenURL string)
	// RefreshToken reads the grant's stored refresh token (empty when
	// the grant has none, as with client credentials).
	RefreshToken(ctx context.Context) (secrets.Secret, error)
}

// AccessToken implements TokenHolder.
func (b *bearerApplier) AccessToken() (secrets.Secret, time.Time) { return b.e.access, b.e.expiry }

// Client implements TokenHolder.
func (b *bearerApplier) Client() (secrets.Secret, secrets.Secret, string) {
	return b.c.clientID, b.c.clientSecret, b.c.tokenURL
}

// RefreshToken implements TokenHolder.
func (b *bearerApplier) RefreshToken(ctx context.Context) (secrets.Secret, error) {
	if !b.k.perUser {
		return secrets.Secret{}, nil
	}
	return b.o.store.Token(ctx, b.k.id(), tokenRefresh)
}
