package mcp

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/registry"
)

// appendSuccess appends to dst the JSON the SDK's marshaller writes for
// successResult(resp, ...): the body as text and, for a JSON body, as
// structured content, written straight from the body's bytes instead of
// decoding it into a map and marshalling that back (which cost a tenth of
// a tools/call's allocations). The structured content is the body in the
// form encoding/json gives a decoded value: members sorted by name, the
// last of a repeated name kept, numbers as float64, strings escaped for
// HTML. It reports false, with dst unchanged, for anything it is not sure
// of: an empty, binary or non-JSON body, a body that is not valid UTF-8,
// escaped member names and numbers beyond float64; the caller then renders
// successResult. FuzzAppendSuccess holds it to the SDK's marshaller.
func appendSuccess(dst []byte, resp *registry.Response) ([]byte, bool) {
	body := bytes.TrimSpace(resp.Body)
	if len(body) == 0 || binaryAnswer(resp.ContentType) || !utf8.Valid(body) || !json.Valid(body) {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst = appendJSONString(dst, body)
	dst = append(dst, `}],"structuredContent":`...)
	if body[0] != '{' {
		dst = append(dst, `{"result":`...)
	}
	dst, ok := appendCanonical(dst, body)
	if !ok {
		return dst[:start], false
	}
	if body[0] != '{' {
		dst = append(dst, '}')
	}
	return append(dst, '}'), true
}

// appendCanonical appends the valid JSON value b as encoding/json writes
// it once decoded into an any.
func appendCanonical(dst, b []byte) ([]byte, bool) {
	switch b[0] {
	case '{':
		return appendCanonicalObject(dst, b)
	case '[':
		dst = append(dst, '[')
		i := skipSpace(b, 1)
		first := true
		for i < len(b) && b[i] != ']' {
			end := skipValue(b, i)
			if !first {
				dst = append(dst, ',')
			}
			first = false
			var ok bool
			if dst, ok = appendCanonical(dst, b[i:end]); !ok {
				return dst, false
			}
			i = skipSpace(b, end)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return append(dst, ']'), true
	case '"':
		if bytes.IndexByte(b, '\\') < 0 {
			return appendJSONString(dst, b[1:len(b)-1]), true
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return dst, false
		}
		return appendJSONString(dst, s), true
	case 't', 'f', 'n':
		return append(dst, b...), true
	default:
		return appendNumber(dst, b)
	}
}

// canonicalMember is an object member: its name as written (no escapes)
// and its value.
type canonicalMember struct{ key, raw []byte }

func appendCanonicalObject(dst, b []byte) ([]byte, bool) {
	var buf [16]canonicalMember
	members := buf[:0]
	sorted := true
	i := skipSpace(b, 1)
	for i < len(b) && b[i] == '"' {
		kend := skipString(b, i)
		key := b[i+1 : kend-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return dst, false
		}
		i = skipSpace(b, skipSpace(b, kend)+1) // past the colon
		vend := skipValue(b, i)
		if n := len(members); n > 0 && bytes.Compare(members[n-1].key, key) >= 0 {
			sorted = false
		}
		members = append(members, canonicalMember{key: key, raw: b[i:vend]})
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if !sorted {
		slices.SortStableFunc(members, func(x, y canonicalMember) int { return bytes.Compare(x.key, y.key) })
	}
	dst = append(dst, '{')
	first := true
	for j, m := range members {
		if j+1 < len(members) && bytes.Equal(members[j+1].key, m.key) {
			continue // a later member of the same name wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, m.key)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendCanonical(dst, m.raw); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendNumber appends the JSON number raw as encoding/json writes the
// float64 it decodes to.
func appendNumber(dst, raw []byte) ([]byte, bool) {
	// Integers of up to 15 digits are their own float64 form ("-0" is
	// not: it has a sign encoding/json keeps).
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	plain := len(digits) <= 15 && !(len(digits) == 1 && digits[0] == '0' && len(raw) == 2)
	for _, c := range digits {
		if c < '0' || c > '9' {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, raw...), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return dst, false
	}
	// As encoding/json's float encoder does.
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json
// writes one with HTML escaping (its default): <, > and & as \u00XX,
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendJSONString[Bytes []byte | string](dst []byte, s Bytes) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// resultBuffers holds the buffers fast-path answers are rendered into;
// the server copies an answer out before the buffer goes back.
var resultBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledResult is the largest buffer kept for reuse.
const maxPooledResult = 64 << 10

func putResultBuffer(b *[]byte) {
	if cap(*b) <= maxPooledResult {
		*b = (*b)[:0]
		resultBuffers.Put(b)
	}
}
