package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard/egress"
)

func TestRuleNamesTheRange(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1":        egress.RuleLoopback,
		"127.9.9.9":        egress.RuleLoopback,
		"::1":              egress.RuleLoopback,
		"::ffff:127.0.0.1": egress.RuleLoopback,
		"10.0.0.1":         egress.RulePrivate,
		"172.16.5.4":       egress.RulePrivate,
		"192.168.1.1":      egress.RulePrivate,
		"169.254.169.254":  egress.RuleMetadata,
		"fd00:ec2::254":    egress.RuleMetadata,
		"169.254.1.1":      egress.RuleLinkLocal,
		"fe80::1":          egress.RuleLinkLocal,
		"fd12::1":          egress.RuleUniqueLocal,
		"100.64.0.1":       egress.RuleSharedAddress,
		"224.0.0.1":        egress.RuleMulticast,
		"ff02::1":          egress.RuleMulticast,
		"0.0.0.0":          egress.RuleUnspecified,
		"::":               egress.RuleUnspecified,
		"64:ff9b::a00:1":   egress.RuleNAT64,
		"198.18.0.1":       egress.RuleReserved,
		"93.184.215.14":    "",
		"2606:4700::1111":  "",
	} {
		if got := (egress.Config{}).Rule(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Rule(%s) = %q, want %q", addr, got, want)
		}
	}
}

// resolver is the test's DNS: every name resolves to the addresses listed
// for it, and lookups are counted.
type resolver struct {
	names   map[string][]netip.Addr
	lookups atomic.Int64
}

func (r *resolver) lookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	if ips, ok := r.names[host]; ok {
		return ips, nil
	}
	return nil, errors.New("no such host")
}

// TestRefusedBeforeDialing resolves names, through the test resolver, to
// addresses the guard refuses: the refusal names the rule, never the
// address, and comes from Control, before any connection is attempted (the
// dialer never gets to connect, so no packet leaves). A loopback server
// reached through a name is refused too, and reached once allow-listed.
func TestRefusedBeforeDialing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	res := &resolver{names: map[string][]netip.Addr{
		"metadata.test":  ip("169.254.169.254"),
		"intranet.test":  ip("10.20.30.40"),
		"router.test":    ip("fe80::1"),
		"ula.test":       ip("fd12:3456::1"),
		"loop.test":      ip("127.0.0.1"),
		"rebinding.test": {netip.MustParseAddr("192.168.7.7"), netip.MustParseAddr("127.0.0.1")},
	}}
	for host, rule := range map[string]string{
		"metadata.test":  egress.RuleMetadata,
		"intranet.test":  egress.RulePrivate,
		"router.test":    egress.RuleLinkLocal,
		"ula.test":       egress.RuleUniqueLocal,
		"loop.test":      egress.RuleLoopback,
		"rebinding.test": egress.RulePrivate,
	} {
		before := res.lookups.Load()
		_, err := egress.NewClient(egress.Config{LookupNetIP: res.lookup}).Get("http://" + host + ":" + port + "/")
		re, ok := egress.Refusal(err)
		if !ok || !egress.IsBlocked(err) || re.Rule != rule {
			t.Errorf("%s: %v, want refused by rule %s", host, err, rule)
			continue
		}
		if res.lookups.Load() == before {
			t.Errorf("%s: the test resolver was not asked", host)
		}
		if !re.Addr.IsValid() || strings.Contains(re.Error(), re.Addr.String()) {
			t.Errorf("%s: refusal %q (address %v): want the address kept for logs but not in the text", host, re.Error(), re.Addr)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("a refused request reached the server (%d hits)", hits.Load())
	}
	// Allow-listed, the same name reaches the server: the hook resolved it.
	allow, _ := egress.ParseCIDRs("127.0.0.1/32")
	resp, err := egress.NewClient(egress.Config{Allow: allow, LookupNetIP: res.lookup}).Get("http://loop.test:" + port + "/")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || hits.Load() != 1 {
		t.Fatalf("allow-listed name: %v, %d hits; want one", err, hits.Load())
	}
}

func TestValidateURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://api.example.com/v1":           true,
		"http://127.0.0.1:9000":                true,
		"https://[2001:db8::1]:8443/x":         true,
		"file:///etc/passwd":                   false,
		"not a url":                            false,
		"api.example.com/v1":                   false,
		"ftp://example.com/":                   false,
		"https://alice:s3cr3t@api.example.com": false,
		"https://:443/x":                       false,
		"https:opaque":                         false,
		"javascript:alert(1)":                  false,
		"":                                     false,
		"https://exa mple.com":                 false,
	} {
		err := egress.ValidateURL(raw)
		if (err == nil) != ok {
			t.Errorf("ValidateURL(%q) = %v, want ok %v", raw, err, ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ValidateURL echoes the URL: %v", err)
		}
	}
}
