package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Target is one entry of an egress list: a host a process without a
// network of its own may reach through Proxy. Port 0 stands for the web's
// ports, 80 (http) and 443 (https).
type Target struct {
	Host string // a lower-case host name or a canonical IP address
	Port int
}

// String is the target as an admin writes it.
func (t Target) String() string {
	if t.Port == 0 {
		if strings.Contains(t.Host, ":") {
			return "[" + t.Host + "]"
		}
		return t.Host
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
}

// allows reports whether t names host and port.
func (t Target) allows(host string, port int) bool {
	if t.Host != host {
		return false
	}
	if t.Port == 0 {
		return port == 80 || port == 443
	}
	return t.Port == port
}

// hostName is a DNS name in its ASCII form: labels of letters, digits and
// '-', neither first nor last, joined by dots, with no trailing dot.
var hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseTarget reads an egress entry: a host name or an IP address, with
// ":port" or without (then 80 and 443). It refuses, with what to write
// instead, everything that is not plainly a host: URLs, paths,
// wildcards, option-looking and percent-encoded or non-ASCII names,
// numeric spellings of an address other than a dotted quad, and names
// that are internal by themselves (localhost, *.internal). Whether an
// address is reachable is the Policy's to say, at connect time.
func ParseTarget(entry string) (Target, error) {
	s := strings.ToLower(entry)
	switch {
	case s == "":
		return Target{}, fmt.Errorf("is empty: write a host name, e.g. api.github.com")
	case strings.HasPrefix(s, "-"):
		return Target{}, fmt.Errorf("%q looks like an option: write a host name, e.g. api.github.com", entry)
	case strings.Contains(s, "://"):
		return Target{}, fmt.Errorf("%q is a URL: write its host (and :port) only, e.g. api.github.com", entry)
	case strings.ContainsAny(s, "/?#@"):
		return Target{}, fmt.Errorf("%q holds a path, query or credentials: write a host (and :port) only", entry)
	case strings.Contains(s, "*"):
		return Target{}, fmt.Errorf("%q is a wildcard: list each host the server needs", entry)
	case strings.Contains(s, "%"):
		return Target{}, fmt.Errorf("%q is percent-encoded: write the host as it is", entry)
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return Target{}, fmt.Errorf("%q holds a space, a control or a non-ASCII character: write an internationalised name in its xn-- form", entry)
		}
	}
	host, port := s, 0
	bracketed := strings.HasPrefix(s, "[")
	if bracketed || strings.Count(s, ":") == 1 {
		h, p, err := net.SplitHostPort(s)
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			h, p, err = s[1:len(s)-1], "", nil
		}
		if err != nil {
			return Target{}, fmt.Errorf("%q is not host:port: %v", entry, err)
		}
		host = h
		if p == "" && strings.HasSuffix(s, ":") {
			return Target{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", entry)
		}
		if p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
				return Target{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", entry)
			}
			port = n
		}
	} else if strings.Contains(s, ":") {
		return Target{}, fmt.Errorf("%q: write an IPv6 address in brackets, e.g. [2001:db8::1]:443", entry)
	}
	ip, err := netip.ParseAddr(host)
	if bracketed && (err != nil || !ip.Is6()) {
		return Target{}, fmt.Errorf("%q: brackets are for an IPv6 address only", entry)
	}
	if err == nil {
		if ip.Is4In6() {
			return Target{}, fmt.Errorf("%q: write an IPv4-mapped address in its canonical form, the dotted quad %s", entry, ip.Unmap())
		}
		if ip.Zone() != "" || ip.String() != host {
			return Target{}, fmt.Errorf("%q: write the address in its canonical form, %s, without a zone", entry, ip.WithZone("").String())
		}
		return Target{Host: host, Port: port}, nil
	}
	switch {
	case numericHost(host):
		return Target{}, fmt.Errorf("%q is an IPv4 address in another spelling (hex, octal or fewer parts): write it as a dotted quad", entry)
	case len(host) > 253 || !hostName.MatchString(host):
		return Target{}, fmt.Errorf("%q is not a host name: labels of letters, digits and '-' joined by dots, without a trailing dot, e.g. api.github.com", entry)
	case internalName(host):
		return Target{}, fmt.Errorf("%q is internal: the outbound policy never lets a server reach it", entry)
	}
	return Target{Host: host, Port: port}, nil
}

// internalName reports whether a host name is internal by itself,
// whatever it resolves to.
func internalName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".internal")
}
