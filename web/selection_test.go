package web_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"toolbelt/services/access"
)

func selectedNames(t *testing.T, r response) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("select: %d %s", r.Status, r.Body)
	}
	var out []string
	for _, tl := range r.JSON(t)["tools"].([]any) {
		out = append(out, tl.(map[string]any)["name"].(string))
	}
	return out
}

// TestSelectRanksAndExplains checks that selection finds the fitting tool,
// renders it in the requested format, explains the rank and estimates the
// tokens saved.
func TestSelectRanksAndExplains(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	cases := []struct {
		query, want string
	}{
		{"read the contents of config.yaml", "file_read"},
		{"write a summary into report.md", "file_write"},
		{"which files are in the src folder", "file_list"},
		{"run a python snippet that computes primes", "code_execute"},
		{"search the web for the latest Go release", "web_search"},
		{"take a screenshot of a web page in the browser", "browser_navigate"},
		{"call a REST endpoint with a POST request", "http_request"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			got := selectedNames(t, app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": tc.query, "limit": 3}))
			if len(got) == 0 || got[0] != tc.want {
				t.Errorf("top tools %v, want %s first", got, tc.want)
			}
		})
	}
	r := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "read the contents of a text file", "limit": 2, "format": "anthropic"})
	body := r.JSON(t)
	tools := body["tools"].([]any)
	if len(tools) != 2 || body["format"] != "anthropic" || body["selection_id"] == "" || !strings.HasPrefix(body["embedder"].(string), "builtin/") {
		t.Fatalf("answer %s", r.Body)
	}
	top := tools[0].(map[string]any)
	if tool := top["tool"].(map[string]any); tool["name"] != "file_read" || tool["input_schema"] == nil {
		t.Errorf("tool not rendered for Anthropic: %v", tool)
	}
	reasons := top["reasons"].(map[string]any)
	if !slices.Contains(toStrings(reasons["matched_terms"]), "read") || reasons["lexical_score"].(float64) <= 0 || reasons["dense_similarity"].(float64) <= 0 {
		t.Errorf("reasons %v", reasons)
	}
	tokens := body["tokens"].(map[string]any)
	if sel, cat := tokens["selection"].(float64), tokens["catalog"].(float64); sel <= 0 || sel >= cat || tokens["saved_ratio"].(float64) <= 0 {
		t.Errorf("tokens %v", tokens)
	}
	// The default limit is 12 and never more than the catalog.
	if got := selectedNames(t, app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "file web code shell browser http"})); len(got) != 8 {
		t.Errorf("default limit over 8 tools gave %d", len(got))
	}
	for _, bad := range []struct {
		body map[string]any
		ptr  string
	}{
		{map[string]any{"query": "  "}, "/query"},
		{map[string]any{"query": "x", "limit": 41}, "/limit"},
		{map[string]any{"query": "x", "format": "xml"}, "/format"},
		{map[string]any{"query": "x", "categories": []string{"database"}}, "/categories/0"},
		{map[string]any{"query": "x", "exclude_categories": []string{"db"}}, "/exclude_categories/0"},
	} {
		r := app.do(t, "admin", "POST", "/api/v1/tools/select", bad.body)
		if r.Status != 422 || !slices.Equal(problemPointers(t, r), []string{bad.ptr}) {
			t.Errorf("%v: %d %s", bad.body, r.Status, r.Body)
		}
	}
}

// TestSelectFilters checks permissions, the security ceiling, requested
// and excluded categories, and what the host can run.
func TestSelectFilters(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	// A grab bag of words matches each tool faintly: min_score 0 keeps
	// every tool with any evidence, so only the filters decide.
	all := map[string]any{"query": "file web code shell browser http search run read write list", "limit": 40, "min_score": 0}
	if got := selectedNames(t, app.do(t, "agent", "POST", "/api/v1/tools/select", all)); len(got) != 0 {
		t.Errorf("an agent without grants was offered %v", got)
	}
	grant := func(g map[string]any) {
		if r := app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", g); r.Status != 200 {
			t.Fatalf("grants: %d %s", r.Status, r.Body)
		}
	}
	cases := []struct {
		name   string
		grants map[string]any
		req    map[string]any
		want   []string
	}{
		{"category grant", map[string]any{"categories": []string{"filesystem"}}, all, []string{"file_list", "file_read", "file_write"}},
		{"tool grants", map[string]any{"tools": []string{"web_search"}}, all, []string{"web_search"}},
		{"dangerous through its category", map[string]any{"categories": []string{"shell"}}, all, []string{"shell_exec"}},
		{"requested categories", map[string]any{"categories": []string{"filesystem", "search", "code"}},
			map[string]any{"query": all["query"], "limit": 40, "min_score": 0, "categories": []string{"search", "code"}}, []string{"code_execute", "web_search"}},
		{"excluded categories", map[string]any{"categories": []string{"filesystem", "search"}},
			map[string]any{"query": all["query"], "limit": 40, "min_score": 0, "exclude_categories": []string{"filesystem"}}, []string{"web_search"}},
	}
	// A tool granted by name is offered only when it is safe: moderate and
	// dangerous tools need their category. The API no longer stores such a
	// grant; one stored before (a Casbin policy written directly) is still
	// never honoured.
	t.Run("moderate and dangerous tools by name", func(t *testing.T) {
		if err := app.app.Authz.SetGrants(app.ids["agent"], access.Grants{Tools: []string{"web_search", "http_request", "shell_exec"}}); err != nil {
			t.Fatal(err)
		}
		if got := selectedNames(t, app.do(t, "agent", "POST", "/api/v1/tools/select", all)); !slices.Equal(got, []string{"web_search"}) {
			t.Errorf("offered %v, want [web_search]", got)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			grant(tc.grants)
			got := selectedNames(t, app.do(t, "agent", "POST", "/api/v1/tools/select", tc.req))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("offered %v, want %v", got, tc.want)
			}
		})
	}

	// A host without Chromium or a sandbox is offered neither the browser
	// tool nor the sandboxed ones.
	bare := newTestAppWithHost(t, hostCaps{Python: true, Node: true})
	got := selectedNames(t, bare.do(t, "admin", "POST", "/api/v1/tools/select", all))
	for _, name := range []string{"browser_navigate", "shell_exec", "code_execute"} {
		if slices.Contains(got, name) {
			t.Errorf("host cannot run %s but it was offered: %v", name, got)
		}
	}
	if !slices.Contains(got, "file_read") {
		t.Errorf("file_read missing: %v", got)
	}
}

// TestSelectionLearning teaches the index through feedback over HTTP and
// removes what it learned.
func TestSelectionLearning(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	def := toolDef("ledger_sync", func(m map[string]any) {
		m["description"] = "Synchronise the accounting ledger with the bank statement export."
		m["category"] = "api"
		m["examples"] = []any{}
		m["tags"] = []any{}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	query := "tidy up my quarterly receipts spreadsheet"
	sel := func(role string) (string, []string) {
		r := app.do(t, role, "POST", "/api/v1/tools/select", map[string]any{"query": query, "limit": 3, "session_id": "s1"})
		return r.JSON(t)["selection_id"].(string), selectedNames(t, r)
	}
	id, before := sel("admin")
	if len(before) > 0 && before[0] == "ledger_sync" {
		t.Fatalf("ledger_sync already first before learning: %v", before)
	}
	r := app.do(t, "admin", "POST", "/api/v1/selections/"+id+"/feedback", map[string]any{"tools": []string{"ledger_sync"}})
	if r.Status != 200 || !slices.Equal(toStrings(r.JSON(t)["learned"]), []string{"ledger_sync"}) {
		t.Fatalf("feedback: %d %s", r.Status, r.Body)
	}
	r = app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "please tidy my quarterly receipts", "limit": 3})
	after := selectedNames(t, r)
	if len(after) == 0 || after[0] != "ledger_sync" {
		t.Fatalf("after feedback %v, want ledger_sync first", after)
	}
	if lq := toStrings(r.JSON(t)["tools"].([]any)[0].(map[string]any)["reasons"].(map[string]any)["learned_queries"]); !slices.Equal(lq, []string{query}) {
		t.Errorf("learned_queries reason %v", lq)
	}
	// Admins see and remove what was learned.
	list := app.do(t, "admin", "GET", "/api/v1/tools/ledger_sync/queries", nil).JSON(t)["queries"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["query"] != query || list[0].(map[string]any)["source"] != "feedback" {
		t.Fatalf("learned queries %v", list)
	}
	qid := fmt.Sprint(list[0].(map[string]any)["id"])
	if r := app.do(t, "admin", "DELETE", "/api/v1/tools/ledger_sync/queries/"+qid, nil); r.Status != 204 {
		t.Fatalf("forget: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/tools/ledger_sync/queries/"+qid, nil); r.Status != 404 {
		t.Errorf("forget twice: %d", r.Status)
	}
	if got := selectedNames(t, app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "please tidy my quarterly receipts", "limit": 3})); len(got) > 0 && got[0] == "ledger_sync" {
		t.Errorf("forgotten query still ranks ledger_sync first: %v", got)
	}

	// Feedback is checked: unknown selection, unknown tool, another agent's
	// selection, a tool the agent may not use.
	if r := app.do(t, "admin", "POST", "/api/v1/selections/0000000000000000/feedback", map[string]any{"tools": []string{"file_read"}}); r.Status != 404 {
		t.Errorf("unknown selection: %d", r.Status)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/selections/"+id+"/feedback", map[string]any{"tools": []string{"no_such_tool"}}); r.Status != 422 {
		t.Errorf("unknown tool: %d", r.Status)
	}
	if r := app.do(t, "agent", "POST", "/api/v1/selections/"+id+"/feedback", map[string]any{"tools": []string{"file_read"}}); r.Status != 403 {
		t.Errorf("agent on the admin's selection: %d", r.Status)
	}
	agentSel, _ := sel("agent")
	if r := app.do(t, "agent", "POST", "/api/v1/selections/"+agentSel+"/feedback", map[string]any{"tools": []string{"ledger_sync"}}); r.Status != 422 {
		t.Errorf("agent teaching about a tool it may not use: %d %s", r.Status, r.Body)
	}
}

// TestUnknownToolSuggestions checks the "did you mean" answer for a tool
// name that does not exist.
func TestUnknownToolSuggestions(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	r := app.do(t, "admin", "GET", "/api/v1/tools/read_file", nil)
	e := r.JSON(t)["error"].(map[string]any)
	if r.Status != 404 || !slices.Contains(toStrings(e["suggestions"]), "file_read") || !strings.Contains(e["message"].(string), "did you mean") {
		t.Fatalf("unknown name: %d %s", r.Status, r.Body)
	}
	r = app.do(t, "admin", "GET", "/api/v1/tools/read_file?format=openai", nil)
	if r.Status != 404 || !slices.Contains(toStrings(r.JSON(t)["error"].(map[string]any)["suggestions"]), "file_read") {
		t.Errorf("unknown name with a format: %d %s", r.Status, r.Body)
	}
	// The session's last task guides the suggestions for an invented name
	// that looks like no real one.
	app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "take a screenshot of the homepage", "session_id": "sess-9"})
	r = app.do(t, "admin", "GET", "/api/v1/tools/capture_site?session_id=sess-9", nil)
	if sug := toStrings(r.JSON(t)["error"].(map[string]any)["suggestions"]); len(sug) == 0 || sug[0] != "browser_navigate" {
		t.Errorf("suggestions for the session's task: %v", sug)
	}
	// A retired tool is not "unknown": its 404 says it is retired.
	app.do(t, "admin", "DELETE", "/api/v1/tools/file_list", nil)
	if r := app.do(t, "admin", "GET", "/api/v1/tools/file_list", nil); !strings.Contains(string(r.Body), "retired") || strings.Contains(string(r.Body), "suggestions") {
		t.Errorf("retired tool: %s", r.Body)
	}
	// And a retired tool is never selected.
	if got := selectedNames(t, app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "list the files in a folder"})); slices.Contains(got, "file_list") {
		t.Errorf("retired tool selected: %v", got)
	}
}

// TestSelectLongTasks: agents send what they have. A 4,737-character
// system prompt followed by the request, or a conversation as messages,
// is ranked on the latest request with the rest as context; a task far
// longer is still answered (only the body limit bounds it), and bad
// messages get a problem at their pointer.
func TestSelectLongTasks(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	// A prompt that talks of every other kind of tool.
	prompt := strings.Repeat("You are an operations agent. You can run shell commands, browse web pages, search the web and send HTTP requests for the user. ", 38)[:4737]
	r := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": prompt + "\n\nRead the file config.yaml and show me its contents.", "limit": 3})
	body := r.JSON(t)
	if got := selectedNames(t, r); r.Status != 200 || len(got) == 0 || got[0] != "file_read" {
		t.Fatalf("a system prompt then a request: %d %v", r.Status, got)
	}
	if body["query"] != "Read the file config.yaml and show me its contents." || body["context_chars"].(float64) < 1000 {
		t.Errorf("focus %q, context %v characters", body["query"], body["context_chars"])
	}

	msgs := []any{
		map[string]any{"role": "system", "content": prompt},
		map[string]any{"role": "user", "content": "search the web for the Go release notes"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Here is a summary of the release notes."}}},
		map[string]any{"role": "user", "content": "write that summary to the file notes.txt"},
	}
	r = app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"messages": msgs, "limit": 3})
	if got := selectedNames(t, r); r.Status != 200 || len(got) == 0 || got[0] != "file_write" {
		t.Fatalf("a conversation: %d %v", r.Status, got)
	}
	if q := r.JSON(t)["query"]; q != "write that summary to the file notes.txt" {
		t.Errorf("the focus of a conversation is %q", q)
	}

	huge := strings.Repeat("background text about nothing in particular. ", 4500) + "\n\nlist the files in the work directory"
	r = app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": huge, "limit": 3})
	if got := selectedNames(t, r); r.Status != 200 || len(got) == 0 || got[0] != "file_list" {
		t.Fatalf("a %d-character task: %d %v", len(huge), r.Status, got)
	}

	r = app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"messages": []any{
		map[string]any{"role": "robot", "content": "hi"}, map[string]any{"role": "user", "content": 7}}})
	if got := problemPointers(t, r); r.Status != 422 || strings.Join(got, " ") != "/messages/0/role /messages/1/content" {
		t.Errorf("bad messages: %d %v", r.Status, got)
	}
}

// TestRetrievalQuality: Toolbelt measures its own retrieval by what agents
// call after a selection in the same session — the tool's rank there, a
// tool it did not offer, a tool that does not exist — per tool and
// overall, in /api/v1/stats and /metrics. Calls outside a selected
// session are not measured, and a tool called again after the same
// selection counts once.
func TestRetrievalQuality(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	sel := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "read the contents of a text file", "session_id": "rq", "limit": 1})
	if got := selectedNames(t, sel); len(got) != 1 || got[0] != "file_read" {
		t.Fatalf("selection: %v", got)
	}
	for _, call := range []map[string]any{
		{"tool": "file_write", "session_id": "rq", "arguments": map[string]any{"path": "a.txt", "content": "hi"}}, // not offered
		{"tool": "file_read", "session_id": "rq", "arguments": map[string]any{"path": "a.txt"}},                   // offered first
		{"tool": "file_read", "session_id": "rq", "arguments": map[string]any{"path": "a.txt"}},                   // again, cached: measured once
		{"tool": "file_reed", "session_id": "rq", "arguments": map[string]any{"path": "a.txt"}},                   // does not exist
		{"tool": "file_read", "session_id": "other", "arguments": map[string]any{"path": "a.txt"}},                // no selection
		{"tool": "file_list", "arguments": map[string]any{}},                                                      // no session
	} {
		app.call(t, "admin", call)
	}
	app.selector.WaitLearning()

	stats := app.do(t, "admin", "GET", "/api/v1/stats", nil).JSON(t)
	r, _ := stats["retrieval"].(map[string]any)
	want := map[string]any{"measured": 3.0, "offered_rate": 0.3333, "mean_rank": 1.0, "top1_rate": 0.3333, "not_offered": 1.0, "unknown_tools": 1.0}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("retrieval.%s = %v, want %v (%v)", k, r[k], v, r)
		}
	}
	tools := map[string]map[string]any{}
	for _, x := range r["tools"].([]any) {
		m := x.(map[string]any)
		tools[m["tool"].(string)] = m
	}
	if fr := tools["file_read"]; fr["measured"] != 1.0 || fr["offered_rate"] != 1.0 || fr["mean_rank"] != 1.0 {
		t.Errorf("file_read: %v", fr)
	}
	if fw := tools["file_write"]; fw["measured"] != 1.0 || fw["not_offered"] != 1.0 || fw["offered_rate"] != 0.0 {
		t.Errorf("file_write: %v", fw)
	}
	if len(tools) != 2 {
		t.Errorf("per tool: %v (an invented name is counted, never listed)", tools)
	}

	page := signedIn(t, app, "admin").get("/admin")
	if page.TestID("retrieval-unknown").Text() != "1" || page.TestID("retrieval-missed").Text() != "1" ||
		!strings.Contains(page.TestID("retrieval-missed-tools").Text(), "file_write (1 of 1)") {
		t.Errorf("the dashboard's retrieval: %q", page.TestID("retrieval").Text())
	}

	metrics := string(app.do(t, "admin", "GET", "/metrics", nil).Body)
	// Every series carries the instance label first.
	for _, line := range []string{
		`toolbelt_retrieval_calls_total\{instance="[^"]*",outcome="offered",tool="file_read"\} 1`,
		`toolbelt_retrieval_calls_total\{instance="[^"]*",outcome="not_offered",tool="file_write"\} 1`,
		`toolbelt_retrieval_calls_total\{instance="[^"]*",outcome="unknown_tool",tool="unknown"\} 1`,
		`toolbelt_retrieval_offered_rank_count\{instance="[^"]*"\} 1`,
	} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(metrics) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}
