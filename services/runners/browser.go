package runners

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"toolbelt/models"
	"toolbelt/services/browser"
)

// browserNavigate opens a URL in headless Chromium. Every request the page
// makes passes the same network policy as http_request, host names
// resolved; a screenshot goes to screenshots/<call id>.png in the work
// directory.
func (t *Table) browserNavigate(ctx context.Context, c *Call) (any, error) {
	if t.browser == nil {
		return nil, &Error{Code: models.CodeExecutionFailed, Message: "Chromium is not installed on this server",
			Suggestion: "Do not retry; use http_request to fetch the page instead."}
	}
	target, _ := c.Args["url"].(string)
	shot, _ := c.Args["screenshot"].(bool)
	opt := browser.Options{URL: target, Allow: func(u *url.URL) error { return t.net.CheckResolved(ctx, u) }, Control: t.net.DialControl}
	if shot {
		// Chromium writes into a directory of the server's own; the PNG is
		// then copied in through the work directory's os.Root, so a link
		// planted at screenshots/ cannot send it (or a chown) elsewhere.
		tmp, err := os.MkdirTemp("", "toolbelt-shot-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		opt.Screenshot, opt.ScreenshotPath = true, filepath.Join(tmp, "shot.png")
	}
	page, err := t.browser.Navigate(ctx, opt)
	if err != nil {
		var be *browser.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.As(err, &be):
			return nil, err
		case be.Kind == browser.KindBlocked:
			return nil, &Error{Code: models.CodeURLNotAllowed, Message: be.Msg, Suggestion: "Use a public http or https URL; internal addresses are never opened."}
		case be.Kind == browser.KindInvalid:
			return nil, &Error{Code: models.CodeValidation, Message: be.Msg, Suggestion: "Send an absolute http or https URL."}
		case be.Kind == browser.KindNavigation:
			return nil, &Error{Code: models.CodeUpstream, Message: be.Msg, Retryable: true, Suggestion: "The site did not answer; check the URL or try later."}
		}
		return nil, &Error{Code: models.CodeExecutionFailed, Message: be.Msg, Retryable: be.Kind == browser.KindUnavailable, Suggestion: "Try again later, or use http_request."}
	}
	links := make([]map[string]string, len(page.Links))
	for i, l := range page.Links {
		links[i] = map[string]string{"text": l.Text, "url": l.URL}
	}
	out := map[string]any{"url": page.URL, "status": page.Status, "title": page.Title, "text": page.Text,
		"text_truncated": page.TextTruncated, "links": links}
	if page.Screenshot != "" {
		rel := "screenshots/" + c.ID + ".png"
		if err := saveScreenshot(c, page.Screenshot, rel); err != nil {
			return nil, pathError(rel, err)
		}
		out["screenshot"] = rel
	}
	return out, nil
}

// saveScreenshot copies the PNG at src to rel in the work directory,
// through its os.Root: no link is followed out of it, the file is new
// (O_EXCL), and it and screenshots/ belong to the sandbox's uid.
func saveScreenshot(c *Call, src, rel string) error {
	png, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	root, err := openRoot(c)
	if err != nil {
		return err
	}
	defer root.Close()
	defer c.Dir.usage.stale()
	if err := root.Mkdir("screenshots", 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if info, err := root.Lstat("screenshots"); err != nil || !info.IsDir() {
		return fmt.Errorf("screenshots is not a directory: %w", errPlanted)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, werr := f.Write(png)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	if c.Dir.Owner != nil {
		_ = root.Lchown("screenshots", c.Dir.Owner[0], c.Dir.Owner[1])
		return root.Lchown(rel, c.Dir.Owner[0], c.Dir.Owner[1])
	}
	return nil
}
