package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboardhq/switchboard"
)

// KeySize is the master key length: AES-256.
const KeySize = 32

// Keyring seals with its primary key and opens with any key it holds, so
// keys rotate online: add the new key as primary, keep the old one until
// Store.Rotate has re-sealed every row.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
}

// KeyID is the identifier of a key: the first 12 hex digits of a SHA-256
// over a fixed label and the key. It names a key without revealing it.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("switchboard key id v1\x00"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// NewKeyring builds a keyring sealing with primary and also opening with
// older keys.
func NewKeyring(primary []byte, older ...[]byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, key := range append([][]byte{primary}, older...) {
		if len(key) != KeySize {
			return nil, fmt.Errorf("master key %d is %d bytes, want %d", i, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		id := KeyID(key)
		if i == 0 {
			k.primary = id
		}
		k.aeads[id] = aead
	}
	return k, nil
}

// PrimaryID is the id of the key new ciphertexts are sealed with.
func (k *Keyring) PrimaryID() string { return k.primary }

// associatedData binds a ciphertext to its row and to the key id it names,
// so a ciphertext copied into another row, or relabelled with another key
// id, does not open.
func associatedData(ref Ref, keyID string) []byte {
	return []byte("switchboard/secret/v1\x00" + string(ref.Tenant) + "\x00" + ref.Owner + "\x00" + ref.Name + "\x00" + keyID)
}

// Seal encrypts plaintext for the row ref under the primary key. The result
// is nonce || ciphertext || tag.
func (k *Keyring) Seal(ref Ref, plaintext []byte) (keyID string, ciphertext []byte, err error) {
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, err
	}
	return k.primary, aead.Seal(nonce, nonce, plaintext, associatedData(ref, k.primary)), nil
}

// ErrUndecryptable is returned when a ciphertext does not open: an unknown
// key id, a row it was not sealed for, or tampering.
var ErrUndecryptable = errors.New("secret does not decrypt")

// Open decrypts a ciphertext sealed for ref under keyID.
func (k *Keyring) Open(ref Ref, keyID string, ciphertext []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: key %s is not in the keyring", ErrUndecryptable, keyID)
	}
	if len(ciphertext) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: ciphertext too short", ErrUndecryptable)
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, ciphertext[:n], ciphertext[n:], associatedData(ref, keyID))
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%s/%s", ErrUndecryptable, ref.Tenant, ref.Owner, ref.Name)
	}
	return pt, nil
}

// KeySource says where a master key came from, for the start-up log.
type KeySource string

// Key sources.
const (
	KeyFromEnv     KeySource = "environment"
	KeyFromFile    KeySource = "file"
	KeyFileCreated KeySource = "created"
)

// KeyOptions say where LoadKeyring looks for the master key.
type KeyOptions struct {
	// Env is the value of SWITCHBOARD_MASTER_KEY: base64 of 32 bytes.
	Env string
	// Previous are older keys (base64), still accepted for opening while
	// rows are re-sealed.
	Previous []string
	// File is the key file path; used when Env is empty.
	File string
	// Create lets LoadKeyring create File (0600) when it is missing. The
	// embedded default sets it; production mode never does.
	Create bool
}

// LoadKeyring loads the master key per opts. Errors name the problem and
// the fix, never a key.
func LoadKeyring(opts KeyOptions) (*Keyring, KeySource, error) {
	var (
		key []byte
		src KeySource
		err error
	)
	switch {
	case opts.Env != "":
		key, err = decodeKey(opts.Env)
		if err != nil {
			return nil, "", fmt.Errorf("SWITCHBOARD_MASTER_KEY is malformed: %w", err)
		}
		src = KeyFromEnv
	case opts.File != "":
		key, src, err = keyFromFile(opts.File, opts.Create)
		if err != nil {
			return nil, "", err
		}
	default:
		return nil, "", switchboard.E(switchboard.ErrInvalid, "no_master_key",
			"no master key: set SWITCHBOARD_MASTER_KEY to base64 of 32 random bytes (openssl rand -base64 32)")
	}
	var older [][]byte
	for i, p := range opts.Previous {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, err := decodeKey(p)
		if err != nil {
			return nil, "", fmt.Errorf("previous master key %d is malformed: %w", i+1, err)
		}
		older = append(older, k)
	}
	kr, err := NewKeyring(key, older...)
	return kr, src, err
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(b) != KeySize {
		return nil, fmt.Errorf("decodes to %d bytes, want %d", len(b), KeySize)
	}
	return b, nil
}

func keyFromFile(path string, create bool) ([]byte, KeySource, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := decodeKey(string(b))
		if err != nil {
			return nil, "", fmt.Errorf("master key file %s is malformed: %w", path, err)
		}
		return key, KeyFromFile, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("reading master key file: %w", err)
	}
	if !create {
		return nil, "", fmt.Errorf("master key file %s does not exist: set SWITCHBOARD_MASTER_KEY or create the file", path)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("creating key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("creating master key file: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("writing master key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, "", err
	}
	return key, KeyFileCreated, nil
}
