package services

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"toolbelt/services/browser"
)

// WithBrowser sets the Chromium that browser_navigate drives.
func (inv *Invoker) WithBrowser(b *browser.Browser) *Invoker {
	inv.browser = b
	return inv
}

// browserNavigate opens a URL in headless Chromium. Every request the page
// makes passes the same network policy as http_request, host names
// resolved; a screenshot goes to screenshots/<call id>.png in the work
// directory.
func (inv *Invoker) browserNavigate(ctx context.Context, c *call) (any, error) {
	if inv.browser == nil {
		return nil, &toolError{code: CodeExecutionFailed, msg: "Chromium is not installed on this server",
			suggestion: "Do not retry; use http_request to fetch the page instead."}
	}
	target, _ := c.args["url"].(string)
	shot, _ := c.args["screenshot"].(bool)
	opt := browser.Options{URL: target, Allow: func(u *url.URL) error { return inv.net.checkResolved(ctx, u) }}
	rel := ""
	if shot {
		rel = filepath.Join("screenshots", c.id+".png")
		if err := os.MkdirAll(filepath.Join(c.workDir, "screenshots"), 0o750); err != nil {
			return nil, err
		}
		opt.Screenshot, opt.ScreenshotPath = true, filepath.Join(c.workDir, rel)
	}
	page, err := inv.browser.Navigate(ctx, opt)
	if err != nil {
		var be *browser.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.As(err, &be):
			return nil, err
		case be.Kind == browser.KindBlocked:
			return nil, &toolError{code: CodeURLNotAllowed, msg: be.Msg, suggestion: "Use a public http or https URL; internal addresses are never opened."}
		case be.Kind == browser.KindInvalid:
			return nil, &toolError{code: CodeValidation, msg: be.Msg, suggestion: "Send an absolute http or https URL."}
		case be.Kind == browser.KindNavigation:
			return nil, &toolError{code: CodeUpstream, msg: be.Msg, retryable: true, suggestion: "The site did not answer; check the URL or try later."}
		}
		return nil, &toolError{code: CodeExecutionFailed, msg: be.Msg, retryable: be.Kind == browser.KindUnavailable, suggestion: "Try again later, or use http_request."}
	}
	links := make([]map[string]string, len(page.Links))
	for i, l := range page.Links {
		links[i] = map[string]string{"text": l.Text, "url": l.URL}
	}
	out := map[string]any{"url": page.URL, "status": page.Status, "title": page.Title, "text": page.Text,
		"text_truncated": page.TextTruncated, "links": links}
	if page.Screenshot != "" {
		out["screenshot"] = rel
		if c.owner != nil {
			_ = os.Chown(filepath.Join(c.workDir, "screenshots"), c.owner[0], c.owner[1])
			_ = os.Chown(page.Screenshot, c.owner[0], c.owner[1])
		}
	}
	return out, nil
}

// checkResolved is checkURL plus the addresses the host resolves to, for
// clients (Chromium) that dial by themselves.
func (p NetPolicy) checkResolved(ctx context.Context, u *url.URL) error {
	if msg := p.checkURL(u.String()); msg != "" {
		return errors.New(msg)
	}
	host := u.Hostname()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Fail closed: a lookup that fails here (the call ended, or a DNS
	// server answering Go and Chromium differently) refuses the request.
	// Go and Chromium still resolve separately, so DNS rebinding is only
	// closed by the network around the server.
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("host %s could not be resolved", host)
	}
	for _, a := range addrs {
		if !p.addrAllowed(a) {
			return fmt.Errorf("host %s resolves to the internal address %s", host, a)
		}
	}
	return nil
}
