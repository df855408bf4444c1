package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
)

// toolSafe makes s match ^[a-zA-Z0-9_-]{1,max}$: every other character
// becomes "_", and a name longer than max is cut and given a short hash of
// the whole name so that distinct long names stay distinct.
func toolSafe(s string, max int) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 128 && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "_"
	}
	if len(out) > max {
		sum := sha256.Sum256([]byte(s))
		h := hex.EncodeToString(sum[:4])
		out = strings.TrimRight(out[:max-len(h)-1], "_-") + "_" + h
	}
	return out
}

// truncateName cuts an already tool-safe name to n bytes.
func truncateName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// words splits an identifier into lower-case words at case changes, digits
// boundaries and any non-alphanumeric character: "GetCustomersCustomer" ->
// [get customers customer], "post_oauth2_token#refresh" -> [post oauth2
// token refresh], "Api20100401Account" -> [api20100401 account].
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if r >= 128 || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// snake returns the lower snake case, tool-safe form of s.
func snake(s string, max int) string {
	w := words(s)
	if len(w) == 0 {
		return toolSafe(strings.ToLower(s), max)
	}
	return toolSafe(strings.Join(w, "_"), max)
}

// singular is a crude English singular, enough to strip "customer" from
// an operation on "customers".
func singular(w string) string {
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 3:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 1:
		return w[:len(w)-1]
	}
	return w
}

// actionName derives an action name from an operation id by dropping the
// entity's words: "GetCustomersCustomer" in "customers" -> "get".
func actionName(id, entity string) string {
	drop := map[string]bool{}
	for _, w := range words(entity) {
		drop[w] = true
		drop[singular(w)] = true
	}
	var kept []string
	for _, w := range words(id) {
		if !drop[w] && !drop[singular(w)] {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return toolSafe(strings.Join(kept, "_"), 64)
}
