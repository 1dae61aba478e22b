package web_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/handlers/mcpserver"
	"toolbelt/internal/nodetest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// frameworkScripts are the agent frameworks and MCP clients that must work
// with Toolbelt out of the box: each script in testdata/frameworks/mcp
// drives /mcp with one of them, its default settings and a scripted model.
// The TypeScript SDK v2 runs three times: probing for 2026-07-28 ("auto",
// as the OpenAI Agents SDK configures it), pinned to it, and as
// constructed (its default mode is "legacy").
var frameworkScripts = []struct{ name, script, arg string }{
	{"vercel-ai", "mcp/vercel.mjs", ""},
	{"openai-agents", "mcp/openai-agents.mjs", ""},
	{"langchain", "mcp/langchain.mjs", ""},
	{"sdk-v1", "mcp/sdk.mjs", "v1"},
	{"sdk-v2", "mcp/sdk.mjs", "v2-auto"},
	{"sdk-v2-pinned", "mcp/sdk.mjs", "v2-pinned"},
	{"sdk-v2-legacy", "mcp/sdk.mjs", "v2"},
}

// stepReport is what every step of a framework script reports.
type stepReport struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// frameworkReport is what a script in testdata/frameworks/mcp found.
type frameworkReport struct {
	Client   string            `json:"client"`
	Versions map[string]string `json:"versions"`
	Load     struct {
		stepReport
		Protocol string          `json:"protocol"`
		Era      string          `json:"era"`
		Server   json.RawMessage `json:"server"`
		Count    int             `json:"count"`
		Names    []string        `json:"names"`
	} `json:"load"`
	Schemas struct {
		stepReport
		Converted           int             `json:"converted"`
		Failed              json.RawMessage `json:"failed"`
		RootCombinators     []string        `json:"root_combinators"`
		Sent                int             `json:"sent"`
		SentRootCombinators []string        `json:"sent_root_combinators"`
		FindRecord          json.RawMessage `json:"find_record"`
	} `json:"schemas"`
	Safe struct {
		stepReport
		ModelSaw []string `json:"model_saw"`
	} `json:"safe"`
	Refusal struct {
		stepReport
		ModelSaw string `json:"model_saw"`
	} `json:"refusal"`
	Dangerous struct {
		stepReport
		FirstModelSaw string   `json:"first_model_saw"`
		CallID        string   `json:"call_id"`
		ApprovalID    string   `json:"approval_id"`
		ApproveStatus int      `json:"approve_status"`
		Results       []string `json:"results"`
		FinalModelSaw string   `json:"final_model_saw"`
		WaitSeconds   int      `json:"wait_seconds"`
	} `json:"dangerous"`
	Cancel struct {
		stepReport
		CallID     string `json:"call_id"`
		ApprovalID string `json:"approval_id"`
		Held       bool   `json:"held"`
		Answered   bool   `json:"answered"`
		ModelSaw   string `json:"model_saw"`
		Run        string `json:"run"`
		RunError   string `json:"run_error"`
	} `json:"cancel"`
	Abort             abortReport     `json:"abort"`
	ProgressTokenSent bool            `json:"progress_token_sent"`
	CancelSent        bool            `json:"cancel_sent"`
	Wire              json.RawMessage `json:"wire"`
}

// abortReport is what a script saw when its user stopped the agent (or, in
// sdk.mjs, the host stopped the call) while slowTool ran.
type abortReport struct {
	stepReport
	// Started: the upstream had the tool's request before the abort.
	Started bool `json:"started"`
	// UpstreamCancelled: the upstream saw that request end before the
	// script went on (it polls the upstream for a while after the abort).
	UpstreamCancelled bool   `json:"upstream_cancelled"`
	Answered          bool   `json:"answered"`
	ModelSaw          string `json:"model_saw"`
	Run               string `json:"run"`
	RunError          string `json:"run_error"`
	// Wire is the tools/call of slowTool and every notifications/cancelled,
	// as sent, with what came back.
	Wire json.RawMessage `json:"wire"`
}

// TestFrameworks drives Toolbelt's MCP server with today's agent
// frameworks and the official MCP clients, each with its default settings
// and no network: the framework loads the catalog, converts every schema as
// it would for its model provider, and a scripted model makes it call a
// safe tool, meet a refusal, wait for a reviewer's approval and read the
// result with call_result, abandon a call that waits for approval, and
// stop the agent while a tool runs.
func TestFrameworks(t *testing.T) {
	nodetest.Frameworks(t)
	for _, fw := range frameworkScripts {
		t.Run(fw.name, func(t *testing.T) {
			t.Parallel()
			app, srv, upstream, catalog := frameworkApp(t)
			out, err := nodetest.ExecFramework(t, []string{
				"TOOLBELT_MCP_URL=" + srv.URL + web.MCPPath,
				"TOOLBELT_API_URL=" + srv.URL,
				"TOOLBELT_AGENT_KEY=" + app.keys["agent"],
				"TOOLBELT_REVIEWER_KEY=" + app.keys["reviewer"],
				"TOOLBELT_CLIENT=" + fw.name,
				"TOOLBELT_SLOW_TOOL=" + slowTool,
				"TOOLBELT_SLOW_STATE=" + upstream.srv.URL + "/state",
			}, fw.script, fw.arg)
			// Closed by now only if the abort reached the upstream: the
			// script's exit, which also ends its connections, comes later.
			cancelledBeforeExit := isClosed(upstream.cancelled)
			if err != nil {
				t.Fatalf("%s: %v\n%s", fw.script, err, out)
			}
			var r frameworkReport
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("report: %v\n%s", err, out)
			}
			t.Logf("%s %v: protocol %q %s, %d tools; progress token sent %v, notifications/cancelled sent %v",
				r.Client, r.Versions, r.Load.Protocol, r.Load.Era, r.Load.Count, r.ProgressTokenSent, r.CancelSent)
			t.Logf("schemas: %d converted, %d sent to the model; find_record as sent: %s", r.Schemas.Converted, r.Schemas.Sent, r.Schemas.FindRecord)
			checkFramework(t, app, fw.name, catalog, &r)
			checkAbort(t, app, upstream, &r.Abort, cancelledBeforeExit)
			if t.Failed() {
				logWire(t, r.Wire)
			}
		})
	}
}

// frameworkApp is mcpClientApp's server, with an egress policy that lets
// tools reach loopback, and two more granted tools: find_record, whose
// parameters have a oneOf at the root, which the providers behind the
// frameworks refuse (OpenAI and Anthropic answer 400 for a tool like it),
// and slow_fetch, a safe http tool in front of slowUpstream, for the user
// who stops the agent while a tool runs.
func frameworkApp(t *testing.T) (*testApp, *httptest.Server, *slowUpstream, []string) {
	t.Helper()
	app := mcpClientCatalog(t, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	def := toolDef("find_record", func(m map[string]any) {
		m["category"] = "filesystem"
		m["parameters"] = map[string]any{"type": "object",
			"properties": map[string]any{"id": map[string]any{"type": "integer"}, "slug": map[string]any{"type": "string"}},
			"oneOf":      []any{map[string]any{"required": []any{"id"}}, map[string]any{"required": []any{"slug"}}}}
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": "https://example.com/records"}
		m["security"] = map[string]any{"level": "safe", "network": true}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register find_record: %d %s", r.Status, r.Body)
	}
	upstream := newSlowUpstream(t)
	def = toolDef(slowTool, func(m map[string]any) {
		m["category"] = "api"
		m["description"] = "Fetch a slow report on a topic. Input: topic. Output: the report."
		m["parameters"] = map[string]any{"type": "object",
			"properties": map[string]any{"topic": map[string]any{"type": "string", "description": "The topic"}},
			"required":   []any{"topic"}}
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": upstream.srv.URL + "/slow?topic={{topic}}"}
		m["security"] = map[string]any{"level": "safe", "network": true}
		// Longer than the upstream holds a request: the abort, not the
		// timeout, must end the call.
		m["execution"] = map[string]any{"timeout": int((2 * upstreamHold).Milliseconds())}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register %s: %d %s", slowTool, r.Status, r.Body)
	}
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	return app, srv, upstream, catalogNames(t, app, "filesystem", "api")
}

// slowTool is the safe http tool the abort step calls.
const slowTool = "slow_fetch"

// upstreamHold is how long slowUpstream holds a request nobody cancels
// before it answers: a bound on the wait, not a timing assertion.
const upstreamHold = 20 * time.Second

// slowUpstream is the service behind slowTool. GET /slow answers only
// when its request ends, or after upstreamHold; GET /state says how many
// requests started and how many were cancelled, so a script aborts once
// the tool runs (the REST API lists a synchronous call only when it
// ends) and checks that its abort reached the upstream before it exits.
type slowUpstream struct {
	srv       *httptest.Server
	started   atomic.Int64
	cancels   atomic.Int64
	cancelled chan struct{} // closed when a request's context ended
	answered  chan struct{} // closed when a request was held to the end
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	t.Helper()
	u := &slowUpstream{cancelled: make(chan struct{}), answered: make(chan struct{})}
	var cancelOnce, answerOnce sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		u.started.Add(1)
		select {
		case <-r.Context().Done():
			u.cancels.Add(1)
			cancelOnce.Do(func() { close(u.cancelled) })
		case <-time.After(upstreamHold):
			answerOnce.Do(func() { close(u.answered) })
			fmt.Fprintf(w, "the slow report on %s: nothing cancelled the request", r.URL.Query().Get("topic"))
		}
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]int64{"started": u.started.Load(), "cancelled": u.cancels.Load()})
	})
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

// checkFramework asserts on one framework's report, step by step.
func checkFramework(t *testing.T, app *testApp, client string, catalog []string, r *frameworkReport) {
	t.Helper()
	if l := r.Load; !l.OK || l.Protocol == "" || !slices.Equal(slices.Sorted(slices.Values(l.Names)), catalog) {
		t.Errorf("load: ok %v, error %q; protocol %q; %d tools, the catalog has %d", l.OK, l.Error, l.Protocol, l.Count, len(catalog))
	}
	if s := r.Schemas; !s.OK || s.Converted != len(catalog) || len(s.RootCombinators) > 0 || len(s.SentRootCombinators) > 0 ||
		(len(s.Failed) > 0 && string(s.Failed) != "[]") {
		t.Errorf("schemas: ok %v, error %q; %d of %d converted; failed %s; root oneOf/anyOf/allOf in %v, in what the model was sent %v",
			s.OK, s.Error, s.Converted, len(catalog), s.Failed, s.RootCombinators, s.SentRootCombinators)
	}

	safe := r.Safe
	want := []string{"file_write", client + "-safe.txt", "written by " + client}
	if !safe.OK || len(safe.ModelSaw) != len(want) {
		t.Errorf("safe calls: ok %v, error %q; the model read %q", safe.OK, safe.Error, safe.ModelSaw)
	} else {
		for i, w := range want {
			if !strings.Contains(safe.ModelSaw[i], w) || strings.Contains(safe.ModelSaw[i], "Error") {
				t.Errorf("safe call %d: the model read %q, want %q in it", i, safe.ModelSaw[i], w)
			}
		}
	}

	if ref := r.Refusal; !ref.OK || !strings.Contains(ref.ModelSaw, "PATH_NOT_ALLOWED") {
		t.Errorf("refusal: ok %v, error %q; the model read %q, want the PATH_NOT_ALLOWED refusal", ref.OK, ref.Error, ref.ModelSaw)
	}

	d := r.Dangerous
	instruction := fmt.Sprintf(`call_result {"call_id": %q}`, d.CallID)
	if !d.OK || d.CallID == "" || !strings.Contains(d.FirstModelSaw, "CONFIRMATION_REQUIRED") || !strings.Contains(unescape(d.FirstModelSaw), instruction) {
		t.Errorf("dangerous call: ok %v, error %q; the model read %q, want CONFIRMATION_REQUIRED and %s", d.OK, d.Error, d.FirstModelSaw, instruction)
	}
	if d.CallID != "" {
		if d.ApproveStatus != 200 {
			t.Errorf("approve %s: %d", d.ApprovalID, d.ApproveStatus)
		}
		rec := app.poll(t, "agent", d.CallID)
		if rec["status"] != models.StatusSucceeded || !strings.Contains(d.FinalModelSaw, client+"-approved.txt") ||
			strings.Contains(d.FinalModelSaw, "CONFIRMATION_REQUIRED") || strings.Contains(d.FinalModelSaw, "Error") {
			t.Errorf("call_result after approval: the call is %v; the model read %q (all: %q)", rec["status"], d.FinalModelSaw, d.Results)
		}
		if got := sessionFile(t, app, client+"-approved.txt"); got != "approved for "+client {
			t.Errorf("the approved call wrote %q", got)
		}
		// The models (and the SDK scripts' hosts) follow the answer's
		// advice: one call_result that waits for the decision.
		if d.WaitSeconds != mcpserver.MaxWaitSeconds || len(d.Results) != 1 {
			t.Errorf("waiting for the decision: the answer advised wait_seconds %d, and the model called call_result %d times", d.WaitSeconds, len(d.Results))
		}
	}

	checkCancel(t, app, client, r)
}

// checkCancel: a call the client abandoned while it waited for approval is
// cancelled, and approving it afterwards does not run it. A client that
// got its answer at once (no progress token: the call was parked) had
// nothing left to cancel; the call stays waiting for the reviewer.
func checkCancel(t *testing.T, app *testApp, client string, r *frameworkReport) {
	t.Helper()
	c := r.Cancel
	if c.CallID == "" {
		t.Errorf("cancel: ok %v, error %q; no approval appeared for the call (run %s %q)", c.OK, c.Error, c.Run, c.RunError)
		return
	}
	t.Logf("cancel: held open %v, answered %v (%q); the run %s %q", c.Held, c.Answered, c.ModelSaw, c.Run, c.RunError)
	if !c.Held {
		if !strings.Contains(c.ModelSaw, "CONFIRMATION_REQUIRED") {
			t.Errorf("cancel: the parked call answered %q", c.ModelSaw)
		}
		if rec := app.do(t, "agent", "GET", "/api/v1/calls/"+c.CallID, nil).JSON(t); rec["status"] != models.StatusAwaitingApproval {
			t.Errorf("cancel: the parked call is %v, want still awaiting approval", rec["status"])
		}
		return
	}
	rec := pollCancelled(t, app, c.CallID)
	if rec["status"] != models.StatusFailed || rec["error_code"] != models.CodeCancelled {
		t.Errorf("cancel: the abandoned call is %v (%v), want cancelled", rec["status"], rec["error_code"])
	}
	status := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+c.ApprovalID+"/approve", map[string]any{"reason": "too late"}).Status
	after := app.poll(t, "agent", c.CallID)
	if got := sessionFile(t, app, client+"-cancelled.txt"); got != "" || after["status"] == models.StatusSucceeded {
		t.Errorf("cancel: approving the cancelled call (HTTP %d) ran it: the call is %v and wrote %q", status, after["status"], got)
	}
}

// checkAbort: stopping the agent while slowTool runs cancels the call all
// the way to the upstream, before the script exits, and the call is
// recorded as cancelled.
func checkAbort(t *testing.T, app *testApp, up *slowUpstream, a *abortReport, cancelledBeforeExit bool) {
	t.Helper()
	t.Logf("abort: the tool started %v, the upstream saw the request end %v (the script saw it %v); the run %s %q; the model read %q",
		a.Started, cancelledBeforeExit, a.UpstreamCancelled, a.Run, a.RunError, a.ModelSaw)
	t.Logf("abort: on the wire %s", a.Wire)
	if !a.OK || !a.Started || up.started.Load() == 0 {
		t.Errorf("abort: ok %v, error %q; the upstream got %d requests, the script saw it start %v", a.OK, a.Error, up.started.Load(), a.Started)
		return
	}
	// The script saw the cancel arrive before it exited (the exit, which
	// ends its connections, cannot have caused it).
	if !a.UpstreamCancelled || !cancelledBeforeExit {
		outcome := "the upstream request was never cancelled"
		select {
		case <-up.cancelled:
			outcome = "the upstream request was cancelled only when the script exited"
		case <-up.answered:
			outcome = "the upstream request ran until the upstream answered it"
		case <-time.After(upstreamHold + 5*time.Second):
		}
		t.Errorf("abort: the abort did not reach the upstream: %s", outcome)
	}
	rec := endedCall(t, app, slowTool)
	t.Logf("abort: the call %v is %v (%v)", rec["id"], rec["status"], rec["error_code"])
	if rec["status"] != models.StatusFailed || rec["error_code"] != models.CodeCancelled {
		t.Errorf("abort: the call %v is %v (%v), want %s with %s", rec["id"], rec["status"], rec["error_code"], models.StatusFailed, models.CodeCancelled)
	}
	if a.Run != "threw" || a.Answered {
		t.Errorf("abort: the run %s %q, the model read %q; want the run to throw, the model to read nothing", a.Run, a.RunError, a.ModelSaw)
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// endedCall is the agent's one call of tool once it has ended (its record
// is written when it ends).
func endedCall(t *testing.T, app *testApp, tool string) map[string]any {
	t.Helper()
	var list struct{ Calls []map[string]any }
	poll.Until(t, 10*time.Second, "the call of "+tool+" ended", func() (bool, string) {
		list.Calls = nil
		r := app.do(t, "agent", "GET", "/api/v1/calls?tool="+tool, nil)
		if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != 200 {
			t.Fatalf("list calls of %s: %d %v %s", tool, r.Status, err, r.Body)
		}
		return len(list.Calls) > 0 && models.Terminal(fmt.Sprint(list.Calls[0]["status"])), fmt.Sprint(list.Calls)
	})
	if len(list.Calls) != 1 {
		t.Errorf("%d calls of %s, want one", len(list.Calls), tool)
	}
	return list.Calls[0]
}

// pollCancelled reads a call once it has left awaiting_approval.
func pollCancelled(t *testing.T, app *testApp, id string) map[string]any {
	t.Helper()
	var rec map[string]any
	poll.Until(t, 30*time.Second, "call "+id+" left awaiting_approval", func() (bool, string) {
		rec = app.do(t, "agent", "GET", "/api/v1/calls/"+id, nil).JSON(t)
		return rec["status"] != models.StatusAwaitingApproval, fmt.Sprint(rec)
	})
	return rec
}

// sessionFile is the content of the file named name in any of the
// agent's call sessions, "" when there is none.
func sessionFile(t *testing.T, app *testApp, name string) string {
	t.Helper()
	var got string
	root := filepath.Join(filepath.Dir(app.dbPath), "sessions")
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			b, _ := os.ReadFile(path)
			got = string(b)
		}
		return nil
	})
	return got
}

var escapedQuote = regexp.MustCompile(`\\+"`)

// unescape undoes the JSON escaping a framework may add around a text it
// hands the model as a JSON string.
func unescape(s string) string { return escapedQuote.ReplaceAllString(s, `"`) }

// logWire logs the requests a framework sent that matter to a failure:
// the handshake, tools/call and cancellations, with what came back.
func logWire(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var wire []struct {
		Messages []struct {
			Method string `json:"method"`
		} `json:"messages"`
	}
	var entries []json.RawMessage
	if json.Unmarshal(raw, &wire) != nil || json.Unmarshal(raw, &entries) != nil {
		t.Logf("wire: %s", raw)
		return
	}
	for i, w := range wire {
		for _, m := range w.Messages {
			if m.Method != "tools/list" {
				t.Logf("wire %d: %s", i, entries[i])
				break
			}
		}
	}
}
