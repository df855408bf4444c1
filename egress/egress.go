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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedAddress is returned (wrapped) when the guard refuses a dial.
var ErrBlockedAddress = errors.New("outbound address not allowed")

// Rules the guard refuses an address by, as RefusedError.Rule names them.
const (
	RuleLoopback      = "loopback"
	RulePrivate       = "private"
	RuleLinkLocal     = "link-local"
	RuleMetadata      = "metadata"
	RuleUniqueLocal   = "unique-local"
	RuleSharedAddress = "shared-address" // carrier-grade NAT, 100.64.0.0/10
	RuleMulticast     = "multicast"
	RuleUnspecified   = "unspecified"
	RuleNAT64         = "nat64"
	RuleReserved      = "reserved" // protocol assignments, benchmarking, documentation, 240/4
	RuleUnparseable   = "unparseable"
)

// RefusedError is the guard's refusal of one connection: the rule that
// refused it and the resolved address. The address is for the operator's
// log; Error and Rule never show it, so the error can be described to a
// caller without revealing how a host name resolved inside the network.
type RefusedError struct {
	Rule string
	Addr netip.Addr
}

// Error implements error without the address.
func (e *RefusedError) Error() string {
	return ErrBlockedAddress.Error() + ": the address is " + e.Rule
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *RefusedError) Is(target error) bool { return target == ErrBlockedAddress }

// Refusal returns the guard's refusal in err's chain, if any.
func Refusal(err error) (*RefusedError, bool) {
	if err == nil {
		return nil, false // before re, which escapes: no allocation per call
	}
	var re *RefusedError
	ok := errors.As(err, &re)
	return re, ok
}

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
	// LookupNetIP, when set, resolves host names instead of the system
	// resolver; tests use it to make a name resolve to a refused address.
	// The guard still checks every resolved address in Control, before
	// the connection is attempted.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// blockedRange is a range no upstream may be in unless allow-listed, and
// the rule it is refused by.
type blockedRange struct {
	prefix netip.Prefix
	rule   string
}

// blocked are the refused ranges, most specific first: the first match
// names the rule.
var blocked = mustRanges(
	"169.254.169.254/32", RuleMetadata, // cloud metadata (AWS, GCP, Azure, ...)
	"fd00:ec2::254/128", RuleMetadata, // AWS metadata over IPv6
	"100.100.100.200/32", RuleMetadata, // Alibaba Cloud metadata
	"0.0.0.0/8", RuleUnspecified, // "this network"
	"10.0.0.0/8", RulePrivate,
	"100.64.0.0/10", RuleSharedAddress,
	"127.0.0.0/8", RuleLoopback,
	"169.254.0.0/16", RuleLinkLocal,
	"172.16.0.0/12", RulePrivate,
	"192.0.0.0/24", RuleReserved, // IETF protocol assignments
	"192.168.0.0/16", RulePrivate,
	"198.18.0.0/15", RuleReserved, // benchmarking
	"224.0.0.0/4", RuleMulticast,
	"240.0.0.0/4", RuleReserved, // reserved, broadcast
	"::/128", RuleUnspecified,
	"::1/128", RuleLoopback,
	"fc00::/7", RuleUniqueLocal,
	"fe80::/10", RuleLinkLocal,
	"ff00::/8", RuleMulticast,
	"64:ff9b::/96", RuleNAT64, // NAT64 can reach IPv4 private space
	"2001:db8::/32", RuleReserved, // documentation
)

func mustRanges(pairs ...string) []blockedRange {
	out := make([]blockedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, blockedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
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
func (c Config) Allowed(addr netip.Addr) bool { return c.Rule(addr) == "" }

// Rule returns the rule that refuses a connection to addr, or "" when the
// policy allows it.
func (c Config) Rule(addr netip.Addr) string {
	addr = addr.Unmap()
	for _, p := range c.Allow {
		if p.Contains(addr) {
			return ""
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(addr) {
			return b.rule
		}
	}
	switch {
	case !addr.IsValid() || addr.IsUnspecified():
		return RuleUnspecified
	case addr.IsLoopback():
		return RuleLoopback
	case addr.IsPrivate():
		return RulePrivate
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return RuleLinkLocal
	case addr.IsMulticast():
		return RuleMulticast
	}
	return ""
}

// Control is a net.Dialer Control function enforcing the policy on the
// resolved address of every connection attempt. It runs before the
// connection is attempted, so a refused address never sees a packet.
func (c Config) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Rule: RuleUnparseable}
	}
	if rule := c.Rule(ap.Addr()); rule != "" {
		return &RefusedError{Rule: rule, Addr: ap.Addr().Unmap()}
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
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           c.dialContext(c.Dialer()),
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

// dialContext is d.DialContext, resolving names through LookupNetIP when
// it is set. Each resolved address is dialled by d, whose Control checks
// it before connecting.
func (c Config) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.LookupNetIP == nil {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, addr)
		}
		ips, err := c.LookupNetIP(ctx, network, host)
		if err != nil {
			return nil, &net.DNSError{Err: err.Error(), Name: host, IsNotFound: true}
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
		var first error
		for _, ip := range ips {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return conn, nil
			}
			if first == nil {
				first = err
			}
		}
		return nil, first
	}
}

// ValidateURL checks the syntax of an upstream base URL before it is
// saved: an absolute http or https URL with a host and no user
// information (credentials belong in secret fields, not in a URL that is
// shown and logged). It resolves nothing: which addresses are reachable
// is decided at each connection. The error says what is wrong without
// echoing the URL.
func ValidateURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme == "" && u.Host == "":
		return errors.New("is not an absolute URL (it needs http:// or https:// and a host)")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("has scheme %q; only http and https are allowed", truncate(u.Scheme, 16))
	case u.User != nil:
		return errors.New("must not hold user information (user:password@); put credentials in the connector's secret fields")
	case u.Hostname() == "":
		return errors.New("has no host")
	case u.Opaque != "":
		return errors.New("is not a hierarchical URL (scheme://host/path)")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
