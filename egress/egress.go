// Package egress is Switchboard's outbound network policy: the one HTTP
// client every upstream call goes through. It has dial, TLS, header and
// overall timeouts, follows no redirects, and refuses — after DNS
// resolution, immediately before connecting — loopback, private,
// link-local, unique-local, metadata, multicast and unspecified addresses
// unless the operator allow-lists them.
//
// The check sits in net.Dialer.Control, which runs for every address the
// dialer actually connects to, so a name that resolves to a public address
// once and a private one later (DNS rebinding) is still caught.
package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedAddress is returned (wrapped) when the guard refuses a dial.
var ErrBlockedAddress = errors.New("outbound address not allowed")

// ErrResponseTooLarge is returned when a response body exceeds its cap.
var ErrResponseTooLarge = errors.New("response too large")

// Config is the outbound policy.
type Config struct {
	// Allow lists prefixes that are reachable although they would be
	// refused (SWITCHBOARD_ALLOW_UPSTREAM_CIDRS). Tests allow 127.0.0.1/32.
	Allow []netip.Prefix
	// DialTimeout, TLSHandshakeTimeout, ResponseHeaderTimeout and Timeout
	// (the whole exchange) default to 5 s, 5 s, 30 s and 60 s.
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	Timeout               time.Duration
	// MaxIdleConnsPerHost defaults to 64.
	MaxIdleConnsPerHost int
}

// blocked are the ranges no upstream may be in unless allow-listed.
var blocked = mustPrefixes(
	"0.0.0.0/8",         // "this network", unspecified
	"10.0.0.0/8",        // private
	"100.64.0.0/10",     // carrier-grade NAT
	"127.0.0.0/8",       // loopback
	"169.254.0.0/16",    // link-local, cloud metadata (169.254.169.254)
	"172.16.0.0/12",     // private
	"192.0.0.0/24",      // IETF protocol assignments
	"192.168.0.0/16",    // private
	"198.18.0.0/15",     // benchmarking
	"224.0.0.0/4",       // multicast
	"240.0.0.0/4",       // reserved, broadcast
	"::/128",            // unspecified
	"::1/128",           // loopback
	"fc00::/7",          // unique-local
	"fe80::/10",         // link-local
	"ff00::/8",          // multicast
	"fd00:ec2::254/128", // AWS metadata over IPv6 (inside fc00::/7; listed for clarity)
	"64:ff9b::/96",      // NAT64 can reach IPv4 private space
	"2001:db8::/32",     // documentation
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// ParseCIDRs parses a comma-separated list of CIDR prefixes or addresses.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR prefix", part)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR prefix", part)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Allowed reports whether the policy lets a connection reach addr.
func (c Config) Allowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range c.Allow {
		if p.Contains(addr) {
			return true
		}
	}
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsLoopback() || addr.IsPrivate() ||
		addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr.IsMulticast() {
		return false
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// Control is a net.Dialer Control function enforcing the policy on the
// resolved address of every connection attempt.
func (c Config) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable address %q", ErrBlockedAddress, address)
	}
	if !c.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s is in a refused range", ErrBlockedAddress, ap.Addr())
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Dialer returns the guarded dialer.
func (c Config) Dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   orDefault(c.DialTimeout, 5*time.Second),
		KeepAlive: 30 * time.Second,
		Control:   c.Control,
	}
}

// NewClient returns the guarded client: no proxy from the environment (an
// HTTP proxy would dial on our behalf, past the guard), no redirects.
func NewClient(c Config) *http.Client {
	idle := c.MaxIdleConnsPerHost
	if idle <= 0 {
		idle = 64
	}
	d := c.Dialer()
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   orDefault(c.TLSHandshakeTimeout, 5*time.Second),
		ResponseHeaderTimeout: orDefault(c.ResponseHeaderTimeout, 30*time.Second),
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   orDefault(c.Timeout, 60*time.Second),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// ReadBody reads at most max bytes of r; more is ErrResponseTooLarge.
func ReadBody(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrResponseTooLarge, max)
	}
	return b, nil
}

// IsBlocked reports whether err is a refusal by the guard.
func IsBlocked(err error) bool { return errors.Is(err, ErrBlockedAddress) }
