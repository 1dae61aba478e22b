package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Limits of what a page can make Navigate return.
const (
	defaultMaxTextBytes = 64 << 10
	defaultMaxLinks     = 200
	maxTitleBytes       = 1 << 10
	maxLinkTextBytes    = 200
	maxShotHeight       = 16384 // CSS pixels; Chromium cannot capture more
	maxShotWidth        = 4096
)

// Options says what to open and what to return.
type Options struct {
	URL            string
	Screenshot     bool   // save a full-page PNG
	ScreenshotPath string // absolute file path to write the PNG to (the caller chooses and confines it)
	MaxTextBytes   int    // default 64 KiB; text beyond is cut and Page.TextTruncated set
	MaxLinks       int    // default 200
	// Allow is called for every request the page makes (the document, each
	// redirect hop, subresources, fetch/XHR, iframes, workers); a non-nil
	// error blocks that request. nil allows everything. It is called from
	// several goroutines at once, and its error is logged and may be shown to
	// the agent, so it should name the host rather than the full URL.
	// The proxy that every connection of Chromium goes through (see proxy)
	// also asks it about each connection it opens, WebSockets included; a
	// tunnel (CONNECT, for https, wss and ws) as https://host:port.
	Allow func(u *url.URL) error
	// Control, when set, is the Control func of the proxy's net.Dialer: it
	// is called with the address actually connected to, after the host name
	// is resolved, and a non-nil error refuses the connection (403 to
	// Chromium, KindBlocked for the main document). This is where the
	// caller's IP policy goes, so that DNS rebinding between Allow and the
	// dial cannot pass. nil connects anywhere that Allow allows.
	Control func(network, address string, c syscall.RawConn) error
}

// Link is a link of the page: an absolute http(s) URL and its text.
type Link struct{ Text, URL string }

// Page is what Navigate read from the loaded page.
type Page struct {
	URL           string // final URL after redirects
	Status        int    // HTTP status of the main document
	Title, Text   string
	TextTruncated bool
	Links         []Link // absolute, http(s) only, deduplicated, in page order
	Screenshot    string // the path written, or ""
}

// Navigate opens opt.URL in a new tab of its own incognito-like browser
// context (no cookies or storage shared with other calls), waits for the load
// event, and reads the page. The tab and its context are closed before it
// returns, also on error and when ctx ends. A page that never finishes loading
// ends with KindTimeout when ctx expires.
//
// Every request goes through opt.Allow twice: in the Fetch domain, per
// request (see guard), and in the proxy of the call, per connection, with
// opt.Control at dial time (see proxy). Chromium reaches the network only
// through that proxy, so WebSockets, which the Fetch domain does not see,
// are checked too; see allocatorOptions for the rest.
func (b *Browser) Navigate(ctx context.Context, opt Options) (*Page, error) {
	u, err := parseTarget(opt.URL)
	if err != nil {
		return nil, err
	}
	if err := check(opt.Allow, u); err != nil {
		b.log.Info("browser: blocked request", "host", u.Host, "type", "Document", "main_document", true, "reason", err)
		return nil, &Error{Kind: KindBlocked, Msg: fmt.Sprintf("%s refused: %v", u, err), Err: err}
	}
	if opt.Screenshot && !filepath.IsAbs(opt.ScreenshotPath) {
		return nil, &Error{Kind: KindInvalid, Msg: fmt.Sprintf("screenshot path %q is not absolute", opt.ScreenshotPath)}
	}
	if opt.MaxTextBytes <= 0 {
		opt.MaxTextBytes = defaultMaxTextBytes
	}
	if opt.MaxLinks <= 0 {
		opt.MaxLinks = defaultMaxLinks
	}

	for attempt := 0; ; attempt++ {
		inst, err := b.instance(ctx)
		if err != nil {
			return nil, err
		}
		p, opened, err := inst.navigate(ctx, u, opt)
		// A process that died between two calls is only noticed when the tab
		// cannot be opened; start a new one, once. A call that got as far as
		// loading is not repeated: the page may be what killed Chromium.
		if err != nil && !opened && attempt == 0 && !inst.alive() && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// parseTarget accepts absolute http and https URLs only.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, &Error{Kind: KindNavigation, Msg: fmt.Sprintf("invalid URL %q", raw), Err: err}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &Error{Kind: KindNavigation, Msg: fmt.Sprintf("unsupported URL %q: only http and https", raw)}
	}
	if u.Host == "" {
		return nil, &Error{Kind: KindNavigation, Msg: fmt.Sprintf("invalid URL %q: no host", raw)}
	}
	return u, nil
}

// navigate runs one call in its own tab and browser context. opened reports
// whether the tab was opened, that is whether anything was loaded.
func (i *instance) navigate(ctx context.Context, u *url.URL, opt Options) (_ *Page, opened bool, _ error) {
	// The proxy of this call: its browser context sends every connection
	// there, and nothing else does.
	var current atomic.Pointer[tab]
	allow := func(u *url.URL) error {
		switch {
		case ctx.Err() != nil:
			return errClosing
		case opt.Allow == nil:
			return nil
		}
		return opt.Allow(u)
	}
	px, err := startProxy(i.log, proxyConfig{allow: allow, control: opt.Control, refusedLevel: slog.LevelInfo,
		report: func(u *url.URL, err error, refused bool) {
			if t := current.Load(); t != nil {
				t.connectionFailed(u, err, refused)
			}
		}})
	if err != nil {
		return nil, false, &Error{Kind: KindInternal, Msg: "cannot start the proxy", Err: err}
	}
	defer px.close()
	tabCtx, closeTab := chromedp.NewContext(i.ctx, chromedp.WithNewBrowserContext(func(p *target.CreateBrowserContextParams) {
		p.ProxyServer = px.url()
		p.ProxyBypassList = proxyBypassList
	}))
	runCtx, cancelRun := context.WithCancel(tabCtx)
	stopWatch := context.AfterFunc(ctx, cancelRun)
	var (
		t       *tab
		dialogs sync.WaitGroup
	)
	defer func() {
		if t != nil {
			t.closing.Store(true)
		}
		stopWatch()
		cancelRun()
		dialogs.Wait()
		closeTab() // closes the tab and disposes of its browser context
		c := chromedp.FromContext(tabCtx)
		if c.Target == nil && c.BrowserContextID != "" {
			// Canceled between creating the context and the tab: chromedp
			// only disposes of contexts that got a tab.
			dctx, cancel := context.WithTimeout(i.ctx, 5*time.Second)
			cdp.Call(dctx, i.browser, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: c.BrowserContextID})
			cancel()
		}
		if t != nil {
			i.guard.remove(t)
		}
	}()

	if err := chromedp.Do(runCtx); err != nil {
		return nil, false, i.failure(ctx, nil, "opening a tab", KindInternal, err)
	}
	c := chromedp.FromContext(runCtx)
	t = i.guard.add(c.BrowserContextID, cdp.FrameID(c.Target.TargetID), opt.Allow, ctx.Done())
	current.Store(t)
	if _, err := cdp.Call(runCtx, i.browser, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior:         cdpbrowser.SetDownloadBehaviorBehaviorDeny,
		BrowserContextID: c.BrowserContextID,
	}); err != nil {
		return nil, false, i.failure(ctx, nil, "opening a tab", KindInternal, err)
	}
	if err := chromedp.Listen(runCtx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventFrameAttached:
			i.guard.addFrame(t, ev.FrameID)
		case *page.EventFrameNavigated:
			if ev.Frame != nil && ev.Frame.ParentID == "" && isHTTP(ev.Frame.URL) {
				t.committed.Store(true)
			}
		}
	}); err != nil {
		return nil, false, i.failure(ctx, nil, "opening a tab", KindInternal, err)
	}
	// A dialog (alert, confirm, prompt) stops the page until answered.
	opening := chromedp.Events(runCtx, page.JavascriptDialogOpening)
	dialogs.Go(func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			chromedp.Call(runCtx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})

	resp, err := chromedp.Run(runCtx, chromedp.NavigateResponse(u.String()))
	t.committed.Store(true)
	if err != nil {
		return nil, true, i.failure(ctx, t, "loading "+u.String(), KindNavigation, err)
	}
	if e := t.proxyError(); e != nil {
		// The proxy refused the main document over plain http or could not
		// reach its host, and answered 403 or 502 itself; that is no page of
		// the site.
		return nil, true, e
	}

	maxChars := opt.MaxTextBytes + 1 // UTF-16 units; each is at least one byte of UTF-8
	ex, err := chromedp.Run(runCtx, readPage(fmt.Sprintf(extractJS, opt.MaxLinks, maxChars, maxLinkTextBytes)))
	if err != nil {
		return nil, true, i.failure(ctx, t, "reading the page", KindInternal, err)
	}
	p := &Page{URL: ex.URL}
	if resp != nil {
		p.Status = int(resp.Status)
		if !isHTTP(p.URL) {
			p.URL = resp.URL
		}
	}
	p.Title, _ = truncate(collapse(ex.Title), maxTitleBytes)
	p.Text, p.TextTruncated = truncate(collapse(ex.Text), opt.MaxTextBytes)
	p.Links = links(ex.Links, opt.MaxLinks)

	if opt.Screenshot {
		png, err := chromedp.Run(runCtx, fullScreenshot)
		if err != nil {
			return nil, true, i.failure(ctx, t, "taking the screenshot", KindInternal, err)
		}
		if err := os.WriteFile(opt.ScreenshotPath, png, 0o600); err != nil {
			return nil, true, &Error{Kind: KindInternal, Msg: "cannot write the screenshot", Err: err}
		}
		p.Screenshot = opt.ScreenshotPath
	}
	return p, true, nil
}

// failure classifies the error of a step: a refused main document first (the
// load error it causes says less), then the end of ctx, the death of
// Chromium, the proxy's failure to reach the main document's host, a load
// error of the page, and else the fallback kind.
func (i *instance) failure(ctx context.Context, t *tab, doing string, fallback Kind, err error) *Error {
	if t != nil {
		if blocked := t.blockedError(); blocked != nil {
			return blocked
		}
	}
	if ctx.Err() != nil {
		return contextError(ctx, doing)
	}
	if !i.alive() {
		return &Error{Kind: KindUnavailable, Msg: "chromium exited while " + doing, Err: err}
	}
	if t != nil {
		if e := t.proxyError(); e != nil {
			return e
		}
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		return &Error{Kind: KindNavigation, Msg: doing + ": " + le.ErrorText, Err: err}
	}
	return &Error{Kind: fallback, Msg: "failed " + doing, Err: err}
}

// readPage runs script in an isolated world of the main frame: it sees the
// page's DOM but not its JavaScript, so a page cannot tamper with the
// builtins the script uses.
func readPage(script string) chromedp.Action[extracted] {
	return func(ctx context.Context, t *chromedp.Target) (extracted, error) {
		var ex extracted
		world, err := cdp.Call(ctx, t, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{
			FrameID:   cdp.FrameID(t.TargetID), // the main frame has the id of its tab
			WorldName: "toolbelt",
		})
		if err != nil {
			return ex, err
		}
		yes := true
		res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{
			Expression:    script,
			ContextID:     world.ExecutionContextID,
			ReturnByValue: &yes,
		})
		if err != nil {
			return ex, err
		}
		if res.ExceptionDetails != nil {
			return ex, &chromedp.ExceptionError{ExceptionDetails: res.ExceptionDetails}
		}
		if res.Result == nil {
			return ex, errors.New("no result")
		}
		// encoding/json replaces invalid UTF-8 rather than failing.
		return ex, json.Unmarshal(res.Result.Value, &ex)
	}
}

// extracted is what extractJS returns.
type extracted struct {
	URL   string    `json:"url"`
	Title string    `json:"title"`
	Text  string    `json:"text"`
	Links []rawLink `json:"links"`
}

type rawLink struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// extractJS reads the page in one evaluation. It collapses and cuts the text
// before sending it, so that a huge page costs no huge message; Go checks and
// cuts again in bytes. Its arguments are the link limit, the text limit in
// UTF-16 units and the link text limit.
const extractJS = `(() => {
	const clean = s => String(s || "").split("\n").map(l => l.replace(/\s+/g, " ").trim()).filter(l => l !== "").join("\n");
	let text = document.body ? clean(document.body.innerText) : "";
	if (text.length > %[2]d) text = text.slice(0, %[2]d);
	const links = [], seen = new Set();
	for (const a of document.querySelectorAll("a[href]")) {
		if (links.length >= %[1]d) break;
		const href = a.href;
		if (typeof href !== "string" || !/^https?:/i.test(href) || seen.has(href)) continue;
		seen.add(href);
		const label = a.innerText || a.getAttribute("aria-label") || a.title || "";
		links.push({text: clean(label).replace(/\n/g, " ").slice(0, %[3]d), url: href});
	}
	return {url: location.href, title: document.title, text, links};
})()`

// links keeps the absolute http(s) links, once each, in page order, up to max.
func links(raw []rawLink, max int) []Link {
	out := []Link{}
	seen := make(map[string]bool)
	for _, l := range raw {
		if len(out) >= max {
			break
		}
		if !isHTTP(l.URL) || seen[l.URL] {
			continue
		}
		seen[l.URL] = true
		text, _ := truncate(strings.Join(strings.Fields(l.Text), " "), maxLinkTextBytes)
		out = append(out, Link{Text: text, URL: l.URL})
	}
	return out
}

// isHTTP reports whether s is an absolute http or https URL with a host.
func isHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// collapse turns each run of white space in a line into one space, trims the
// lines and drops the empty ones.
func collapse(s string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.ToValidUTF8(s, "\uFFFD"), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Join(fields, " "))
	}
	return b.String()
}

// truncate cuts s to at most n bytes on a UTF-8 boundary and reports whether
// it cut.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// fullScreenshot captures the whole page as PNG, up to maxShotWidth by
// maxShotHeight CSS pixels.
func fullScreenshot(ctx context.Context, t *chromedp.Target) ([]byte, error) {
	m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
	if err != nil {
		return nil, err
	}
	w, h := 1280.0, 800.0
	if m.CSSContentSize != nil && m.CSSContentSize.Width > 0 && m.CSSContentSize.Height > 0 {
		w, h = m.CSSContentSize.Width, m.CSSContentSize.Height
	}
	yes := true
	res, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format:                page.CaptureScreenshotFormatPng,
		CaptureBeyondViewport: &yes,
		FromSurface:           &yes,
		Clip:                  &page.Viewport{Width: min(w, maxShotWidth), Height: min(h, maxShotHeight), Scale: 1},
	})
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}
