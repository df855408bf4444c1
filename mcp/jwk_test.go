package mcp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
)

// TestParseECJWK: EC keys of each curve are read from their JWK
// coordinates; a point off the curve or a short coordinate is refused.
func TestParseECJWK(t *testing.T) {
	t.Parallel()
	b64 := base64.RawURLEncoding.EncodeToString
	for _, tc := range []struct {
		crv   string
		curve elliptic.Curve
	}{{"P-256", elliptic.P256()}, {"P-384", elliptic.P384()}, {"P-521", elliptic.P521()}} {
		key, err := ecdsa.GenerateKey(tc.curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		point, err := key.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			t.Fatal(err)
		}
		size := (len(point) - 1) / 2
		x, y := point[1:1+size], point[1+size:]
		jwk := func(x, y []byte) []byte {
			return fmt.Appendf(nil, `{"kty":"EC","kid":"e1","crv":%q,"x":%q,"y":%q}`, tc.crv, b64(x), b64(y))
		}
		kid, pub, err := parseJWK(jwk(x, y))
		if err != nil || kid != "e1" || !key.PublicKey.Equal(pub) {
			t.Errorf("%s: %v %q %v", tc.crv, err, kid, pub)
		}
		off := append([]byte(nil), y...)
		off[len(off)-1] ^= 1
		if _, _, err := parseJWK(jwk(x, off)); err == nil {
			t.Errorf("%s: a point off the curve was accepted", tc.crv)
		}
		if _, _, err := parseJWK(jwk(x[1:], y)); err == nil {
			t.Errorf("%s: a short x coordinate was accepted", tc.crv)
		}
	}
	if _, _, err := parseJWK([]byte(`{"kty":"EC","crv":"P-224","x":"AA","y":"AA"}`)); err == nil {
		t.Error("an unsupported curve was accepted")
	}
}
