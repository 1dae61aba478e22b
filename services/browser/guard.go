package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// guard decides every request that Chromium makes, with the Allow func of the
// Navigate call that the request belongs to.
//
// Interception is enabled once on the browser session, not on each tab. A tab
// session does not see the subresources of a cross-site iframe, which
// Chromium runs as a target of its own (checked with Chromium 148); the
// browser session sees every request, including those of workers and service
// workers, and each redirect hop. The price is attribution: a
// paused request names a frame, not a tab. The guard knows the main frame of
// each tab and the frames attached in it, and asks Chromium for the browser
// context of any other frame that is a target (a cross-site iframe, a worker).
// A request it still cannot attribute (for example from a frame nested in a
// cross-site iframe) must pass the Allow of every Navigate in flight, so it is
// never allowed unless its own call would allow it, and is refused when no
// call is in flight.
type guard struct {
	log *slog.Logger

	mu        sync.Mutex
	byContext map[cdp.BrowserContextID]*tab
	byFrame   map[cdp.FrameID]*tab
}

// tab is one Navigate call as the guard sees it.
type tab struct {
	allow     func(*url.URL) error
	context   cdp.BrowserContextID
	mainFrame cdp.FrameID
	frames    []cdp.FrameID // guarded by guard.mu

	// closing is set when the call returns, and done is the Done channel of
	// the call's context. From either on, the tab's requests are refused
	// without asking allow, whose own context may have ended with the call
	// (a DNS lookup in allow would then fail, and allow might let the
	// request through).
	closing atomic.Bool
	done    <-chan struct{}

	// committed is set when the main frame has committed the document (its
	// response arrived) or its load failed; from then on a connection that
	// the proxy refuses or cannot open is no longer the main document's but
	// a subresource's, which only fails itself.
	committed atomic.Bool

	mu          sync.Mutex
	blocked     *Error   // the first refusal of a main document
	unreachable *Error   // the proxy's first failure to reach the main document's host
	mainURL     *url.URL // the last main-document request continued, each redirect hop in turn
}

func newGuard(log *slog.Logger) *guard {
	return &guard{
		log:       log,
		byContext: make(map[cdp.BrowserContextID]*tab),
		byFrame:   make(map[cdp.FrameID]*tab),
	}
}

// add registers a tab before it navigates; done is the Done channel of the
// call's context.
func (g *guard) add(bc cdp.BrowserContextID, mainFrame cdp.FrameID, allow func(*url.URL) error, done <-chan struct{}) *tab {
	t := &tab{allow: allow, context: bc, mainFrame: mainFrame, done: done}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byContext[bc] = t
	g.byFrame[mainFrame] = t
	t.frames = append(t.frames, mainFrame)
	return t
}

// addFrame records a frame attached in the tab. It runs in the event loop of
// the tab, so it only takes a lock.
func (g *guard) addFrame(t *tab, id cdp.FrameID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byContext[t.context]; !ok {
		return // the tab is gone
	}
	g.byFrame[id] = t
	t.frames = append(t.frames, id)
}

// remove forgets a tab once its browser context is disposed of.
func (g *guard) remove(t *tab) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byContext, t.context)
	for _, id := range t.frames {
		if g.byFrame[id] == t {
			delete(g.byFrame, id)
		}
	}
}

// owner returns the tab that the frame belongs to, or nil.
func (g *guard) owner(ctx context.Context, s cdp.Session, frame cdp.FrameID) *tab {
	if frame == "" {
		return nil
	}
	g.mu.Lock()
	t := g.byFrame[frame]
	g.mu.Unlock()
	if t != nil {
		return t
	}
	// A cross-site iframe and a worker are targets whose id is their frame
	// id; Chromium knows their browser context.
	res, err := cdp.Call(ctx, s, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: target.ID(frame)})
	if err != nil || res.TargetInfo == nil || res.TargetInfo.BrowserContextID == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t = g.byContext[res.TargetInfo.BrowserContextID]
	if t != nil {
		g.byFrame[frame] = t
		t.frames = append(t.frames, frame)
	}
	return t
}

// refuseUnattributed returns the first refusal among the Allow funcs of all
// tabs in flight, or an error when there is none.
func (g *guard) refuseUnattributed(u *url.URL) error {
	g.mu.Lock()
	tabs := make([]*tab, 0, len(g.byContext))
	for _, t := range g.byContext {
		tabs = append(tabs, t)
	}
	g.mu.Unlock()
	if len(tabs) == 0 {
		return errors.New("request from no known page")
	}
	for _, t := range tabs {
		if t.ended() {
			return errClosing
		}
		if err := check(t.allow, u); err != nil {
			return err
		}
	}
	return nil
}

// errClosing refuses the requests that come while a call ends.
var errClosing = errors.New("the page is closing")

// pausedRequest is the part of Fetch.requestPaused that the guard reads. It is
// decoded with encoding/json, which never fails on odd text in a URL, so that
// every paused request gets an answer.
type pausedRequest struct {
	RequestID fetch.RequestID `json:"requestId"`
	Request   struct {
		URL         string `json:"url"`
		URLFragment string `json:"urlFragment"`
	} `json:"request"`
	FrameID      cdp.FrameID          `json:"frameId"`
	ResourceType network.ResourceType `json:"resourceType"`
}

// serve answers the paused requests of the browser until the browser session
// ends. Each request is decided on its own goroutine, because Allow may be
// slow (a DNS lookup), and wg tracks them.
func (g *guard) serve(ctx context.Context, b *chromedp.Browser, events <-chan jsonv2.Value, wg *sync.WaitGroup) {
	for raw := range events {
		var p pausedRequest
		if err := json.Unmarshal(raw, &p); err != nil || p.RequestID == "" {
			g.log.Error("browser: undecodable paused request", "err", err)
			if p.RequestID != "" {
				wg.Go(func() { g.fail(ctx, b, p.RequestID) })
			}
			continue
		}
		wg.Go(func() { g.decide(ctx, b, p) })
	}
}

// decide continues the request or fails it as blocked by the client.
func (g *guard) decide(ctx context.Context, b *chromedp.Browser, p pausedRequest) {
	u, err := url.Parse(p.Request.URL + p.Request.URLFragment)
	var t *tab
	switch {
	case err != nil:
		err = errors.New("unparsable URL")
	default:
		t = g.owner(ctx, b, p.FrameID)
		switch {
		case t == nil:
			err = g.refuseUnattributed(u)
		case t.ended():
			err = errClosing
		default:
			err = check(t.allow, u)
		}
	}
	main := t != nil && p.FrameID == t.mainFrame && p.ResourceType == network.ResourceTypeDocument
	if err == nil {
		if main {
			t.setMainURL(u)
		}
		_, err = cdp.Call(ctx, b, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: p.RequestID})
		if err != nil && ctx.Err() == nil {
			g.log.Debug("browser: continue request", "err", err)
		}
		return
	}

	host := ""
	if u != nil {
		host = u.Host
	}
	level := slog.LevelInfo
	if errors.Is(err, errClosing) {
		// The call is over; its error is the end of its context.
		level, main = slog.LevelDebug, false
	}
	g.log.Log(ctx, level, "browser: blocked request", "host", host, "type", string(p.ResourceType), "main_document", main, "reason", err)
	if main {
		t.setBlocked(&Error{Kind: KindBlocked, Msg: fmt.Sprintf("%s refused: %v", p.Request.URL, err), Err: err})
	}
	g.fail(ctx, b, p.RequestID)
}

// fail fails the request as blocked by the client.
func (g *guard) fail(ctx context.Context, b *chromedp.Browser, id fetch.RequestID) {
	_, err := cdp.Call(ctx, b, fetch.FailRequest, fetch.FailRequestParams{
		RequestID:   id,
		ErrorReason: network.ErrorReasonBlockedByClient,
	})
	if err != nil && ctx.Err() == nil {
		g.log.Debug("browser: fail request", "err", err)
	}
}

// ended reports whether the call of the tab is over or its context ended.
func (t *tab) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return t.closing.Load()
	}
}

func (t *tab) setBlocked(e *Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocked == nil {
		t.blocked = e
	}
}

func (t *tab) setMainURL(u *url.URL) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mainURL = u
}

// connectionFailed is called by the proxy of the tab for a connection it
// refused or could not open. One to where the main document is loading from
// is the main document's, and so the call's error; there is no telling apart
// a subresource of the same host that fails at the same moment, which would
// fail the same.
func (t *tab) connectionFailed(u *url.URL, err error, refused bool) {
	if t.committed.Load() || errors.Is(err, errClosing) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	main := t.mainURL
	if main == nil || !sameDestination(main, u) {
		return
	}
	shown := *main
	shown.Fragment = ""
	switch {
	case refused && t.blocked == nil:
		t.blocked = &Error{Kind: KindBlocked, Msg: fmt.Sprintf("%s refused: %v", shown.String(), err), Err: err}
	case !refused && t.unreachable == nil:
		t.unreachable = &Error{Kind: KindNavigation, Msg: fmt.Sprintf("loading %s: cannot reach %s: %v", shown.String(), u.Host, err), Err: err}
	}
}

// proxyError is the refusal or else the failure that the proxy saw for the
// main document, or nil.
func (t *tab) proxyError() *Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocked != nil {
		return t.blocked
	}
	return t.unreachable
}

// sameDestination reports whether the proxy's view of a connection, an
// http URL or a tunnel as https://host:port, is where the document URL
// main connects to.
func sameDestination(main, conn *url.URL) bool {
	return main.Scheme == conn.Scheme && hostPort(main) == hostPort(conn)
}

// hostPort is the host:port that u connects to, with the default port of its
// scheme.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" || u.Scheme == "wss" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (t *tab) blockedError() *Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked
}

// check runs allow on a copy of u. A nil allow allows everything; a panic in
// allow refuses the request instead of killing the server.
func check(allow func(*url.URL) error, u *url.URL) (err error) {
	if allow == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("allow panicked: %v", r)
		}
	}()
	c := *u
	if u.User != nil {
		user := *u.User
		c.User = &user
	}
	return allow(&c)
}
