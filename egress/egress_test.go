package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard/egress"
)

func TestAllowed(t *testing.T) {
	t.Parallel()
	allowLoop, _ := egress.ParseCIDRs("127.0.0.1, 10.1.0.0/16")
	cases := []struct {
		addr string
		cfg  egress.Config
		want bool
	}{
		{"127.0.0.1", egress.Config{}, false},
		{"127.0.0.2", egress.Config{}, false},
		{"::1", egress.Config{}, false},
		{"::ffff:127.0.0.1", egress.Config{}, false},
		{"10.0.0.1", egress.Config{}, false},
		{"172.16.5.4", egress.Config{}, false},
		{"192.168.1.1", egress.Config{}, false},
		{"169.254.169.254", egress.Config{}, false},
		{"100.64.0.1", egress.Config{}, false},
		{"0.0.0.0", egress.Config{}, false},
		{"::", egress.Config{}, false},
		{"fd00::1", egress.Config{}, false},
		{"fe80::1", egress.Config{}, false},
		{"fd00:ec2::254", egress.Config{}, false},
		{"224.0.0.1", egress.Config{}, false},
		{"64:ff9b::a00:1", egress.Config{}, false},
		{"93.184.215.14", egress.Config{}, true},
		{"2606:4700::1111", egress.Config{}, true},
		{"127.0.0.1", egress.Config{Allow: allowLoop}, true},
		{"127.0.0.2", egress.Config{Allow: allowLoop}, false},
		{"10.1.2.3", egress.Config{Allow: allowLoop}, true},
		{"10.2.0.1", egress.Config{Allow: allowLoop}, false},
	}
	for _, c := range cases {
		if got := c.cfg.Allowed(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Allowed(%s) with allow %v = %v, want %v", c.addr, c.cfg.Allow, got, c.want)
		}
	}
	if _, err := egress.ParseCIDRs("not-a-cidr/99"); err == nil {
		t.Error("ParseCIDRs accepted garbage")
	}
}

// The guard refuses a loopback server before any byte reaches it, and lets
// the same server through once allow-listed.
func TestClientRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	_, err := egress.NewClient(egress.Config{}).Get(srv.URL)
	if !egress.IsBlocked(err) {
		t.Fatalf("Get loopback = %v, want a blocked-address error", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the upstream saw a request although the guard refused it")
	}
	allow, _ := egress.ParseCIDRs("127.0.0.1/32")
	resp, err := egress.NewClient(egress.Config{Allow: allow}).Get(srv.URL)
	if err != nil {
		t.Fatalf("allow-listed Get: %v", err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("hits = %d, want 1", hits.Load())
	}
}

// A host name is checked on the address it resolves to: "localhost"
// resolves to loopback and is refused.
func TestGuardChecksResolvedAddress(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	_, err := egress.NewClient(egress.Config{}).Get("http://localhost:" + port + "/")
	if !egress.IsBlocked(err) {
		t.Fatalf("Get localhost = %v, want blocked", err)
	}
	// The dialer's Control sees the address after resolution.
	d := egress.Config{}.Dialer()
	if _, err := d.DialContext(context.Background(), "tcp", "localhost:"+port); !errors.Is(err, egress.ErrBlockedAddress) {
		t.Fatalf("dial localhost = %v, want blocked", err)
	}
	if hits.Load() != 0 {
		t.Fatal("upstream reached")
	}
}

func TestNoRedirectsAndBodyCap(t *testing.T) {
	t.Parallel()
	var followed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/target", http.StatusFound)
		case "/target":
			followed.Add(1)
		case "/big":
			io.WriteString(w, strings.Repeat("x", 2048))
		}
	}))
	defer srv.Close()
	allow, _ := egress.ParseCIDRs("127.0.0.1")
	c := egress.NewClient(egress.Config{Allow: allow})
	resp, err := c.Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || followed.Load() != 0 {
		t.Fatalf("status %d, followed %d: redirects must not be followed", resp.StatusCode, followed.Load())
	}
	resp, err = c.Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := egress.ReadBody(resp.Body, 1024); !errors.Is(err, egress.ErrResponseTooLarge) {
		t.Fatalf("ReadBody over cap = %v", err)
	}
}
