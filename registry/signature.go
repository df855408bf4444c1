package registry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	switchboard "github.com/switchboardhq/switchboard"
)

// SignatureName is the file name of the index's detached signature, beside
// the index: the standard base64 of the ed25519 signature of the index's
// exact bytes, followed by a newline.
const SignatureName = IndexName + ".sig"

// SignIndex returns the content of the signature file of index: the base64
// ed25519 signature of its bytes and a newline.
func SignIndex(index []byte, key ed25519.PrivateKey) []byte {
	sig := ed25519.Sign(key, index)
	return []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
}

// VerifyIndex checks the signature file content sig against index and the
// trusted keys: it passes when one key verifies it. The error wraps
// switchboard.ErrInvalid.
func VerifyIndex(index, sig []byte, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return switchboard.E(switchboard.ErrInvalid, "catalog_signature", "no catalog keys to verify %s with", SignatureName)
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sig)))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return switchboard.E(switchboard.ErrInvalid, "catalog_signature", "%s is not a base64 ed25519 signature", SignatureName)
	}
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, index, raw) {
			return nil
		}
	}
	return switchboard.E(switchboard.ErrInvalid, "catalog_signature",
		"%s does not verify %s with any configured catalog key: the index was modified or signed with another key", SignatureName, IndexName)
}

// GenerateKey returns a new ed25519 key pair for signing catalogs.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// EncodePublicKey renders a public key as --catalog-keys takes it: the
// standard base64 of its 32 bytes.
func EncodePublicKey(k ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(k)
}

// EncodePrivateKey renders a private key as a key file holds it: the
// standard base64 of its 32-byte seed and a newline.
func EncodePrivateKey(k ed25519.PrivateKey) []byte {
	return []byte(base64.StdEncoding.EncodeToString(k.Seed()) + "\n")
}

// ParsePrivateKey reads a key file written by EncodePrivateKey (the base64
// of a 32-byte seed or of a 64-byte private key). The error never quotes
// the content.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("the key file is not base64")
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !bytes.Equal(k, raw) {
			return nil, fmt.Errorf("the key file holds an inconsistent ed25519 private key")
		}
		return k, nil
	}
	return nil, fmt.Errorf("the key file holds %d bytes, not an ed25519 seed (32) or private key (64)", len(raw))
}

// ParsePublicKeys reads a list of public keys separated by commas or white
// space, each the standard base64 of 32 bytes (EncodePublicKey), as
// --catalog-keys takes them. An empty list is no keys.
func ParsePublicKeys(s string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for i, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		raw, err := base64.StdEncoding.DecodeString(f)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("catalog key #%d is not the base64 of a 32-byte ed25519 public key", i+1)
		}
		keys = append(keys, ed25519.PublicKey(raw))
	}
	return keys, nil
}
