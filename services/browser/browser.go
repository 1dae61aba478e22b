// Package browser drives headless Chromium for the browser_navigate tool: it
// opens a URL in a throwaway browser context, with every request the page
// makes checked by the caller's Allow func and every connection it opens made
// by a proxy in this package that checks the address with the caller's
// Control func, and returns the page's title, text and links, and optionally
// a screenshot.
package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// startTimeout bounds how long a start of Chromium may take.
const startTimeout = 30 * time.Second

// Find locates a Chromium executable: the configured one (main reads
// TOOLBELT_CHROMIUM) if not empty, else the first of chromium,
// chromium-browser, google-chrome and headless_shell on PATH. The error
// says how to install it.
func Find(configured string) (string, error) {
	if configured != "" {
		path, err := exec.LookPath(configured)
		if err != nil {
			return "", fmt.Errorf("find chromium: TOOLBELT_CHROMIUM=%q is not an executable: %w", configured, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("find chromium: none of chromium, chromium-browser, google-chrome, headless_shell is on PATH; " +
		"install it (Debian/Ubuntu: apt-get install chromium) or set TOOLBELT_CHROMIUM to its path")
}

// Browser is one Chromium process shared by all Navigate calls. It starts on
// the first call, so a server that never browses never pays for it, and starts
// again when the process died or after Close.
type Browser struct {
	execPath string
	log      *slog.Logger

	// lock is a one-slot semaphore rather than a mutex, so that a caller
	// waiting for a start can give up when its context ends.
	lock chan struct{}
	inst *instance // guarded by lock
}

// New returns a Browser that runs the Chromium at execPath; see Find.
func New(execPath string, log *slog.Logger) *Browser {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Browser{execPath: execPath, log: log, lock: make(chan struct{}, 1)}
}

// Close kills Chromium and its child processes and removes its profile
// directory. Calls in flight fail with KindUnavailable. It is safe to call
// twice, and a later Navigate starts Chromium again.
func (b *Browser) Close() {
	b.lock <- struct{}{}
	inst := b.inst
	b.inst = nil
	<-b.lock
	if inst != nil {
		inst.stop()
		b.log.Info("browser: chromium stopped", "pid", inst.pid)
	}
}

// instance returns the running Chromium, starting it if needed.
func (b *Browser) instance(ctx context.Context) (*instance, error) {
	select {
	case b.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, contextError(ctx, "waiting for chromium to start")
	}
	defer func() { <-b.lock }()

	if b.inst != nil {
		if b.inst.alive() {
			return b.inst, nil
		}
		b.log.Warn("browser: chromium exited, restarting", "pid", b.inst.pid)
		b.inst.stop()
		b.inst = nil
	}
	inst, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	b.inst = inst
	b.log.Info("browser: chromium started", "path", b.execPath, "pid", inst.pid)
	return inst, nil
}

// instance is one Chromium process.
type instance struct {
	ctx     context.Context // the chromedp context of the browser; tabs derive from it
	browser *chromedp.Browser
	pid     int
	guard   *guard
	log     *slog.Logger
	// refuser is the proxy on Chromium's command line. Each call's browser
	// context has a proxy of its own, so what comes here belongs to no call
	// (the default context, the browser's own requests) and is refused.
	refuser *proxy

	cancel      context.CancelFunc // of ctx: kills Chromium, removes its profile
	cancelAlloc context.CancelFunc
	served      chan struct{} // closed when guard.serve returns
	decisions   sync.WaitGroup
	stopOnce    sync.Once
}

// start launches Chromium and enables the request guard before any page
// exists. It gives up after startTimeout or when ctx ends.
func (b *Browser) start(ctx context.Context) (*instance, error) {
	refuser, err := startProxy(b.log, proxyConfig{
		allow: func(*url.URL) error { return errors.New("connection of no page") },
		// Chromium's own background requests (component updates and the
		// like) come here every few seconds.
		refusedLevel: slog.LevelDebug,
	})
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Msg: "chromium cannot start", Err: err}
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), b.allocatorOptions(refuser.url())...)
	debugf := func(format string, args ...any) {
		b.log.Debug("browser: chromedp: " + fmt.Sprintf(format, args...))
	}
	bctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithBrowserOption(
		chromedp.WithBrowserLogf(debugf), chromedp.WithBrowserErrorf(debugf)))
	inst := &instance{
		ctx:         bctx,
		guard:       newGuard(b.log),
		log:         b.log,
		refuser:     refuser,
		cancel:      cancel,
		cancelAlloc: cancelAlloc,
		served:      make(chan struct{}),
	}

	started := make(chan error, 1)
	go func() { started <- inst.setup() }()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case err = <-started:
	case <-timer.C:
		inst.stop()
		<-started
		err = fmt.Errorf("no answer within %s", startTimeout)
	case <-ctx.Done():
		inst.stop()
		<-started
		return nil, contextError(ctx, "starting chromium")
	}
	if err != nil {
		inst.stop()
		b.log.Error("browser: chromium cannot start", "path", b.execPath, "err", err)
		return nil, &Error{Kind: KindUnavailable, Msg: "chromium cannot start", Err: err}
	}
	return inst, nil
}

// setup starts the process (the first Run on the browser context binds the
// process to it), then turns on interception and refuses downloads.
func (i *instance) setup() error {
	defer func() {
		if i.browser == nil {
			close(i.served)
		}
	}()
	if err := chromedp.Do(i.ctx); err != nil {
		return err
	}
	b := chromedp.FromContext(i.ctx).Browser
	i.browser = b
	if p := b.Process(); p != nil {
		i.pid = p.Pid
	}

	// Subscribe before enabling, so that no paused request goes unanswered.
	events, _ := b.Subscribe(fetch.RequestPaused.Method)
	go func() {
		defer close(i.served)
		i.guard.serve(i.ctx, b, events, &i.decisions)
	}()
	if _, err := cdp.Call(i.ctx, b, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*"}},
	}); err != nil {
		return fmt.Errorf("enable request interception: %w", err)
	}
	if _, err := cdp.Call(i.ctx, b, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny,
	}); err != nil {
		return fmt.Errorf("deny downloads: %w", err)
	}
	return nil
}

// alive reports whether the process still answers.
func (i *instance) alive() bool {
	select {
	case <-i.ctx.Done():
		return false
	case <-i.browser.LostConnection:
		return false
	default:
		return true
	}
}

// stop kills the process and its children and waits until the profile
// directory is removed and every paused request is answered.
func (i *instance) stop() {
	i.stopOnce.Do(func() {
		i.cancel()
		i.cancelAlloc()
		<-i.served
		i.decisions.Wait()
		i.refuser.close()
	})
}

// proxyBypassList makes Chromium send loopback destinations to the proxy too:
// by default it never proxies localhost, 127.0.0.0/8 and [::1].
const proxyBypassList = "<-loopback>"

// allocatorOptions returns the command line of Chromium, with proxyURL as its
// proxy. chromedp adds --remote-debugging-pipe and a temporary
// --user-data-dir, which it removes when the process has exited, after killing
// any child process left over.
//
// The flags under "Network" keep every connection on the proxy: its own
// resolver resolves nothing but the proxy's address (a proxied request is
// resolved by the proxy; this stops DNS prefetching and any lookup that would
// precede a direct connection), QUIC is off (it would be UDP, which an HTTP
// proxy cannot carry), and so is the media router's discovery. WebTransport
// needs QUIC and fails with a proxy set. WebRTC is kept off UDP by
// profilePrefs; the switch for it here is only read by headless_shell.
func (b *Browser) allocatorOptions(proxyURL string) []chromedp.ExecAllocatorOption {
	opts := []chromedp.ExecAllocatorOption{
		// Network.
		chromedp.ProxyServer(proxyURL),
		chromedp.Flag("proxy-bypass-list", proxyBypassList),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("disable-features", "MediaRouter,DialMediaRouteProvider"),

		chromedp.ExecPath(b.execPath),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("window-size", "1280,800"),
		// Chromium refuses to start as root while its sandbox is on, and a
		// server in a container often runs as root. So, and only then, the
		// sandbox is turned off; a renderer exploit then runs with the
		// server's rights. Run the server as a non-root user to keep it.
		// Setting the flag either way also stops chromedp from deciding.
		chromedp.Flag("no-sandbox", os.Geteuid() == 0),
		// The server's environment holds its secrets; Chromium gets only
		// what it needs to run.
		chromedp.NoInheritEnv,
		chromedp.ModifyCmdFunc(prepareProfile),
	}
	var env []string
	for _, k := range []string{
		"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ",
		// No *_proxy variable: Chromium's proxy is the one above, and the
		// server's proxy settings do not apply to it.
		"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "FONTCONFIG_PATH",
	} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(opts, chromedp.Env(env...))
}
