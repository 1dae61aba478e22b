package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/services/netpolicy"
)

// TestHTTPRequestTool fetches from a local server that the policy allows
// explicitly: retries on 503, redaction, and redirects re-checked.
func TestHTTPRequestTool(t *testing.T) {
	var flaky atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("hello " + r.Method))
		case "/flaky":
			if flaky.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("finally"))
		case "/leak":
			_, _ = w.Write([]byte("aws_access_key_id=AKIAZ7VRSQ4TJNWDEMPX"))
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	}))
	defer srv.Close()
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	call := func(path string, extra map[string]any) (int, map[string]any) {
		args := map[string]any{"url": srv.URL + path}
		for k, v := range extra {
			args[k] = v
		}
		return app.call(t, "admin", map[string]any{"tool": "http_request", "arguments": args})
	}
	if code, res := call("/ok", map[string]any{"method": "POST", "body": "x"}); code != 200 || res["data"].(map[string]any)["body"] != "hello POST" {
		t.Fatalf("ok: %d %v", code, res)
	}
	code, res := call("/flaky", nil)
	if code != 200 || res["success"] != true || res["metadata"].(map[string]any)["attempts"] != float64(3) {
		t.Fatalf("flaky: %d %v", code, res)
	}
	// The tool's log lines carry the call id: two failed attempts, then
	// the answer.
	id := res["call_id"].(string)
	logs := app.logs.String()
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"tool attempt failed"`) && strings.Contains(line, `"call_id":"`+id+`"`) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d failed attempts logged with call id %s; want 2:\n%s", n, id, logs)
	}
	// The record lists the chain as it ran: every guard in order, the
	// execution, and the three attempts with the two failures' code.
	rec := app.poll(t, "admin", id)
	stages, _ := rec["stages"].([]any)
	var names []string
	for _, s := range stages {
		st := s.(map[string]any)
		name := st["stage"].(string)
		if name == "attempt" {
			name += fmt.Sprint(st["n"], ":", st["error"])
		}
		if us, ok := st["us"].(float64); !ok || us < 0 {
			t.Errorf("stage %v has no time", st)
		}
		names = append(names, name)
	}
	want := "resolve validate authorize approve secure cache limit queue execute attempt1:UPSTREAM_ERROR attempt2:UPSTREAM_ERROR attempt3:<nil>"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("stages\n%s\nwant\n%s", got, want)
	}
	page := signedIn(t, app, "admin").get("/admin/calls/" + id)
	rows := page.Doc.Find(`[data-testid="call-stage"]`)
	if rows.Length() != len(stages) {
		t.Errorf("the call page lists %d stages, the record %d", rows.Length(), len(stages))
	}
	cells := func(i int) string {
		var out []string
		rows.Eq(i).Find("td").Each(func(_ int, td *goquery.Selection) { out = append(out, strings.TrimSpace(td.Text())) })
		return strings.Join(out, " | ")
	}
	if got := cells(rows.Length() - 1); !regexp.MustCompile(`^attempt 3 \| [0-9.]+ (µs|ms|s) \| ok$`).MatchString(got) {
		t.Errorf("the last stage row reads %q", got)
	}
	if got := cells(9); !regexp.MustCompile(`^attempt 1 \| [0-9.]+ (µs|ms|s) \| UPSTREAM_ERROR$`).MatchString(got) {
		t.Errorf("the first attempt's row reads %q", got)
	}
	if got := cells(0); !regexp.MustCompile(`^resolve \| [0-9.]+ (µs|ms|s) \| $`).MatchString(got) {
		t.Errorf("the first stage row reads %q", got)
	}
	if _, res := call("/leak", nil); strings.Contains(res["data"].(map[string]any)["body"].(string), "AKIAZ7VRSQ4TJNWDEMPX") {
		t.Errorf("secret in a fetched body was not redacted: %v", res)
	}
	if _, res := call("/redirect", nil); res["success"] != false || errCode(res) != "URL_NOT_ALLOWED" {
		t.Errorf("redirect to the metadata service: %v", res)
	}
}

// TestHTTPRequestSSRF refuses internal addresses under the default policy.
func TestHTTPRequestSSRF(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("INTERNAL-SENTINEL-BODY")) }))
	defer srv.Close()
	app := newTestApp(t)
	for _, u := range []string{
		srv.URL, "http://localhost:1/", "http://127.0.0.1/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/", "http://192.168.1.1/", "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/", "http://0.0.0.0/",
		"ftp://example.com/", "http://user:pw@example.com/", "file:///etc/passwd", "gopher://127.0.0.1:25/",
		"http://[::127.0.0.1]/", "http://[::ffff:0:127.0.0.1]/", "http://[::%25lo]/", "http://[::1%25lo]/", "http://[0::0%251]/", "http://[fe80::1%25lo]/", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "http://[fec0::1]/",
	} {
		code, res := app.call(t, "admin", map[string]any{"tool": "http_request", "arguments": map[string]any{"url": u}})
		if res["success"] != false || (code != 403 && code != 422) || (errCode(res) != "URL_NOT_ALLOWED" && errCode(res) != "VALIDATION_ERROR") || strings.Contains(string(mustJSON(res)), "INTERNAL-SENTINEL-BODY") {
			t.Errorf("%s: %d %v", u, code, res)
		}
	}
}

// TestCancelRunningCall cancels an async call while its request hangs.
func TestCancelRunningCall(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done() // hang until the client gives up
	}))
	defer srv.Close()
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "http_request", "async": true, "arguments": map[string]any{"url": srv.URL}})
	id := r.JSON(t)["call_id"].(string)
	<-entered
	if r := app.do(t, "admin", "DELETE", "/api/v1/calls/"+id, nil); r.Status != 202 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if rec := app.poll(t, "admin", id); rec["status"] != "failed" || rec["error_code"] != "CANCELLED" {
		t.Errorf("cancelled running call: %v", rec)
	}
}
