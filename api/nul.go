package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard"
)

// NUL bytes are refused at the edge, on every route, naming where they
// were: PostgreSQL cannot store one (and answered 500), SQLite would, and
// no surface has a use for one in a path, a query or a JSON string. The
// store refuses them too (database: invalid_text), without a field name;
// this is where the client learns which field.

// maxNamed bounds a path segment or parameter name quoted in an error.
const maxNamed = 64

func nulError(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_text", format, args...)
}

// RefuseNUL is server-wide: a request whose path or query holds a NUL
// byte (%00) is answered 400 invalid_text naming the path segment or the
// query parameter, before any handler or store sees it. It wraps the
// router as an http.Handler built once: as echo middleware (Pre) it cost
// two closures per request (echo wraps its pre-middleware chain for each
// request), through echo.WrapMiddleware more.
func RefuseNUL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkURL(r.URL); err != nil {
			switchboard.WriteError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func checkURL(u *url.URL) error {
	if strings.IndexByte(u.Path, 0) >= 0 {
		for _, seg := range strings.Split(u.Path, "/") {
			if strings.IndexByte(seg, 0) >= 0 {
				return nulError("path segment %s contains a NUL byte", quoteBounded(seg))
			}
		}
	}
	if !strings.Contains(u.RawQuery, "%00") {
		return nil
	}
	q, _ := url.ParseQuery(u.RawQuery)
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.IndexByte(k, 0) >= 0 {
			return nulError("query parameter name %s contains a NUL byte", quoteBounded(k))
		}
		for _, v := range q[k] {
			if strings.IndexByte(v, 0) >= 0 {
				return nulError("query parameter %s contains a NUL byte", quoteBounded(k))
			}
		}
	}
	return nil
}

// quoteBounded quotes s (NUL shown as \x00), cut to maxNamed bytes.
func quoteBounded(s string) string {
	if len(s) > maxNamed {
		s = s[:maxNamed] + "…"
	}
	return strconv.Quote(s)
}

// checkBodyText refuses a JSON body with a string (a value or a member
// name) holding a NUL byte, naming its field ("fields.API_KEY",
// "agents[1]"); never its value. JSON can carry a NUL only as the escape
// \u0000, so bodies without one are not walked.
func checkBodyText(body []byte) error {
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil // the strict decoding reports it
	}
	if field, ok := nulField(v, ""); ok {
		if field == "" {
			return nulError("the request body contains a NUL byte")
		}
		return nulError("field %s contains a NUL byte", quoteBounded(field))
	}
	return nil
}

// nulField returns the path of the first string under v that holds a NUL
// byte (member names in order).
func nulField(v any, path string) (string, bool) {
	switch x := v.(type) {
	case string:
		return path, strings.IndexByte(x, 0) >= 0
	case []any:
		for i, e := range x {
			if f, ok := nulField(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return f, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.IndexByte(k, 0) >= 0 {
				return p, true
			}
			if f, ok := nulField(x[k], p); ok {
				return f, true
			}
		}
	}
	return "", false
}
