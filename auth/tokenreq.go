package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// tokenErrorCodes are the RFC 6749 (and RFC 7009) error codes a token
// endpoint failure may surface; anything else is "unexpected_response".
var tokenErrorCodes = map[string]bool{
	"invalid_request":         true,
	"invalid_client":          true,
	"invalid_grant":           true,
	"unauthorized_client":     true,
	"unsupported_grant_type":  true,
	"invalid_scope":           true,
	"access_denied":           true,
	"server_error":            true,
	"temporarily_unavailable": true,
	"unsupported_token_type":  true,
}

// tokenEndpointError is a token endpoint's refusal, reduced to an
// allow-listed code. It never holds the provider's body.
type tokenEndpointError struct {
	code   string
	status int
}

func (e *tokenEndpointError) Error() string { return "token endpoint: " + e.code }

// asTokenError reduces an error of golang.org/x/oauth2 (whose text holds
// the provider's body) to a tokenEndpointError.
func asTokenError(err error) error {
	if err == nil {
		return nil
	}
	var te *tokenEndpointError
	if errors.As(err, &te) {
		return te
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if !tokenErrorCodes[code] {
			code = "unexpected_response"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &tokenEndpointError{code: code, status: status}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &tokenEndpointError{code: "timeout"}
	}
	return &tokenEndpointError{code: "unreachable"}
}

func tokenErrorCode(err error) string {
	var te *tokenEndpointError
	if errors.As(asTokenError(err), &te) {
		return te.code
	}
	return ""
}

// tokenError is the client-safe error of a failed token request.
func tokenError(err error) *switchboard.Error { return tokenErrorOf(tokenErrorCode(err)) }

// tokenErrorOf is the client-safe error of a token request that failed
// with code (an allow-listed RFC 6749 code, "unreachable" or "timeout").
func tokenErrorOf(code string) *switchboard.Error {
	switch code {
	case "unreachable", "timeout":
		return switchboard.E(switchboard.ErrUnavailable, "token_endpoint_unavailable",
			"the provider's token endpoint could not be reached")
	}
	return switchboard.E(switchboard.ErrUnavailable, "token_request_failed",
		"the provider's token endpoint refused the request: %s", code)
}

// backoffError is the error of a grant whose token requests are backed
// off after the failure code, for another wait.
func backoffError(code string, wait time.Duration) error {
	e := tokenErrorOf(code)
	e.RetryAfter = max(wait, time.Millisecond)
	return e
}

// Backoff of a grant's failed token requests: the n-th failure in a row
// defers the next request by a random delay in [d/2, d], d =
// backoffBase * 2^(n-1) up to backoffMax. The jitter spreads replicas and
// grants that failed together.
const (
	backoffBase = time.Second
	backoffMax  = 5 * time.Minute
)

func backoffDelay(failures int) time.Duration {
	d := backoffMax
	if failures < 20 {
		d = min(backoffMax, backoffBase<<max(failures-1, 0))
	}
	return d/2 + mrand.N(d/2+1)
}

func (o *OAuth) clientCredentials(ctx context.Context, c *clientConfig) (*oauth2.Token, error) {
	cc := clientcredentials.Config{
		ClientID: c.clientID.Reveal(), ClientSecret: c.clientSecret.Reveal(), TokenURL: c.tokenURL,
		Scopes: strings.Fields(c.scopes), AuthStyle: c.authStyle,
	}
	if c.audience != "" {
		cc.EndpointParams = url.Values{"audience": {c.audience}}
	}
	if cc.AuthStyle == oauth2.AuthStyleAutoDetect {
		cc.AuthStyle = oauth2.AuthStyleInHeader
	}
	tok, err := cc.Token(o.httpContext(ctx))
	return tok, asTokenError(err)
}

func (c *clientConfig) oauth2Config(redirectURI string) *oauth2.Config {
	style := c.authStyle
	if style == oauth2.AuthStyleAutoDetect {
		// Auto-detection retries a refused request: one request per try
		// is what the refresh lock counts on.
		style = oauth2.AuthStyleInHeader
	}
	return &oauth2.Config{
		ClientID: c.clientID.Reveal(), ClientSecret: c.clientSecret.Reveal(),
		Endpoint:    oauth2.Endpoint{AuthURL: c.authorizeURL, TokenURL: c.tokenURL, AuthStyle: style},
		RedirectURL: redirectURI, Scopes: strings.Fields(c.scopes),
	}
}

func (o *OAuth) refresh(ctx context.Context, c *clientConfig, refresh secrets.Secret) (*oauth2.Token, error) {
	cfg := c.oauth2Config("")
	tok, err := cfg.TokenSource(o.httpContext(ctx), &oauth2.Token{RefreshToken: refresh.Reveal()}).Token()
	return tok, asTokenError(err)
}

// maxAssertionLife bounds a JWT assertion's lifetime (RFC 7523 §3).
const maxAssertionLife = 5 * time.Minute

// jwtGrantType is RFC 7523's grant type.
const jwtGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// assertion signs an RFC 7523 assertion with the instance's private key.
func (o *OAuth) assertion(c *clientConfig) (string, error) {
	pemKey := []byte(c.privateKey.Reveal())
	var key any
	var method jwt.SigningMethod
	if k, err := jwt.ParseRSAPrivateKeyFromPEM(pemKey); err == nil {
		key, method = k, jwt.SigningMethodRS256
	} else if k, err := jwt.ParseECPrivateKeyFromPEM(pemKey); err == nil {
		key, method = k, jwt.SigningMethodES256
		switch k.Curve.Params().BitSize {
		case 384:
			method = jwt.SigningMethodES384
		case 521:
			method = jwt.SigningMethodES512
		}
	} else {
		return "", switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the app instance's %s is not a PEM RSA or ECDSA private key", FieldPrivateKey)
	}
	var jti [16]byte
	rand.Read(jti[:])
	now := o.now()
	claims := jwt.MapClaims{
		"iss": c.issuer,
		"aud": c.jwtAud,
		"iat": now.Unix(),
		"exp": now.Add(maxAssertionLife).Unix(),
		"jti": hex.EncodeToString(jti[:]),
	}
	if c.subject != "" {
		claims["sub"] = c.subject
	}
	if c.scopes != "" {
		claims["scope"] = c.scopes
	}
	t := jwt.NewWithClaims(method, claims)
	if c.keyID != "" {
		t.Header["kid"] = c.keyID
	}
	s, err := t.SignedString(key)
	if err != nil {
		return "", switchboard.E(switchboard.ErrInvalid, "invalid_config", "the JWT assertion could not be signed")
	}
	return s, nil
}

// jwtBearer runs the RFC 7523 JWT bearer grant.
func (o *OAuth) jwtBearer(ctx context.Context, c *clientConfig) (*oauth2.Token, error) {
	a, err := o.assertion(c)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {jwtGrantType}, "assertion": {a}}
	if c.scopes != "" {
		form.Set("scope", c.scopes)
	}
	var basic *[2]string
	switch c.jwtClientAuth {
	case ClientAuthBasic:
		basic = &[2]string{c.clientID.Reveal(), c.clientSecret.Reveal()}
	case ClientAuthPost:
		form.Set("client_id", c.clientID.Reveal())
		form.Set("client_secret", c.clientSecret.Reveal())
	default:
		// A public client still names itself (RFC 6749 §3.2.1).
		if !c.clientID.IsZero() {
			form.Set("client_id", c.clientID.Reveal())
		}
	}
	tok, err := o.postToken(ctx, c.tokenURL, form, basic)
	if err != nil {
		return nil, err
	}
	return tok.WithExtra(map[string]any{assertionExtra: a}), nil
}

// maxTokenResponse caps a token endpoint's answer.
const maxTokenResponse = 64 << 10

// postToken sends a token request and parses the answer. Only the error
// code of a refusal is kept.
func (o *OAuth) postToken(ctx context.Context, tokenURL string, form url.Values, basic *[2]string) (*oauth2.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &tokenEndpointError{code: "unreachable"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, asTokenError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return nil, &tokenEndpointError{code: "unreachable"}
	}
	var tr struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		RefreshToken string          `json:"refresh_token"`
		ExpiresIn    json.RawMessage `json:"expires_in"`
		Error        string          `json:"error"`
	}
	_ = json.Unmarshal(body, &tr)
	if resp.StatusCode < 200 || resp.StatusCode > 299 || tr.AccessToken == "" {
		code := tr.Error
		if !tokenErrorCodes[code] {
			code = "unexpected_response"
		}
		return nil, &tokenEndpointError{code: code, status: resp.StatusCode}
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	var secs float64
	if len(tr.ExpiresIn) > 0 && json.Unmarshal(tr.ExpiresIn, &secs) != nil {
		// Some servers send the number as a string.
		var str string
		if json.Unmarshal(tr.ExpiresIn, &str) == nil {
			if d, err := time.ParseDuration(str + "s"); err == nil {
				secs = d.Seconds()
			}
		}
	}
	if secs > 0 {
		tok.ExpiresIn = int64(secs)
		tok.Expiry = time.Now().Add(time.Duration(secs) * time.Second)
	}
	return tok, nil
}

// revoke asks the provider to revoke a token (RFC 7009); failures are
// logged by the caller, never fatal.
func (o *OAuth) revoke(ctx context.Context, c *clientConfig, token secrets.Secret, hint string) error {
	if c.revokeURL == "" || token.IsZero() {
		return nil
	}
	form := url.Values{"token": {token.Reveal()}, "token_type_hint": {hint}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.revokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return &tokenEndpointError{code: "unreachable"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.authStyle == oauth2.AuthStyleInParams {
		form.Set("client_id", c.clientID.Reveal())
		form.Set("client_secret", c.clientSecret.Reveal())
		req.Body = io.NopCloser(strings.NewReader(form.Encode()))
		req.ContentLength = int64(len(form.Encode()))
	} else {
		req.SetBasicAuth(url.QueryEscape(c.clientID.Reveal()), url.QueryEscape(c.clientSecret.Reveal()))
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return asTokenError(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxTokenResponse))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &tokenEndpointError{code: "unexpected_response", status: resp.StatusCode}
	}
	return nil
}
