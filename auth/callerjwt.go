package auth

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/tenants"
)

// CallerJWT verifies caller JWTs signed by the platform (an agent platform,
// a cron service, knowledge sync). A token is accepted when its signature
// verifies under one of Keys, its issuer and audience match, it carries an
// expiry, has not expired and lives at most MaxLifetime. Its claims name
// the caller:
//
//	sub       the end user the call is made for
//	tenant    the tenant's slug (must be the URL's tenant)
//	agent_id  the agent (else the X-Agent-Id header, for agent platforms)
//	source    the caller kind: agent-platform (default), cron, knowledge-sync
//	trusted   true lets the caller act for a targetUserId
type CallerJWT struct {
	Issuer   string
	Audience string
	// Keys are the platform's public keys (RSA, ECDSA or Ed25519).
	Keys []crypto.PublicKey
	// Leeway tolerates clock skew; default 30 s.
	Leeway time.Duration
	// MaxLifetime is the longest a token may live, from its iat (or from
	// now when it has none) to its exp; default DefaultCallerJWTMaxLifetime.
	// A long-lived token is a standing credential; platforms mint short
	// ones per call.
	MaxLifetime time.Duration
}

// DefaultCallerJWTMaxLifetime is CallerJWT.MaxLifetime's default.
const DefaultCallerJWTMaxLifetime = time.Hour

// ParsePublicKeys reads every PUBLIC KEY (PKIX) or CERTIFICATE block of
// PEM data.
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing a public key: %w", err)
			}
			keys = append(keys, k)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing an RSA public key: %w", err)
			}
			keys = append(keys, k)
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing a certificate: %w", err)
			}
			keys = append(keys, cert.PublicKey)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no PUBLIC KEY or CERTIFICATE block found")
	}
	return keys, nil
}

type callerClaims struct {
	jwt.RegisteredClaims
	Tenant  string `json:"tenant"`
	AgentID string `json:"agent_id"`
	Source  string `json:"source"`
	Trusted bool   `json:"trusted"`
}

// looksLikeJWT reports whether token has the shape of a JWS compact
// serialisation; API keys issued by Switchboard never do.
func looksLikeJWT(token string) bool {
	return strings.HasPrefix(token, "eyJ") && strings.Count(token, ".") == 2
}

func (v *CallerJWT) verificationKeys() jwt.VerificationKeySet {
	set := jwt.VerificationKeySet{}
	for _, k := range v.Keys {
		set.Keys = append(set.Keys, k)
	}
	return set
}

func (v *CallerJWT) parse(token string) (*callerClaims, error) {
	leeway := v.Leeway
	if leeway == 0 {
		leeway = 30 * time.Second
	}
	methods := []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
	claims := &callerClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return v.verificationKeys(), nil
	}, jwt.WithIssuer(v.Issuer), jwt.WithAudience(v.Audience), jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(), jwt.WithLeeway(leeway))
	if err != nil {
		return nil, err
	}
	maxLife := v.MaxLifetime
	if maxLife <= 0 {
		maxLife = DefaultCallerJWTMaxLifetime
	}
	exp := claims.ExpiresAt.Time
	from := time.Now()
	if claims.IssuedAt != nil {
		from = claims.IssuedAt.Time
	}
	if exp.Sub(from) > maxLife || time.Until(exp) > maxLife+leeway {
		return nil, errTooLongLived
	}
	return claims, nil
}

var errTooLongLived = errors.New("caller JWT lives longer than allowed")

// Verify checks a caller JWT and returns its claims' identity (tenant
// slug, user, agent, caller kind, trusted).
func (v *CallerJWT) Verify(token string) (tenant, user, agent, kind string, trusted bool, err error) {
	c, err := v.parse(token)
	if err != nil {
		return "", "", "", "", false, errBadCredential
	}
	kind = c.Source
	if kind == "" {
		kind = tenants.KindAgentPlatform
	}
	if !tenants.ValidKind(kind) {
		return "", "", "", "", false, errBadCredential
	}
	if len(c.Subject) > maxIdentity || len(c.AgentID) > maxIdentity {
		return "", "", "", "", false, errBadCredential
	}
	return c.Tenant, c.Subject, c.AgentID, kind, c.Trusted, nil
}

// authenticateJWT resolves a platform-signed caller JWT.
func (c *Callers) authenticateJWT(ctx context.Context, r *http.Request, token, tenantSlug string) (*Principal, error) {
	slug, user, agent, kind, trusted, err := c.jwt.Verify(token)
	if err != nil {
		return nil, err
	}
	if slug != tenantSlug {
		return nil, errBadCredential
	}
	c.mu.RLock()
	t := c.tenants[slug]
	c.mu.RUnlock()
	if t == nil {
		t, err = c.store.Tenant(ctx, slug)
		if errors.Is(err, switchboard.ErrNotFound) {
			return nil, errBadCredential
		}
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.tenants == nil {
			c.tenants = map[string]*tenants.Tenant{}
		}
		c.tenants[slug] = t
		c.mu.Unlock()
	}
	p := &Principal{
		Tenant:     t.ID,
		TenantSlug: t.Slug,
		Caller: &tenants.Caller{ID: switchboard.CallerID("jwt:" + kind), TenantID: t.ID, Name: "platform JWT",
			Kind: kind, Trusted: trusted, AgentID: agent, UserID: user, UserMode: tenants.UserJWT},
		AgentID: agent,
		UserID:  user,
		Trusted: trusted,
		Kind:    kind,
	}
	if kind == tenants.KindAgentPlatform && p.AgentID == "" {
		p.AgentID = identityHeader(r, HeaderAgentID)
	}
	// A caller JWT carries its user (sub): X-User-Id is refused.
	if _, sent := headerUser(r); sent {
		return nil, errUserAssertionRefused
	}
	if err := c.checkNamed(ctx, p, p.UserID); err != nil {
		return nil, err
	}
	return p, nil
}
