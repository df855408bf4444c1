package api

import (
	"regexp"
	"strings"
	"testing"
)

// requestIDRule is the rule validRequestID implements, as the regexp it
// replaced.
var requestIDRule = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func FuzzValidRequestID(f *testing.F) {
	for _, s := range []string{"", "req_fixture", "upstream-id.42", "bad id\"{", "a\n", "é", "\x00",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "A-Z_a.z09", "/", ":", "@", "[", "`", "{", "~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validRequestID(id), requestIDRule.MatchString(id); got != want {
			t.Fatalf("validRequestID(%q) = %v, the rule says %v", id, got, want)
		}
	})
}

func TestValidRequestIDEveryByte(t *testing.T) {
	for c := range 256 {
		id := "x" + string([]byte{byte(c)})
		if got, want := validRequestID(id), requestIDRule.MatchString(id); got != want {
			t.Errorf("validRequestID(%q) = %v, the rule says %v", id, got, want)
		}
	}
}
