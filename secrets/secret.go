// Package secrets stores secret values one scalar per row, encrypted with
// AES-256-GCM under a keyring, each ciphertext bound to its row's identity
// (tenant, owner, name) and naming the key that sealed it. It also provides
// Secret, a string that redacts itself wherever it might be printed.
package secrets

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Redacted is what a Secret prints as.
const Redacted = "[REDACTED]"

// Secret holds a secret value. It prints as [REDACTED] through fmt (every
// verb, including %#v), log/slog, encoding/json and encoding.TextMarshaler
// users; the value is reached only through Reveal, at the point of use.
//
// The value sits behind a pointer: when a Secret is itself an unexported
// field of another struct, fmt cannot call its methods and prints the field
// by reflection, and a nested pointer prints as an address, not the value.
type Secret struct {
	p *value
}

type value struct{ v string }

// New wraps a secret value.
func New(v string) Secret {
	if v == "" {
		return Secret{}
	}
	return Secret{p: &value{v: v}}
}

// Reveal returns the secret value. Call it only where the value is sent to
// its destination (an upstream request, an encryption), never for display.
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return s.p.v
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.p == nil }

// String implements fmt.Stringer.
func (s Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return "secrets.Secret{" + Redacted + "}" }

// Format implements fmt.Formatter so that no verb (%s, %v, %x, %q, %d)
// prints the value.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, Redacted)
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON implements json.Marshaler: secrets are write-only.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(Redacted) }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// UnmarshalJSON implements json.Unmarshaler, so request bodies can carry
// secret values into the server (never out of it).
func (s *Secret) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("a secret value must be a JSON string")
	}
	*s = New(v)
	return nil
}
