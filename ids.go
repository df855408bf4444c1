package switchboard

import (
	"crypto/rand"
	"encoding/base32"
	"regexp"
	"strings"
)

// TenantID is the opaque, immutable identifier of a tenant (a workspace).
// Every row that belongs to a tenant carries it.
type TenantID string

// InstanceID is the opaque, immutable identifier of an app instance.
type InstanceID string

// CallerID is the opaque identifier of a caller credential.
type CallerID string

// RequestIDHeader carries a request's id: optional in requests (from a
// trusted proxy), set on every response by the server's request logging
// (api.RequestLog) before any handler runs, and read back from the
// response by the agent-path transports (gateway.RequestLogger) so that
// their log lines carry the same request_id.
const RequestIDHeader = "X-Request-Id"

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random identifier with the given prefix, such as "ten_".
// 80 random bits, lower-case base32: safe in URLs, logs and file names.
func NewID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + idEncoding.EncodeToString(b[:])
}

var slugPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidSlug reports whether s is a valid slug: 1-63 lower-case letters,
// digits and inner hyphens, the rules of a DNS label.
func ValidSlug(s string) bool {
	return slugPattern.MatchString(s) && !strings.Contains(s, "--")
}
