// Package servertest runs a Switchboard server, built by server.New as
// switchboard serve builds it, on a loopback httptest server for
// end-to-end tests.
package servertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
)

// Server is a running server and its loopback listener.
type Server struct {
	*server.Server
	// HTTP is the loopback server; URL its base URL.
	HTTP *httptest.Server
	URL  string
}

// masterKey is the fixed master key of test servers.
var masterKey = func() []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i*11 + 3)
	}
	return k
}()

// Start builds a server from cfg with server.New and serves it on
// loopback until the test ends. Unset, cfg gets: PublicURL the loopback
// server's URL, upstreams allowed on 127.0.0.1, and a fixed master key.
// Background listeners (LISTEN/NOTIFY) are not started: call Listen.
func Start(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	return StartWith(t, cfg, nil)
}

// StartWith is Start with the server's handler wrapped by wrap (such as
// one that sets a fixed request id); nil wraps nothing.
func StartWith(t testing.TB, cfg server.Config, wrap func(http.Handler) http.Handler) *Server {
	t.Helper()
	var h http.Handler = http.NotFoundHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	if cfg.PublicURL == "" {
		cfg.PublicURL = hs.URL
	}
	if cfg.AllowUpstreams == nil {
		cfg.AllowUpstreams = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}
	if cfg.Keyring == nil && cfg.Keys.Env == "" && cfg.Keys.File == "" {
		keys, err := secrets.NewKeyring(masterKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keyring = keys
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	h = s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	return &Server{Server: s, HTTP: hs, URL: hs.URL}
}
