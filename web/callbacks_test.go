package web_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"toolbelt/app"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/netpolicy"
)

// verifyWebhook checks a delivery as docs/calls.md tells a receiver to,
// written from the Standard Webhooks scheme and not from Toolbelt's code:
// the timestamp within 5 minutes of now, and a v1 signature that is the
// base64 HMAC-SHA256 of id.timestamp.body keyed by the decoded secret.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return errors.New("no webhook-id or webhook-timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %s is %s away", ts, d)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if v, got, _ := strings.Cut(sig, ","); v == "v1" && hmac.Equal([]byte(got), []byte(want)) {
			return nil
		}
	}
	return errors.New("no valid v1 signature")
}

// receiver is a real callback receiver on loopback: it verifies every
// delivery with secret, answers 500 to the first failFirst deliveries of
// each call (all of them while down), 204 after, and counts what it saw.
type receiver struct {
	t         *testing.T
	srv       *httptest.Server
	failFirst int

	mu       sync.Mutex
	secret   string
	down     bool
	seen     map[string]int // webhook-id → deliveries received
	ok       map[string]int // webhook-id → deliveries answered 2xx
	last     map[string]delivery
	strayHit int // requests to /never, where only a followed redirect leads
}

type delivery struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, failFirst int) *receiver {
	r := &receiver{t: t, failFirst: failFirst, seen: map[string]int{}, ok: map[string]int{}, last: map[string]delivery{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/never", func(http.ResponseWriter, *http.Request) {
		r.mu.Lock()
		r.strayHit++
		r.mu.Unlock()
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/never", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/hook", func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || req.URL.Query().Get("token") != "abc" {
			r.t.Errorf("delivery %s %s, Content-Type %q", req.Method, req.URL, req.Header.Get("Content-Type"))
		}
		if err := verifyWebhook(r.secret, req.Header, body, time.Now()); err != nil {
			r.t.Errorf("delivery does not verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := req.Header.Get("webhook-id")
		r.seen[id]++
		r.last[id] = delivery{header: req.Header.Clone(), body: body}
		if r.down || r.seen[id] <= r.failFirst {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		r.ok[id]++
		w.WriteHeader(http.StatusNoContent)
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) counts(id string) (seen, ok int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id], r.ok[id]
}

// loopback lets the app reach the test's receivers.
var loopback = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// fastCallbacks retries deliveries within milliseconds.
func fastCallbacks(attempts int) func(*app.Config) {
	return func(c *app.Config) {
		c.Callbacks.FirstWait, c.Callbacks.MaxWait, c.Callbacks.Rescan = 10*time.Millisecond, 40*time.Millisecond, 50*time.Millisecond
		c.Callbacks.MaxAttempts = attempts
	}
}

// callbackOf polls a call through the API until its delivery is over and
// returns the record.
func (a *testApp) callbackOf(t *testing.T, role, id string) (map[string]any, map[string]any) {
	t.Helper()
	var rec, cb map[string]any
	poll.Until(t, 30*time.Second, "delivery of call "+id+" over", func() (bool, string) {
		rec = a.do(t, role, "GET", "/api/v1/calls/"+id, nil).JSON(t)
		var ok bool
		cb, ok = rec["callback"].(map[string]any)
		return ok && cb["state"] != "waiting" && cb["state"] != "pending", fmt.Sprintf("%v (%v)", rec["callback"], rec)
	})
	return rec, cb
}

// TestCallbacks: async calls and calls that waited for approval POST their
// ToolResult to a real receiver, signed with the caller's secret; the
// receiver fails the first two deliveries of each and sees exactly one
// 2xx delivery per call, with the attempts recorded on the call, in the
// API and on the console. A redirect is not followed, and a tampered body
// or another secret does not verify.
func TestCallbacks(t *testing.T) {
	ta := newTestAppWith(t, hostCaps{Sandbox: true}, loopback, fastCallbacks(5))
	scans := callbackScans(t, ta.store) // before Run: gorm's callbacks are not registered concurrently
	ta.serve(t)
	dangerousWrite(t, ta)
	recv := newReceiver(t, 2)
	r := ta.do(t, "agent", "GET", "/api/v1/me/callback-secret", nil)
	secret, _ := r.JSON(t)["secret"].(string)
	if r.Status != 200 || !strings.HasPrefix(secret, "whsec_") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("callback secret: %d %s", r.Status, r.Body)
	}
	recv.mu.Lock()
	recv.secret = secret
	recv.mu.Unlock()
	hook := recv.srv.URL + "/hook?token=abc"

	accepted := func(body map[string]any) string {
		t.Helper()
		body["callback_url"] = hook
		r := ta.do(t, "agent", "POST", "/api/v1/calls", body)
		if r.Status != http.StatusAccepted {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["call_id"].(string)
	}
	var async []string
	for i := range 3 {
		async = append(async, accepted(map[string]any{"tool": "file_list", "session_id": "cb", "async": true, "arguments": map[string]any{"recursive": i%2 == 0}}))
	}
	approvedID := accepted(map[string]any{"tool": "overwrite_note", "session_id": "cb", "arguments": map[string]any{"path": "a.txt", "content": "yes"}})
	deniedID := accepted(map[string]any{"tool": "overwrite_note", "session_id": "cb", "arguments": map[string]any{"path": "a.txt", "content": "no"}})
	for id, verb := range map[string]string{approvedID: "approve", deniedID: "deny"} {
		approvals := ta.do(t, "reviewer", "GET", "/api/v1/approvals", nil).JSON(t)["approvals"].([]any)
		for _, a := range approvals {
			if a := a.(map[string]any); a["call_id"] == id {
				if r := ta.do(t, "reviewer", "POST", "/api/v1/approvals/"+a["id"].(string)+"/"+verb, map[string]any{"reason": "test"}); r.Status != 200 {
					t.Fatalf("%s: %d %s", verb, r.Status, r.Body)
				}
			}
		}
	}
	// A receiver that redirects is not followed, and the delivery fails
	// after its attempts.
	movedID := func() string {
		r := ta.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "file_list", "session_id": "cb", "async": true, "callback_url": recv.srv.URL + "/moved"})
		if r.Status != http.StatusAccepted {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["call_id"].(string)
	}()
	// A call answered at once has its answer: no delivery.
	r = ta.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "file_list", "session_id": "cb", "callback_url": hook})
	if r.Status != 200 {
		t.Fatalf("sync call: %d %s", r.Status, r.Body)
	}
	if rec := ta.do(t, "agent", "GET", "/api/v1/calls/"+r.JSON(t)["call_id"].(string), nil).JSON(t); rec["callback"] != nil {
		t.Errorf("a call answered at once has a delivery: %v", rec["callback"])
	}

	for _, id := range append(async, approvedID, deniedID) {
		rec, cb := ta.callbackOf(t, "agent", id)
		if cb["state"] != "delivered" || cb["attempts"] != 3.0 || cb["last_status"] != 204.0 || cb["delivered_at"] == nil || cb["last_error"] != nil || cb["url"] != hook {
			t.Errorf("call %s: callback %v", id, cb)
		}
		seen, ok := recv.counts(id)
		if seen != 3 || ok != 1 {
			t.Errorf("call %s: receiver saw %d deliveries, %d answered 2xx; want 3 and 1", id, seen, ok)
		}
		var sent map[string]any
		recv.mu.Lock()
		_ = json.Unmarshal(recv.last[id].body, &sent)
		recv.mu.Unlock()
		if !reflect.DeepEqual(sent, rec["result"]) || sent["call_id"] != id {
			t.Errorf("call %s: delivered %v, the call's result is %v", id, sent, rec["result"])
		}
	}
	if _, cb := ta.callbackOf(t, "agent", deniedID); cb["state"] == "delivered" {
		recv.mu.Lock()
		if body := string(recv.last[deniedID].body); !strings.Contains(body, "CONFIRMATION_DENIED") {
			t.Errorf("denied call delivered %s", body)
		}
		recv.mu.Unlock()
	}
	_, cb := ta.callbackOf(t, "agent", movedID)
	if cb["state"] != "failed" || cb["attempts"] != 5.0 || cb["last_status"] != 307.0 || !strings.Contains(fmt.Sprint(cb["last_error"]), "redirects are not followed") {
		t.Errorf("redirected delivery: %v", cb)
	}
	// Exactly one success: later scans deliver nothing again.
	moreScans(t, scans)
	for _, id := range append(async, approvedID, deniedID) {
		if seen, ok := recv.counts(id); seen != 3 || ok != 1 {
			t.Errorf("call %s delivered again: %d, %d", id, seen, ok)
		}
	}
	recv.mu.Lock()
	if recv.strayHit != 0 {
		t.Error("a redirect was followed")
	}
	recv.mu.Unlock()

	// The console shows the delivery.
	p := signedIn(t, ta, "admin").get("/admin/calls/" + async[0])
	if p.Status != 200 || p.TestID("call-callback-state").Text() != "delivered" || p.TestID("call-callback-attempts").Text() != "3" ||
		p.TestID("call-callback-status").Text() != "204" || p.TestID("call-callback-url").Text() != hook {
		t.Errorf("console callback: %d %q %q", p.Status, p.TestID("call-callback-state").Text(), p.TestID("call-callback-attempts").Text())
	}

	// A tampered body, an old timestamp or another secret do not verify.
	recv.mu.Lock()
	d := recv.last[async[0]]
	recv.mu.Unlock()
	if err := verifyWebhook(secret, d.header, d.body, time.Now()); err != nil {
		t.Fatalf("the delivery itself does not verify: %v", err)
	}
	tampered := []byte(strings.Replace(string(d.body), `"succeeded"`, `"failed"`, 1))
	if err := verifyWebhook(secret, d.header, tampered, time.Now()); err == nil || string(tampered) == string(d.body) {
		t.Error("a tampered body verified")
	}
	if err := verifyWebhook(secret, d.header, d.body, time.Now().Add(10*time.Minute)); err == nil {
		t.Error("a delivery 10 minutes old verified")
	}
	r = ta.do(t, "agent", "POST", "/api/v1/me/callback-secret/rotate", nil)
	rotated, _ := r.JSON(t)["secret"].(string)
	if r.Status != 200 || rotated == secret || r.JSON(t)["generation"] != 1.0 {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	if err := verifyWebhook(rotated, d.header, d.body, time.Now()); err == nil {
		t.Error("a delivery signed with the old secret verified with the new one")
	}
	agent := fmt.Sprint(ta.ids["agent"])
	for role, want := range map[string]int{"admin": 200, "reviewer": 403, "agent": 403} {
		if r := ta.do(t, role, "POST", "/api/v1/principals/"+agent+"/callback-secret/rotate", nil); r.Status != want {
			t.Errorf("%s rotating the agent's secret: %d, want %d", role, r.Status, want)
		}
	}
	if r := ta.do(t, "agent", "GET", "/api/v1/me/callback-secret", nil).JSON(t); r["generation"] != 2.0 || r["secret"] == rotated {
		t.Errorf("after the admin rotated it: %v", r)
	}
	if r := ta.do(t, "reviewer", "GET", "/api/v1/me/callback-secret", nil); r.Status != 403 {
		t.Errorf("a reviewer, who makes no calls, read a callback secret: %d", r.Status)
	}
	if strings.Contains(ta.logs.String(), strings.TrimPrefix(secret, "whsec_")) || strings.Contains(ta.logs.String(), strings.TrimPrefix(rotated, "whsec_")) {
		t.Error("the log holds a callback secret")
	}
}

// TestCallbackURLRefused: a callback_url that is not an absolute http(s)
// URL, or that the egress policy refuses in any spelling (loopback not
// allowed here), answers 400 before the call gets an id: nothing stored.
func TestCallbackURLRefused(t *testing.T) {
	ta := newTestApp(t)
	before := ta.do(t, "admin", "GET", "/api/v1/calls", nil).JSON(t)["total"]
	cases := map[string]string{
		"http://169.254.169.254/latest/meta-data/":         "private, loopback or otherwise internal",
		"http://0.0.0.0:9000/":                             "private, loopback or otherwise internal",
		"http://127.0.0.1:8080/hook":                       "private, loopback or otherwise internal",
		"http://[::ffff:127.0.0.1]/":                       "private, loopback or otherwise internal",
		"http://[::ffff:a9fe:a9fe]/":                       "private, loopback or otherwise internal",
		"http://[::1]/":                                    "private, loopback or otherwise internal",
		"http://0x7f.1/":                                   "another spelling",
		"http://2130706433/":                               "another spelling",
		"http://0177.0.0.1/":                               "another spelling",
		"http://localhost:8080/":                           "internal",
		"http://metadata.google.internal/":                 "internal",
		"http://user:pw@example.com/":                      "credentials",
		"ftp://example.com/hook":                           "scheme",
		"/relative/hook":                                   "absolute http or https URL",
		"https://example.com/" + strings.Repeat("a", 2100): "longer than 2048",
	}
	for url, want := range cases {
		for _, async := range []bool{true, false} {
			r := ta.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "file_list", "async": async, "callback_url": url})
			e, _ := r.JSON(t)["error"].(map[string]any)
			if r.Status != 400 || e["code"] != "INVALID_REQUEST" || !strings.Contains(fmt.Sprint(e["message"]), want) || !strings.Contains(fmt.Sprint(e["message"]), "callback_url") {
				t.Errorf("%.60s (async %v): %d %s, want 400 saying %q", url, async, r.Status, r.Body, want)
			}
		}
	}
	if after := ta.do(t, "admin", "GET", "/api/v1/calls", nil).JSON(t)["total"]; after != before {
		t.Errorf("refused calls were recorded: %v calls, %v before", after, before)
	}
	var stored int64
	if err := ta.store.DB().Model(&models.Callback{}).Count(&stored).Error; err != nil || stored != 0 {
		t.Errorf("%d callbacks stored (%v)", stored, err)
	}
}

// TestCallbackResumesAfterRestart: a delivery still failing when the
// server stops is resumed by the next start on the same data directory,
// from the attempts it made, signed with the same secret (the key file the
// first start made), and delivered once.
func TestCallbackResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	const adminKey = "tb_736a7f06cab7907e4fc6a1c111f6f7339c0c7be674e0c14776f3b5f22826e877"
	env := map[string]string{"TOOLBELT_ADMIN_KEY": adminKey, "TOOLBELT_HTTP_ALLOW_PRIVATE": "127.0.0.1/32"}
	start := func() (*testApp, func()) {
		cfg, err := app.ParseConfig([]string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--tools-dir", "", "--sandbox", "none"},
			func(name string) (string, bool) { v, ok := env[name]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		fastCallbacks(1000)(&cfg)
		a, err := app.New(context.Background(), cfg, app.Options{Stdout: io.Discard, LogOutput: io.Discard, Host: &hostCaps{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		stop := func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		return &testApp{handler: a.Handler, store: a.Store, keys: map[string]string{"admin": adminKey}}, stop
	}
	recv := newReceiver(t, 0)
	first, stop := start()
	recv.mu.Lock()
	recv.down = true
	recv.secret = first.do(t, "admin", "GET", "/api/v1/me/callback-secret", nil).JSON(t)["secret"].(string)
	recv.mu.Unlock()
	r := first.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "file_list", "async": true, "callback_url": recv.srv.URL + "/hook?token=abc"})
	if r.Status != 202 {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["call_id"].(string)
	poll.True(t, 30*time.Second, "two deliveries attempted", func() bool { seen, _ := recv.counts(id); return seen >= 2 })
	// Stop once the failed attempts are recorded: an attempt cut short
	// by the stop is not counted, and is made again after the restart.
	var recorded float64
	poll.Until(t, 30*time.Second, "the failed attempts recorded", func() (bool, string) {
		cb, _ := first.do(t, "admin", "GET", "/api/v1/calls/"+id, nil).JSON(t)["callback"].(map[string]any)
		recorded, _ = cb["attempts"].(float64)
		return recorded >= 2, fmt.Sprint(cb)
	})
	stop()
	recv.mu.Lock()
	recv.down = false
	failed := recv.seen[id]
	recv.mu.Unlock()

	second, stop := start()
	defer stop()
	_, got := second.callbackOf(t, "admin", id)
	if got["state"] != "delivered" || got["attempts"].(float64) < recorded+1 || got["last_status"] != 204.0 {
		t.Errorf("resumed delivery: %v after %v recorded failed attempts (%d seen by the receiver)", got, recorded, failed)
	}
	if _, ok := recv.counts(id); ok != 1 {
		t.Errorf("%d successful deliveries, want 1", ok)
	}
}

// callbackScans counts the scans for open deliveries made through store
// (its OpenCallbacks queries), so that a test asserting that later scans
// deliver nothing again waits for such scans, not for a guessed time.
// Register it before the app runs.
func callbackScans(t *testing.T, store *models.Store) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	if err := store.DB().Callback().Query().After("gorm:query").Register("test:callback_scans", func(db *gorm.DB) {
		if db.Statement.Table == "callbacks" && strings.Contains(db.Statement.SQL.String(), "state IN") {
			n.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return &n
}

// moreScans waits for two more scans counted by each of scans: the second
// begins a rescan interval after one that began after what the test did
// before, time for a delivery that scan would start to arrive.
func moreScans(t *testing.T, scans ...*atomic.Int64) {
	t.Helper()
	from := make([]int64, len(scans))
	for i, s := range scans {
		from[i] = s.Load()
	}
	poll.Until(t, 30*time.Second, "two more scans for open deliveries on every instance", func() (bool, string) {
		for i, s := range scans {
			if s.Load() < from[i]+2 {
				return false, fmt.Sprintf("instance %d: %d more", i, s.Load()-from[i])
			}
		}
		return true, ""
	})
}
