package signin

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// NextParam is the query parameter (and form field) naming where a
// browser goes once signed in: a local path of this server, such as a
// connect link that sent it to sign in.
const NextParam = "next"

// nextLifetime bounds how long the sign-in page remembers next while the
// person fetches their sign-in link (the connect links' lifetime).
const nextLifetime = 15 * 60

// maxNext bounds the length of next.
const maxNext = 2048

// SafeNext returns next when it is a path of this server that a redirect
// may safely go to, or "" otherwise. It refuses anything a browser could
// read as another origin: a scheme or host ("https://evil", "//evil"),
// a backslash (browsers read "/\evil" as "//evil"), control characters
// (browsers drop tabs and newlines, so "/\t/evil" would become "//evil"),
// and anything not starting with "/".
func SafeNext(next string) string {
	if next == "" || len(next) > maxNext || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return ""
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return ""
	}
	return next
}

// nextCookie remembers next between the sign-in page and the sign-in (a
// link opened later in the same browser, or the identity provider's
// callback), scoped to the sign-in pages.
func (h *Handler) nextCookie() string {
	if h.secure {
		return "__Secure-sb_next"
	}
	return "sb_next"
}

// rememberNext keeps a safe next in the browser for the sign-in that
// follows.
func (h *Handler) rememberNext(w http.ResponseWriter, next string) {
	if next = SafeNext(next); next == "" {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: h.nextCookie(), Value: base64.RawURLEncoding.EncodeToString([]byte(next)), Path: Prefix,
		MaxAge: nextLifetime, HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
}

// takeNext returns where the browser goes once signed in: the request's
// own next (query or form field) when safe, else the remembered one, else
// the status page. The remembered one is forgotten.
func (h *Handler) takeNext(w http.ResponseWriter, r *http.Request, own string) string {
	remembered := ""
	if c, err := r.Cookie(h.nextCookie()); err == nil {
		if b, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil {
			remembered = string(b)
		}
		http.SetCookie(w, &http.Cookie{Name: h.nextCookie(), Value: "", Path: Prefix, MaxAge: -1,
			HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	}
	for _, n := range []string{own, remembered} {
		if n = SafeNext(n); n != "" {
			return n
		}
	}
	return Prefix
}
