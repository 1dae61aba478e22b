package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"
)

// needChromium returns the Chromium to test with. Without one the test is
// skipped, except on CI, where a missing browser must fail the build.
func needChromium(t *testing.T) string {
	t.Helper()
	path, err := Find(os.Getenv("TOOLBELT_CHROMIUM"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return path
}

// logRecorder keeps what the Browser logs, to check what it says.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, string(p))
	return len(p), nil
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "")
}

// newBrowser starts a Browser for one test; Chromium itself starts on the
// first Navigate.
func newBrowser(t *testing.T) (*Browser, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	b := New(needChromium(t), slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(b.Close)
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("DEBUGLOG") != "" {
			t.Log(rec.String())
		}
	})
	return b, rec
}

// counted is an httptest server on 127.0.0.1 that counts its requests.
type counted struct {
	*httptest.Server
	hits atomic.Int64
}

func newCounted(t *testing.T, h http.Handler) *counted {
	t.Helper()
	s := &counted{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// host is the host:port that Allow sees for the server.
func (s *counted) host() string { return s.Listener.Addr().String() }

// port is the port of the server, to reach it by another host name.
func (s *counted) port() string {
	_, port, _ := net.SplitHostPort(s.host())
	return port
}

// refusing returns an Allow that refuses the hosts and records every URL it
// is asked about.
func refusing(hosts ...string) (func(*url.URL) error, func() []string) {
	var mu sync.Mutex
	var seen []string
	allow := func(u *url.URL) error {
		mu.Lock()
		seen = append(seen, u.String())
		mu.Unlock()
		for _, h := range hosts {
			if u.Host == h {
				return errors.New("host " + h + " is refused")
			}
		}
		return nil
	}
	return allow, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func navigate(t *testing.T, b *Browser, opt Options) (*Page, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return b.Navigate(ctx, opt)
}

func wantKind(t *testing.T, err error, kinds ...Kind) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want a *browser.Error of kind %v", err, kinds)
	}
	for _, k := range kinds {
		if e.Kind == k {
			return
		}
	}
	t.Fatalf("error kind = %s (%v), want %v", e.Kind, err, kinds)
}

func TestNavigateReadsPage(t *testing.T) {
	b, _ := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.Error(w, "no such page", http.StatusNotFound)
			return
		case "/dialog":
			fmt.Fprint(w, `<title>dialog</title><script>alert("hi"); confirm("sure?")</script><p>after the dialogs</p>`)
			return
		}
		fmt.Fprint(w, `<!doctype html><html><head><title>  Tool   Belt  </title></head><body>
<h1>Hello,    world</h1>
<p>First    paragraph
   spread over lines.</p>
<p>Second paragraph with <a href="/docs?x=1">the   docs</a>.</p>
<script>document.write("<p>written by script</p>")</script>
<a href="https://example.com/abs">Absolute</a>
<a href="/docs?x=1">Docs again</a>
<a href="javascript:alert(1)">Script link</a>
<a href="mailto:someone@example.com">Mail</a>
<a href="sub/page#part">Relative</a>
<p style="display:none">hidden text</p>
<script>Set.prototype.has = () => true; String.prototype.trim = () => "tampered"</script>
</body></html>`)
	}))

	p, err := navigate(t, b, Options{URL: srv.URL + "/dir/index.html"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Tool Belt" {
		t.Errorf("title = %q", p.Title)
	}
	if p.Status != http.StatusOK || p.URL != srv.URL+"/dir/index.html" {
		t.Errorf("status, URL = %d, %q", p.Status, p.URL)
	}
	for _, want := range []string{"Hello, world", "First paragraph spread over lines.", "Second paragraph with the docs.", "written by script"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, p.Text)
		}
	}
	if strings.Contains(p.Text, "hidden text") || strings.Contains(p.Text, "  ") || p.TextTruncated {
		t.Errorf("text is not the collapsed visible text (truncated %v):\n%s", p.TextTruncated, p.Text)
	}
	wantLinks := []Link{
		{Text: "the docs", URL: srv.URL + "/docs?x=1"},
		{Text: "Absolute", URL: "https://example.com/abs"},
		{Text: "Relative", URL: srv.URL + "/dir/sub/page#part"},
	}
	if fmt.Sprint(p.Links) != fmt.Sprint(wantLinks) {
		t.Errorf("links =\n%v\nwant\n%v", p.Links, wantLinks)
	}
	if p.Screenshot != "" {
		t.Errorf("screenshot = %q without asking", p.Screenshot)
	}

	p, err = navigate(t, b, Options{URL: srv.URL + "/dialog"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Text != "after the dialogs" {
		t.Errorf("dialog page: text %q", p.Text)
	}

	p, err = navigate(t, b, Options{URL: srv.URL + "/missing"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != http.StatusNotFound || !strings.Contains(p.Text, "no such page") {
		t.Errorf("404 page: status %d, text %q", p.Status, p.Text)
	}
}

func TestNavigateRedirects(t *testing.T) {
	b, rec := newBrowser(t)
	refused := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>refused</title>")
	}))
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/one":
			http.Redirect(w, r, "/two", http.StatusFound)
		case "/two":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/away":
			http.Redirect(w, r, refused.URL+"/secret?token=s3cr3t", http.StatusFound)
		default:
			fmt.Fprint(w, "<title>final</title><p>arrived</p>")
		}
	}))

	t.Run("chain", func(t *testing.T) {
		allow, seen := refusing(refused.host())
		p, err := navigate(t, b, Options{URL: srv.URL + "/one", Allow: allow})
		if err != nil {
			t.Fatal(err)
		}
		if p.URL != srv.URL+"/final" || p.Title != "final" || p.Status != http.StatusOK {
			t.Errorf("page = %q %q %d, want the final page", p.URL, p.Title, p.Status)
		}
		for _, hop := range []string{"/one", "/two", "/final"} {
			if !contains(seen(), srv.URL+hop) {
				t.Errorf("Allow never saw the hop %s: %v", hop, seen())
			}
		}
	})

	t.Run("to a refused host", func(t *testing.T) {
		allow, _ := refusing(refused.host())
		_, err := navigate(t, b, Options{URL: srv.URL + "/away", Allow: allow})
		wantKind(t, err, KindBlocked)
		var e *Error
		errors.As(err, &e)
		if !strings.Contains(e.Msg, refused.URL+"/secret") || !strings.Contains(e.Msg, "is refused") {
			t.Errorf("message %q does not name the URL and the reason", e.Msg)
		}
		if n := refused.hits.Load(); n != 0 {
			t.Errorf("the refused server got %d requests", n)
		}
		logs := rec.String()
		if !strings.Contains(logs, "blocked request") || !strings.Contains(logs, refused.host()) {
			t.Errorf("the block is not logged with the host:\n%s", logs)
		}
		if strings.Contains(logs, "s3cr3t") || strings.Contains(logs, "/secret") {
			t.Errorf("the log holds more than the host:\n%s", logs)
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestNavigateBlocksSubresources loads pages whose parts reach for a refused
// server in every way the guard must see. Each page finishes loading only when
// its script has tried (see /wait), so the refusals happen during the call.
func TestNavigateBlocksSubresources(t *testing.T) {
	b, _ := newBrowser(t)
	cases := []struct {
		name  string
		page  string // %[1]s is the refused server, %[2]s the port of the page's server
		extra map[string]string
		want  []string // paths of the refused server that Allow must have refused
	}{
		{
			name: "img and fetch",
			page: `<img src="%[1]s/img.png"><script>fetch("%[1]s/api?q=1").catch(() => {}).finally(() => fetch("/done"))</script>`,
			want: []string{"/img.png", "/api?q=1"},
		},
		{
			name: "cross-site iframe",
			page: `<iframe src="http://localhost:%[2]s/frame"></iframe>`,
			extra: map[string]string{
				"/frame": `<img src="%[1]s/frame-img.png"><script>fetch("%[1]s/frame-api").catch(() => {}).finally(() => fetch("/done"))</script>`,
			},
			want: []string{"/frame-img.png", "/frame-api"},
		},
		{
			name: "dedicated worker",
			page: `<script>new Worker("/worker.js")</script>`,
			extra: map[string]string{
				"/worker.js": `fetch("%[1]s/from-worker").catch(() => {}).finally(() => fetch("/done"))`,
			},
			want: []string{"/from-worker"},
		},
		{
			name: "service worker",
			page: `<script>navigator.serviceWorker.register("/sw.js")</script>`,
			extra: map[string]string{
				"/sw.js": `fetch("%[1]s/from-sw").catch(() => {}).finally(() => fetch("/done"))`,
			},
			want: []string{"/from-sw"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := newCounted(t, http.NotFoundHandler())
			srv, done := waitingSite(t, tc.page, tc.extra, func(srv *counted, body string) string {
				return fmt.Sprintf(body, refused.URL, srv.port())
			})
			allow, seen := refusing(refused.host())

			p, err := navigate(t, b, Options{URL: srv.URL + "/", Allow: allow})
			if err != nil {
				t.Fatal(err)
			}
			if p.Title != "loaded" {
				t.Errorf("title = %q", p.Title)
			}
			select {
			case <-done:
			default:
				t.Errorf("the page never reported its attempt")
			}
			for _, path := range tc.want {
				if !contains(seen(), refused.URL+path) {
					t.Errorf("Allow never saw %s: %v", path, seen())
				}
			}
			if n := refused.hits.Load(); n != 0 {
				t.Errorf("the refused server got %d requests", n)
			}
		})
	}
}

func TestNavigateScreenshot(t *testing.T) {
	b, _ := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<title>tall</title><body style="height:3000px;background:linear-gradient(red,blue)">tall page</body>`)
	}))
	path := filepath.Join(t.TempDir(), "shot.png")

	p, err := navigate(t, b, Options{URL: srv.URL, Screenshot: true, ScreenshotPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if p.Screenshot != path {
		t.Errorf("screenshot = %q, want %q", p.Screenshot, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("the file does not start with the PNG signature: % x", data[:min(len(data), 8)])
	}

	_, err = navigate(t, b, Options{URL: srv.URL, Screenshot: true, ScreenshotPath: "shot.png"})
	wantKind(t, err, KindInvalid)
}

func TestNavigateLimits(t *testing.T) {
	b, _ := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>big</title><p>", strings.Repeat("héllo wörld ", 100), "</p>")
		for i := range 50 {
			fmt.Fprintf(w, `<a href="/p%d">link %d</a>`, i, i)
		}
	}))

	p, err := navigate(t, b, Options{URL: srv.URL, MaxTextBytes: 101, MaxLinks: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !p.TextTruncated || len(p.Text) > 101 || len(p.Text) < 97 || !utf8.ValidString(p.Text) {
		t.Errorf("text of %d bytes, truncated %v, valid UTF-8 %v", len(p.Text), p.TextTruncated, utf8.ValidString(p.Text))
	}
	if !strings.HasPrefix(p.Text, "héllo wörld héllo") {
		t.Errorf("text = %q", p.Text)
	}
	if len(p.Links) != 7 || p.Links[6].URL != srv.URL+"/p6" {
		t.Errorf("links = %v, want the first 7", p.Links)
	}

	p, err = navigate(t, b, Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if p.TextTruncated || len(p.Links) != 50 {
		t.Errorf("defaults: truncated %v, %d links", p.TextTruncated, len(p.Links))
	}
}

// TestNavigateNeverAnswers checks that a page that never loads ends with the
// context, promptly, and that its tab is closed.
func TestNavigateNeverAnswers(t *testing.T) {
	b, _ := newBrowser(t)
	release := make(chan struct{})
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	// Start Chromium first: on a loaded machine its start alone can take
	// longer than the deadline below, which would leave no tab to check.
	up := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if _, err := navigate(t, b, Options{URL: up.URL}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want Kind
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 2*time.Second)
		}, KindTimeout},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, KindCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := b.Navigate(ctx, Options{URL: srv.URL + "/hang"})
				errc <- err
			}()
			select {
			case err := <-errc:
				wantKind(t, err, tc.want)
			case <-time.After(30 * time.Second):
				t.Fatal("Navigate did not return after its context ended")
			}
			for _, p := range pageTargets(t, b) {
				if strings.Contains(p, srv.URL) {
					t.Errorf("the tab of %s is still open", p)
				}
			}
		})
	}
}

// pageTargets lists the URLs of the open tabs.
func pageTargets(t *testing.T, b *Browser) []string {
	t.Helper()
	b.lock <- struct{}{}
	inst := b.inst
	<-b.lock
	infos, err := chromedp.Targets(inst.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, info := range infos {
		if info.Type == "page" {
			urls = append(urls, info.URL)
		}
	}
	return urls
}

func TestNavigateErrors(t *testing.T) {
	b, _ := newBrowser(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/"
	closed.Close()
	download := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", "attachment; filename=x.bin")
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprint(w, "binary")
	}))

	for _, tc := range []struct {
		name  string
		url   string
		allow func(*url.URL) error
		want  []Kind
	}{
		{"connection refused", closedURL, nil, []Kind{KindNavigation}},
		{"unknown host", "http://no-such-host.invalid/", nil, []Kind{KindNavigation}},
		{"download", download.URL + "/file.bin", nil, []Kind{KindNavigation}},
		{"file", "file:///etc/passwd", nil, []Kind{KindNavigation, KindBlocked}},
		{"javascript", "javascript:alert(1)", nil, []Kind{KindNavigation}},
		{"no host", "http:///path", nil, []Kind{KindNavigation}},
		{"not a URL", "http://[::1", nil, []Kind{KindNavigation}},
		{"refused start", "http://127.0.0.1:1/", func(*url.URL) error { return errors.New("private address") }, []Kind{KindBlocked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := navigate(t, b, Options{URL: tc.url, Allow: tc.allow})
			if p != nil {
				t.Errorf("page = %+v, want none", p)
			}
			wantKind(t, err, tc.want...)
			if strings.Contains(err.Error(), "root:") {
				t.Errorf("the error shows the file: %v", err)
			}
		})
	}
}

func TestNavigateUnavailable(t *testing.T) {
	b := New(filepath.Join(t.TempDir(), "no-chromium"), nil)
	defer b.Close()
	_, err := navigate(t, b, Options{URL: "http://127.0.0.1:1/"})
	wantKind(t, err, KindUnavailable)
}

// TestNavigateConcurrent runs three slow pages at once, as the server allows,
// and checks that calls share no cookies.
func TestNavigateConcurrent(t *testing.T) {
	b, _ := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		cookie := "none"
		if c, err := r.Cookie("session"); err == nil {
			cookie = c.Value
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: r.URL.Query().Get("n")})
		fmt.Fprintf(w, "<title>page %s</title><p>cookie %s</p>", r.URL.Query().Get("n"), cookie)
	}))
	if _, err := navigate(t, b, Options{URL: srv.URL + "/?n=warmup"}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	pages := make([]*Page, 3)
	for i := range 3 {
		wg.Go(func() {
			pages[i], errs[i] = navigate(t, b, Options{URL: srv.URL + "/?n=" + strconv.Itoa(i)})
		})
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Errorf("navigation %d: %v", i, errs[i])
			continue
		}
		if want := "page " + strconv.Itoa(i); pages[i].Title != want {
			t.Errorf("navigation %d: title %q, want %q", i, pages[i].Title, want)
		}
		if !strings.Contains(pages[i].Text, "cookie none") {
			t.Errorf("navigation %d saw a cookie of another call: %q", i, pages[i].Text)
		}
	}
}

// TestBrowserRestarts checks the lazy start after Close and after Chromium
// was killed from outside, and that Close leaves nothing behind.
func TestBrowserRestarts(t *testing.T) {
	b, rec := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>up</title>")
	}))
	load := func() {
		t.Helper()
		p, err := navigate(t, b, Options{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if p.Title != "up" {
			t.Fatalf("title = %q", p.Title)
		}
	}

	load()
	first := chromiumPID(t, b)
	dir := userDataDir(t, first)
	b.Close()
	b.Close()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the profile %s is still there: %v", dir, err)
	}
	if pids := processesUsing(dir); len(pids) > 0 {
		t.Errorf("processes %v still use the profile", pids)
	}

	load()
	second := chromiumPID(t, b)
	if second == first {
		t.Fatalf("Chromium did not restart after Close (pid %d)", second)
	}

	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	load()
	third := chromiumPID(t, b)
	if third == second {
		t.Fatalf("Chromium did not restart after it was killed (pid %d)", third)
	}
	if logs := rec.String(); strings.Count(logs, "chromium started") != 3 || !strings.Contains(logs, "restarting") {
		t.Errorf("starts and restarts are not logged:\n%s", logs)
	}
}

func chromiumPID(t *testing.T, b *Browser) int {
	t.Helper()
	b.lock <- struct{}{}
	defer func() { <-b.lock }()
	if b.inst == nil || b.inst.pid == 0 {
		t.Fatal("no Chromium process")
	}
	return b.inst.pid
}

func userDataDir(t *testing.T, pid int) string {
	t.Helper()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
		if dir, ok := strings.CutPrefix(string(arg), "--user-data-dir="); ok {
			return dir
		}
	}
	t.Fatalf("no --user-data-dir in %q", cmdline)
	return ""
}

// processesUsing lists the processes started with the profile dir.
func processesUsing(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte("--user-data-dir="+dir+"\x00")) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestFind(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Find(self); err != nil || got != self {
		t.Errorf("Find(%q) = %q, %v; want the configured one", self, got, err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := Find(missing); err == nil || !strings.Contains(err.Error(), "TOOLBELT_CHROMIUM") {
		t.Errorf("Find(%q), a missing one: %v", missing, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(""); err == nil || !strings.Contains(err.Error(), "apt-get install chromium") {
		t.Errorf("Find(\"\") with nothing on PATH: %v", err)
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in    string
		max   int
		want  string
		trunc bool
	}{
		{"  a \t b  \n\n\n  c  ", 100, "a b\nc", false},
		{"\u00a0x\u00a0\u00a0y", 100, "x y", false},
		{"héllo", 2, "h", true},
		{"héllo", 3, "hé", true},
		{"日本語", 4, "日", true},
		{"abc", 3, "abc", false},
		{"bad \xff byte", 100, "bad \uFFFD byte", false},
	} {
		got, trunc := truncate(collapse(tc.in), tc.max)
		if got != tc.want || trunc != tc.trunc {
			t.Errorf("truncate(collapse(%q), %d) = %q, %v; want %q, %v", tc.in, tc.max, got, trunc, tc.want, tc.trunc)
		}
	}
}

func TestGuardUnattributed(t *testing.T) {
	g := newGuard(slog.New(slog.DiscardHandler))
	u, _ := url.Parse("http://10.0.0.1/x")
	if err := g.refuseUnattributed(u); err == nil {
		t.Error("a request with no call in flight was allowed")
	}
	open := g.add("ctx-open", "frame-open", nil, nil)
	if err := g.refuseUnattributed(u); err != nil {
		t.Errorf("refused with only an allow-all call in flight: %v", err)
	}
	strict := g.add("ctx-strict", "frame-strict", func(u *url.URL) error {
		if u.Hostname() == "10.0.0.1" {
			return errors.New("private address")
		}
		return nil
	}, nil)
	if err := g.refuseUnattributed(u); err == nil {
		t.Error("allowed although one call in flight refuses it")
	}
	g.addFrame(strict, "child")
	if got := g.owner(t.Context(), nil, "child"); got != strict {
		t.Errorf("owner of an attached frame = %v", got)
	}
	strict.closing.Store(true)
	if got := g.refuseUnattributed(u); !errors.Is(got, errClosing) {
		t.Errorf("a request while a call closes: %v, want it refused", got)
	}
	g.remove(strict)
	g.addFrame(strict, "late")
	if err := g.refuseUnattributed(u); err != nil {
		t.Errorf("a finished call still refuses: %v", err)
	}
	if len(g.byFrame) != 1 || g.byFrame["frame-open"] != open {
		t.Errorf("frames left after remove: %v", g.byFrame)
	}
	if err := check(func(*url.URL) error { panic("boom") }, u); err == nil {
		t.Error("a panicking Allow allowed the request")
	}
}
