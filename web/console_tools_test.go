package web_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/app"
	"toolbelt/services/netpolicy"
	"toolbelt/views"
)

// toolsListed returns the tool names a listing page shows, in order.
func toolsListed(p page) []string {
	var names []string
	p.TestID("tool-list").Find(`[data-testid="tool-link"]`).Each(func(_ int, s *goquery.Selection) {
		names = append(names, strings.TrimSpace(s.Text()))
	})
	return names
}

// toolRegisterForm is a valid register form for a command tool named name.
func toolRegisterForm(name string) url.Values {
	return url.Values{
		"name": {name}, "version": {"1.0.0"}, "category": {"code"}, "level": {"safe"},
		"description": {"Count the words of a text. Input: text. Output: the count."},
		"tags":        {"text, count"}, "examples": {"how many words are in this paragraph\ncount words"},
		"parameters": {`{"type": "object", "properties": {"text": {"type": "string", "description": "The text"}}, "required": ["text"]}`},
		"sandbox":    {"on"}, "timeout": {"5000"}, "max_retries": {"0"},
		"runner_kind": {"command"}, "argv": {"wc\n-w\n{{text}}"},
		// Settings of other runner kinds left in the form are ignored.
		"method": {"GET"}, "url": {"https://left.over.example"}, "builtin": {"file_read"},
	}
}

func TestConsoleToolsList(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")

	p := b.get("/admin/tools")
	all := toolsListed(p)
	if p.Status != 200 || !slices.Contains(all, "file_read") || !slices.Contains(all, "shell_exec") || !slices.IsSorted(all) {
		t.Fatalf("listing: %d %v", p.Status, all)
	}
	if p.TestID("register-link").Length() != 1 {
		t.Error("an admin sees no register link")
	}
	row := p.TestID("tool-shell_exec")
	if row.Find(`[data-testid="tool-level"]`).Text() != "dangerous" || row.Find(`[data-testid="tool-category"]`).Text() != "shell" {
		t.Errorf("shell_exec badges: %q", row.Text())
	}

	// The headers sort, a second click reverses, the order is in the URL
	// and kept by the filters; a made-up order is 400.
	if p.Doc.Find(`th[aria-sort="ascending"] [data-testid="sort-name"]`).Length() != 1 || p.TestID("sort-name").AttrOr("href", "") != "/admin/tools?sort=-name" {
		t.Errorf("the name header: %q", p.TestID("sort-name").AttrOr("href", ""))
	}
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	if got := toolsListed(b.get("/admin/tools?sort=-name")); !slices.Equal(got, reversed) {
		t.Errorf("by name reversed: %v", got)
	}
	byLevel := b.get("/admin/tools?sort=level&category=filesystem")
	levels := byLevel.TestID("tool-list").Find(`[data-testid="tool-level"]`).Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	rank := map[string]int{"safe": 0, "moderate": 1, "dangerous": 2}
	if len(levels) < 2 || !slices.IsSortedFunc(levels, func(a, b string) int { return rank[a] - rank[b] }) ||
		byLevel.TestID("sort-level").AttrOr("href", "") != "/admin/tools?category=filesystem&sort=-level" ||
		byLevel.Doc.Find(`form[data-testid="tool-filters"] input[name="sort"]`).AttrOr("value", "") != "level" {
		t.Errorf("by level: %v, header %q", levels, byLevel.TestID("sort-level").AttrOr("href", ""))
	}
	if p := b.get("/admin/tools?sort=" + url.QueryEscape("name DESC, (SELECT 1)")); p.Status != 400 {
		t.Errorf("a made-up order: %d", p.Status)
	}

	cases := []struct {
		query string
		want  []string
	}{
		{"q=file", []string{"file_list", "file_read", "file_write"}},
		{"q=FILE&level=safe", []string{"file_list", "file_read"}},
		{"category=shell", []string{"shell_exec"}},
		{"level=dangerous", []string{"shell_exec"}},
		{"q=headless+chromium", []string{"browser_navigate"}}, // description text
		{"q=no-such-tool-at-all", nil},
	}
	for _, tc := range cases {
		p := b.get("/admin/tools?" + tc.query)
		if got := toolsListed(p); p.Status != 200 || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d %v, want %v", tc.query, p.Status, got, tc.want)
		}
	}
	// Tags link to the listing filtered by them.
	p = b.get("/admin/tools?level=safe")
	href, _ := p.TestID("tool-file_read").Find(`a.tag:contains("#read")`).Attr("href")
	if p = b.get(href); !slices.Equal(toolsListed(p), []string{"file_read"}) || !strings.Contains(p.TestID("active-tag").Text(), "#read") {
		t.Errorf("tag link %s lists %v", href, toolsListed(p))
	}
	if href, _ = p.TestID("clear-tag").Attr("href"); href != "/admin/tools?level=safe" {
		t.Errorf("clearing the tag goes to %s", href)
	}
	p = b.get("/admin/tools?q=file&level=safe")
	if v, _ := p.TestID("filter-q").Attr("value"); v != "file" || p.TestID("filter-level").Find("option[selected]").Text() != "safe" {
		t.Errorf("the filters do not show what was asked: q=%q", v)
	}
	if p = b.get("/admin/tools?q=none"); !strings.Contains(p.TestID("tool-count").Text(), "No tools match") {
		t.Errorf("empty result says %q", p.TestID("tool-count").Text())
	}

	// A retired tool shows only when asked for, marked.
	if r := app.do(t, "admin", "DELETE", "/api/v1/tools/web_search", nil); r.Status != 204 {
		t.Fatalf("retire: %d", r.Status)
	}
	if got := toolsListed(b.get("/admin/tools?q=web_search")); len(got) != 0 {
		t.Errorf("retired tool listed: %v", got)
	}
	p = b.get("/admin/tools?q=web_search&retired=1")
	if got := toolsListed(p); !slices.Equal(got, []string{"web_search"}) || p.TestID("tool-retired").Length() != 1 {
		t.Errorf("retired listing %v", got)
	}

	// Its page stays readable, without exports or try-it, and restores it.
	p = b.get("/admin/tools/web_search")
	if p.Status != 200 || p.TestID("export-openai").Length() != 0 || p.TestID("try-form").Length() != 0 || p.TestID("restore").Length() != 1 {
		t.Fatalf("retired tool page: %d", p.Status)
	}
	p = b.post("/admin/tools/web_search/rollback", url.Values{"version": {"1.0.0"}})
	if p.Status != 200 || p.TestID("export-openai").Length() != 1 || p.TestID("try-form").Length() != 1 {
		t.Fatalf("restore: %d %s", p.Status, p.URL)
	}

	// Pages of 50, keeping the filters.
	for i := range 52 {
		if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef(fmt.Sprintf("bulk_tool_%02d", i))); r.Status != 201 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
	}
	p = b.get("/admin/tools?q=bulk_tool")
	if got := toolsListed(p); len(got) != 50 || got[0] != "bulk_tool_00" || p.TestID("page-prev").Length() != 0 {
		t.Fatalf("page 1: %d tools", len(got))
	}
	next, _ := p.TestID("page-next").Attr("href")
	p = b.get(next)
	if got := toolsListed(p); !slices.Equal(got, []string{"bulk_tool_50", "bulk_tool_51"}) || p.TestID("page-next").Length() != 0 ||
		!strings.Contains(p.TestID("tool-count").Text(), "51–52 of 52") {
		t.Fatalf("page 2 (%s): %v %q", next, got, p.TestID("tool-count").Text())
	}
	if p = b.get("/admin/tools?category=nope"); p.Status != 400 || p.TestID("error-page").Length() != 1 {
		t.Errorf("unknown category: %d", p.Status)
	}
}

func TestConsoleToolsRoles(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := signedIn(t, app, "agent")
	p := agent.get("/admin/tools")
	if p.Status != 200 || p.TestID("register-link").Length() != 0 || len(toolsListed(p)) == 0 {
		t.Fatalf("agent listing: %d, register link %d", p.Status, p.TestID("register-link").Length())
	}
	if p = agent.get("/admin/tools/new"); p.Status != 403 || p.TestID("error-page").Length() != 1 {
		t.Fatalf("agent on the register form: %d", p.Status)
	}
	agent.get("/admin/tools")
	if p = agent.post("/admin/tools/new", toolRegisterForm("sneaky")); p.Status != 403 {
		t.Fatalf("agent registering: %d", p.Status)
	}
	// The tool page: no editing, no roll-back, no learned queries; try-it yes.
	p = agent.get("/admin/tools/file_read")
	if p.Status != 200 || p.TestID("edit-link").Length() != 0 || p.TestID("learned").Length()+p.TestID("learned-empty").Length() != 0 ||
		p.TestID("try-form").Length() != 1 {
		t.Fatalf("agent tool page: %d", p.Status)
	}
	if p = agent.post("/admin/tools/file_read/rollback", url.Values{"version": {"1.0.0"}}); p.Status != 403 {
		t.Errorf("agent rollback: %d", p.Status)
	}
	// Reviewers read but cannot try.
	rev := signedIn(t, app, "reviewer")
	if p = rev.get("/admin/tools/file_read"); p.Status != 200 || p.TestID("try-form").Length() != 0 {
		t.Errorf("reviewer tool page: %d, try form %d", p.Status, p.TestID("try-form").Length())
	}
	if p = rev.post("/admin/tools/file_read/try", url.Values{"arg.path": {"x"}}); p.Status != 403 {
		t.Errorf("reviewer try: %d", p.Status)
	}
	if p = rev.get("/admin/tools/no_such_tool"); p.Status != 404 {
		t.Errorf("unknown tool: %d", p.Status)
	}
}

func TestConsoleRegisterEditRollback(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	p := b.get("/admin/tools/new")
	if p.Status != 200 || p.TestID("tool-form").Length() != 1 {
		t.Fatalf("register form: %d", p.Status)
	}
	for _, id := range []string{"field-name", "field-parameters", "field-timeout", "field-runner_kind"} {
		f := p.TestID(id)
		fid, _ := f.Attr("id")
		if f.Length() != 1 || p.Doc.Find(`label[for="`+fid+`"]`).Length() != 1 {
			t.Errorf("%s has no label", id)
		}
	}

	// Invalid: a bad name, a parameter type that is not one, a timeout that
	// is not a number. The number is caught first, beside its field.
	form := toolRegisterForm("Word Count")
	form.Set("timeout", "5s")
	p = b.post("/admin/tools/new", form)
	if p.Status != 422 || !strings.Contains(p.TestID("error-timeout").Text(), `"5s" is not a whole number`) {
		t.Fatalf("bad timeout: %d %q", p.Status, p.TestID("error-timeout").Text())
	}
	form.Set("timeout", "5000")
	form.Set("parameters", `{"type": "object", "properties": {"text": {"type": "strin"}}, "required": ["text"]}`)
	p = b.post("/admin/tools/new", form)
	if p.Status != 422 {
		t.Fatalf("invalid definition: %d", p.Status)
	}
	if got := p.TestID("error-name").Text(); !strings.Contains(got, "snake_case") {
		t.Errorf("name error %q", got)
	}
	if got := p.TestID("error-parameters").Text(); !strings.Contains(got, "/properties/text/type") || !strings.Contains(got, `did you mean "string"?`) {
		t.Errorf("parameters error %q", got)
	}
	// JSON that does not parse is located by line and column.
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("parameters", "{\n  \"type\": \"object\",\n}")
	if got := b.post("/admin/tools/new", bad).TestID("error-parameters").Text(); !strings.Contains(got, "at line 3, column 1") {
		t.Errorf("JSON error %q", got)
	}
	if v, _ := p.TestID("field-name").Attr("aria-invalid"); v != "true" {
		t.Error("the name field is not marked invalid")
	}
	if p.TestID("error-description").Length() != 0 || p.TestID("error-url").Length() != 0 {
		t.Error("a valid field, or a setting of another runner kind, has an error")
	}
	// The values are kept.
	if v, _ := p.TestID("field-name").Attr("value"); v != "Word Count" {
		t.Errorf("name kept as %q", v)
	}
	if got := p.TestID("field-argv").Text(); got != "wc\n-w\n{{text}}" {
		t.Errorf("argv kept as %q", got)
	}
	if got := p.TestID("field-runner_kind").Find("option[selected]").Text(); got != "command" {
		t.Errorf("runner kind kept as %q", got)
	}
	if _, ok := p.TestID("field-sandbox").Attr("checked"); !ok {
		t.Error("the sandbox box was unticked")
	}
	if n := p.TestID("form-problem").Length(); n != 2 {
		t.Errorf("%d problems in the summary, want 2", n)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/tools/word_count", nil); r.Status != 404 {
		t.Fatalf("a rejected form stored something: %d", r.Status)
	}

	// Fixed: registered, on its page with a notice, and listed.
	form.Set("name", "word_count")
	form.Set("parameters", `{"type": "object", "properties": {"text": {"type": "string", "description": "The text"}}, "required": ["text"]}`)
	p = b.post("/admin/tools/new", form)
	if p.Status != 200 || !strings.HasSuffix(strings.SplitN(p.URL, "?", 2)[0], "/admin/tools/word_count") ||
		!strings.Contains(p.TestID("notice").Text(), "Registered word_count 1.0.0") {
		t.Fatalf("register: %d %s", p.Status, p.URL)
	}
	if got := p.TestID("settings-runner").Text(); !strings.Contains(got, `["wc","-w","{{text}}"]`) {
		t.Errorf("runner shown as %q", got)
	}
	if p.TestID("export-anthropic").Length() != 1 || !strings.Contains(p.TestID("export-openai").Text(), `"name": "word_count"`) {
		t.Error("the exports are missing")
	}
	if !slices.Contains(toolsListed(b.get("/admin/tools?q=word")), "word_count") {
		t.Error("the new tool is not listed")
	}
	// The same name again is a conflict beside the name.
	if p = b.post("/admin/tools/new", toolRegisterForm("word_count")); p.Status != 409 || !strings.Contains(p.TestID("error-name").Text(), "already registered") {
		t.Errorf("duplicate: %d %q", p.Status, p.TestID("error-name").Text())
	}

	// Edit: the form is prefilled with the next patch version.
	p = b.get("/admin/tools/word_count/edit")
	if v, _ := p.TestID("field-version").Attr("value"); p.Status != 200 || v != "1.0.1" {
		t.Fatalf("edit form: %d version %q", p.Status, v)
	}
	if got := p.TestID("field-description").Text(); got != "Count the words of a text. Input: text. Output: the count." {
		t.Errorf("description prefilled as %q", got)
	}
	edit := url.Values{}
	p.TestID("tool-form").Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		switch {
		case goquery.NodeName(s) == "textarea":
			edit.Set(name, s.Text())
		case goquery.NodeName(s) == "select":
			edit.Set(name, s.Find("option[selected]").AttrOr("value", ""))
		case s.AttrOr("type", "") == "checkbox":
			if _, ok := s.Attr("checked"); ok {
				edit.Set(name, "on")
			}
		default:
			edit.Set(name, s.AttrOr("value", ""))
		}
	})
	edit.Set("version", "1.0.0")
	edit.Set("description", "Count the words of a text, fast. Input: text. Output: the count.")
	if p = b.post("/admin/tools/word_count/edit", edit); p.Status != 422 || !strings.Contains(p.TestID("error-version").Text(), "greater") {
		t.Fatalf("same version: %d %q", p.Status, p.TestID("error-version").Text())
	}
	edit.Set("version", "2.0.0")
	p = b.post("/admin/tools/word_count/edit", edit)
	if p.Status != 200 || p.TestID("tool-version").Text() != "v2.0.0" || !strings.Contains(p.TestID("notice").Text(), "Published word_count 2.0.0") {
		t.Fatalf("publish: %d %q", p.Status, p.TestID("tool-version").Text())
	}
	if p.TestID("version-1.0.0").Length() != 1 || p.TestID("version-2.0.0").Find(`[data-testid="current"]`).Length() != 1 {
		t.Error("the versions list is wrong")
	}

	// The diff of 1.0.0 and 2.0.0 shows the changed lines only.
	p = b.get("/admin/tools/word_count?from=1.0.0&to=2.0.0")
	del, add := p.TestID("diff-del").Text(), p.TestID("diff-add").Text()
	if !strings.Contains(del, `"version": "1.0.0"`) || !strings.Contains(del, "Count the words of a text.") ||
		!strings.Contains(add, `"version": "2.0.0"`) || !strings.Contains(add, "fast.") || strings.Contains(add+del, `"category"`) {
		t.Errorf("diff: removed %q, added %q", del, add)
	}
	if p = b.get("/admin/tools/word_count?from=2.0.0&to=2.0.0"); p.TestID("diff-none").Length() != 1 {
		t.Error("a version compared with itself shows differences")
	}
	if p = b.get("/admin/tools/word_count?from=1.0.0&to=9.9.9"); p.Status != 404 {
		t.Errorf("diff with an unknown version: %d", p.Status)
	}

	// Roll back to 1.0.0.
	p = b.get("/admin/tools/word_count")
	if p.TestID("version-1.0.0").Find(`[data-testid="rollback"]`).Length() != 1 || p.TestID("version-2.0.0").Find(`[data-testid="rollback"]`).Length() != 0 {
		t.Fatal("roll-back buttons are wrong")
	}
	p = b.post("/admin/tools/word_count/rollback", url.Values{"version": {"1.0.0"}})
	if p.Status != 200 || p.TestID("tool-version").Text() != "v1.0.0" || p.TestID("version-1.0.0").Find(`[data-testid="current"]`).Length() != 1 {
		t.Fatalf("rollback: %d %q", p.Status, p.TestID("tool-version").Text())
	}
	if r := app.do(t, "admin", "GET", "/api/v1/tools/word_count", nil); r.JSON(t)["version"] != "1.0.0" {
		t.Errorf("API current version after rollback: %v", r.JSON(t)["version"])
	}
	if p = b.post("/admin/tools/word_count/rollback", url.Values{"version": {"3.0.0"}}); p.Status != 404 {
		t.Errorf("rollback to an unknown version: %d", p.Status)
	}
}

func TestConsoleTryIt(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")

	// The form follows the schema: text inputs, a number with bounds, a
	// checkbox, required marked.
	p := b.get("/admin/tools/file_write")
	if p.TestID("try-path").AttrOr("type", "") != "text" || p.TestID("try-append").AttrOr("type", "") != "checkbox" {
		t.Fatalf("file_write form: %s", p.TestID("try-form").Text())
	}
	if _, req := p.TestID("try-path").Attr("required"); !req || !strings.Contains(p.Doc.Find(`label[for="try-path"]`).Text(), "required") {
		t.Error("path is not marked required")
	}
	p = b.get("/admin/tools/file_read")
	mb := p.TestID("try-max_bytes")
	if mb.AttrOr("type", "") != "number" || mb.AttrOr("min", "") != "1" || mb.AttrOr("max", "") != "10485760" || mb.AttrOr("step", "") != "1" {
		t.Errorf("max_bytes input: %v", mb.Nodes[0].Attr)
	}

	// A file's content is many lines: a text area (Enter is a new line),
	// the path one line; code_execute's code is a text area too.
	if p := b.get("/admin/tools/file_write"); goquery.NodeName(p.TestID("try-content")) != "textarea" || goquery.NodeName(p.TestID("try-path")) != "input" {
		t.Errorf("file_write fields: content %s, path %s", goquery.NodeName(p.TestID("try-content")), goquery.NodeName(p.TestID("try-path")))
	}
	if p := b.get("/admin/tools/code_execute"); goquery.NodeName(p.TestID("try-code")) != "textarea" {
		t.Errorf("code_execute code field: %s", goquery.NodeName(p.TestID("try-code")))
	}

	// A real write then read in one session; the text area's CRLF new
	// lines (as a browser sends them) arrive as LF.
	p = b.post("/admin/tools/file_write/try", url.Values{"arg.path": {"notes/hello.txt"}, "arg.content": {"hello from the console\r\nsecond line"}, "session_id": {"try-1"}})
	if p.Status != 200 || p.TestID("try-status").Text() != "succeeded" {
		t.Fatalf("write: %d %s %s", p.Status, p.TestID("try-status").Text(), p.TestID("try-result").Text())
	}
	if href := p.TestID("try-call-link").AttrOr("href", ""); href != "/admin/calls/"+p.TestID("try-call-id").Text() || b.get(href).Status != 200 {
		t.Errorf("the call id links to %q", href)
	}
	p = b.post("/admin/tools/file_read/try", url.Values{"arg.path": {"notes/hello.txt"}, "arg.max_bytes": {"100"}, "session_id": {"try-1"}})
	if p.Status != 200 || p.TestID("try-status").Text() != "succeeded" || !strings.Contains(p.TestID("try-data").Text(), `hello from the console\nsecond line"`) {
		t.Fatalf("read: %d %s", p.Status, p.TestID("try-result").Text())
	}
	if v, _ := p.TestID("try-max_bytes").Attr("value"); v != "100" {
		t.Errorf("the form forgot max_bytes: %q", v)
	}
	callID := p.TestID("try-call-id").Text()
	if r := app.do(t, "admin", "GET", "/api/v1/calls/"+callID, nil); r.Status != 200 {
		t.Errorf("the call %q is not in the history: %d", callID, r.Status)
	}

	// A value that does not convert: an error beside it and no call.
	p = b.post("/admin/tools/file_read/try", url.Values{"arg.path": {"notes/hello.txt"}, "arg.max_bytes": {"ten"}, "session_id": {"try-1"}})
	if p.Status != 422 || !strings.Contains(p.TestID("try-error-max_bytes").Text(), "not a whole number") || p.TestID("try-result").Length() != 0 {
		t.Fatalf("conversion error: %d %q", p.Status, p.TestID("try-error-max_bytes").Text())
	}
	if v, _ := p.TestID("try-max_bytes").Attr("aria-invalid"); v != "true" {
		t.Error("max_bytes is not marked invalid")
	}
	if total := app.do(t, "admin", "GET", "/api/v1/calls?tool=file_read", nil).JSON(t)["total"]; total != float64(1) {
		t.Errorf("file_read calls recorded: %v, want 1", total)
	}

	// A value the schema refuses: the real refusal, and the problem beside
	// the field.
	p = b.post("/admin/tools/file_read/try", url.Values{"arg.path": {"notes/hello.txt"}, "arg.max_bytes": {"0"}, "session_id": {"try-1"}})
	if p.Status != 422 || p.TestID("try-code").Text() != "VALIDATION_ERROR" || p.TestID("try-error-max_bytes").Length() != 1 {
		t.Errorf("schema refusal: %d %q", p.Status, p.TestID("try-code").Text())
	}
	// A path the guards refuse: the tool's error with its suggestion.
	p = b.post("/admin/tools/file_read/try", url.Values{"arg.path": {"../../etc/passwd"}, "session_id": {"try-1"}})
	if p.TestID("try-code").Text() != "PATH_NOT_ALLOWED" || p.TestID("try-suggestion").Length() != 1 {
		t.Errorf("escaping path: %d %q", p.Status, p.TestID("try-code").Text())
	}

	// A command that exits 1 is a call that succeeded, not a green one:
	// the exit code is shown beside the status, in the failure colour.
	needSandbox(t, app)
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("count_words")); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	p = b.post("/admin/tools/count_words/try", url.Values{"arg.text": {"no-such-file.txt"}, "session_id": {"try-1"}})
	if st := p.TestID("try-status"); st.Text() != "succeeded" || st.HasClass("succeeded") || !p.TestID("try-exit").HasClass("failed") ||
		p.TestID("try-exit").Text() != "exit code 1" || !strings.Contains(p.TestID("try-exit-note").Text(), "exited with 1") {
		t.Errorf("a command that exited 1: %s", p.TestID("try-result").Text())
	}
	p = b.post("/admin/tools/count_words/try", url.Values{"arg.text": {"notes/hello.txt"}, "session_id": {"try-1"}})
	if !p.TestID("try-status").HasClass("succeeded") || p.TestID("try-exit").Length() != 0 {
		t.Errorf("a command that exited 0: %s", p.TestID("try-result").Text())
	}

	// A dangerous tool waits for approval, with its call id.
	p = b.post("/admin/tools/shell_exec/try", url.Values{"arg.command": {"echo hi"}, "session_id": {"try-1"}})
	if p.Status != 202 || p.TestID("try-status").Text() != "awaiting_approval" || !strings.Contains(p.TestID("try-awaiting").Text(), p.TestID("try-call-id").Text()) {
		t.Fatalf("dangerous: %d %s", p.Status, p.TestID("try-result").Text())
	}
	if p.TestID("try-awaiting").Find(`a[href="/admin/approvals"]`).Length() != 1 {
		t.Error("an admin's waiting call does not link to the queue")
	}

	// An agent's waiting call points to its call page, which it may open,
	// not to the queue, which it may not (403).
	dangerousWrite(t, app)
	ag := signedIn(t, app, "agent")
	p = ag.post("/admin/tools/overwrite_note/try", url.Values{"arg.path": {"n.txt"}, "arg.content": {"x"}, "session_id": {"try-2"}})
	if p.Status != 202 || p.TestID("try-awaiting").Find(`a[href="/admin/approvals"]`).Length() != 0 {
		t.Fatalf("agent's waiting call: %d %s", p.Status, p.TestID("try-awaiting").Text())
	}
	link := p.TestID("try-awaiting").Find("a").AttrOr("href", "")
	if link != "/admin/calls/"+p.TestID("try-call-id").Text() || ag.get(link).Status != 200 || ag.get("/admin/approvals").Status != 403 {
		t.Errorf("agent's waiting call links to %q", link)
	}
}

func TestConsoleTryFieldConversion(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	def := toolDef("echo_all", func(m map[string]any) {
		m["parameters"] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"mode":   map[string]any{"type": "string", "enum": []any{"fast", "slow"}},
				"level":  map[string]any{"enum": []any{1, 2, 3}},
				"ratio":  map[string]any{"type": "number", "exclusiveMaximum": 1},
				"items":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"opts":   map[string]any{"type": "object"},
				"strict": map[string]any{"type": "boolean"},
			},
			"required": []any{"mode"},
		}
		m["security"] = map[string]any{"level": "safe"}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "echo"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	b := signedIn(t, app, "admin")
	p := b.get("/admin/tools/echo_all")
	if goquery.NodeName(p.TestID("try-mode")) != "select" || goquery.NodeName(p.TestID("try-items")) != "textarea" || p.TestID("try-ratio").AttrOr("step", "") != "any" {
		t.Fatal("the controls do not follow the schema")
	}
	p = b.post("/admin/tools/echo_all/try", url.Values{"arg.mode": {"slow"}, "arg.items": {`{"a": 1}`}, "arg.opts": {`{"a": `}, "arg.ratio": {"x"}, "session_id": {"s"}})
	if p.Status != 422 || !strings.Contains(p.TestID("try-error-items").Text(), "JSON array") ||
		!strings.Contains(p.TestID("try-error-opts").Text(), "Not valid JSON") || !strings.Contains(p.TestID("try-error-ratio").Text(), "not a number") {
		t.Fatalf("conversion errors: %d items %q opts %q ratio %q", p.Status, p.TestID("try-error-items").Text(), p.TestID("try-error-opts").Text(), p.TestID("try-error-ratio").Text())
	}
	p = b.post("/admin/tools/echo_all/try", url.Values{"arg.mode": {"slow"}, "arg.level": {"2"}, "arg.items": {`["a","b"]`}, "arg.opts": {`{"k": true}`},
		"arg.ratio": {"0.5"}, "arg.strict": {"true"}, "session_id": {"s"}})
	data := strings.Join(strings.Fields(p.TestID("try-data").Text()), "")
	for _, want := range []string{`"mode":"slow"`, `"level":2`, `"items":["a","b"]`, `"opts":{"k":true}`, `"ratio":0.5`, `"strict":true`} {
		if !strings.Contains(data, want) {
			t.Errorf("echoed %s lacks %s", data, want)
		}
	}
	if p = b.post("/admin/tools/echo_all/try", url.Values{"arg.mode": {"medium"}, "session_id": {"s"}}); p.Status != 422 || !strings.Contains(p.TestID("try-error-mode").Text(), "not one of the choices") {
		t.Errorf("unknown choice: %d", p.Status)
	}
	if p = b.post("/admin/tools/echo_all/try", url.Values{"arg.mode": {"fast"}, "session_id": {"no spaces allowed"}}); p.TestID("try-error-session_id").Length() != 1 {
		t.Errorf("bad session: %d %s", p.Status, p.TestID("try-result").Text())
	}
}

func TestConsoleLearnedQueries(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	query := "peek into the config file of the project"
	sel := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": query, "limit": 3, "session_id": "s1"})
	id := sel.JSON(t)["selection_id"].(string)
	if r := app.do(t, "admin", "POST", "/api/v1/selections/"+id+"/feedback", map[string]any{"tools": []string{"file_read"}}); r.Status != 200 {
		t.Fatalf("feedback: %d %s", r.Status, r.Body)
	}
	b := signedIn(t, app, "admin")
	p := b.get("/admin/tools/file_read")
	items := p.TestID("learned").Find("li")
	if items.Length() != 1 || !strings.Contains(items.Text(), query) {
		t.Fatalf("learned queries: %q", p.TestID("learned").Text())
	}
	action, _ := items.Find("form").Attr("action")
	p = b.post(action, url.Values{})
	if p.Status != 200 || p.TestID("learned-empty").Length() != 1 || !strings.Contains(p.TestID("notice").Text(), "removed") {
		t.Fatalf("remove: %d %s", p.Status, p.URL)
	}
	if list := app.do(t, "admin", "GET", "/api/v1/tools/file_read/queries", nil).JSON(t)["queries"].([]any); len(list) != 0 {
		t.Errorf("still learned: %v", list)
	}
	if p = b.post(action, url.Values{}); p.Status != 404 {
		t.Errorf("remove twice: %d", p.Status)
	}
}

func TestConsoleLineDiff(t *testing.T) {
	t.Parallel() // its own app and database
	cases := []struct {
		name, a, b string
		want       []string // op+text of each line
	}{
		{"equal", "a\nb", "a\nb", nil},
		{"changed line", "a\nb\nc", "a\nB\nc", []string{" a", "-b", "+B", " c"}},
		{"inserted", "a\nc", "a\nb\nc", []string{" a", "+b", " c"}},
		{"removed at end", "a\nb\nc", "a\nb", []string{" a", " b", "-c"}},
		{"far context folded", "1\n2\n3\n4\n5\n6\n7\n8\n9", "1\n2\n3\n4\n5\n6\n7\n8\nX", []string{"~5 unchanged lines", " 6", " 7", " 8", "-9", "+X"}},
	}
	for _, tc := range cases {
		var got []string
		for _, l := range views.LineDiff(tc.a, tc.b) {
			got = append(got, string(l.Op)+l.Text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// BenchmarkConsoleToolsPages renders the tools pages over HTTP with 10,000
// tools in the catalog (each page must stay well under 50 ms).
func BenchmarkConsoleToolsPages(b *testing.B) {
	app := newTestApp(b)
	registerBenchTools(b, app)
	br := signedIn(b, app, "admin")
	for _, path := range []string{
		"/admin/tools", "/admin/tools?q=record+set+9999", "/admin/tools?category=code&level=moderate&offset=1000",
		"/admin/tools/bench_tool_04242", "/admin/tools/new",
	} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if p := br.get(path); p.Status != 200 {
					b.Fatalf("status %d", p.Status)
				}
			}
		})
	}
}

// A command tool that runs the caller's code, and a tool whose timeouts
// are retried, are declared in the form as in the API, and the edit form
// keeps the declarations: without them an edit would drop the flag and be
// refused (or lose the retries).
func TestConsoleDeclaresCodeAndTimeoutRetries(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	b.get("/admin/tools/new")
	form := toolRegisterForm("make_target")
	for k, v := range map[string]string{"level": "moderate", "argv": "make\n--\n{{text}}", "runs_argument_as_code": "on",
		"option_arguments": "text", "retryable": "on", "max_retries": "1", "retry_timeouts": "on"} {
		form.Set(k, v)
	}
	if p := b.post("/admin/tools/new", form); p.Status != 200 {
		t.Fatalf("register: %d %s", p.Status, p.TestID("form-problems").Text())
	}
	r := app.do(t, "admin", "GET", "/api/v1/tools/make_target", nil)
	var got struct {
		Def struct {
			Runner struct {
				RunsArgumentAsCode bool     `json:"runsArgumentAsCode"`
				OptionArguments    []string `json:"optionArguments"`
			} `json:"runner"`
			Execution struct {
				RetryTimeouts bool `json:"retryTimeouts"`
			} `json:"execution"`
		} `json:"definition"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || !got.Def.Runner.RunsArgumentAsCode ||
		!slices.Equal(got.Def.Runner.OptionArguments, []string{"text"}) || !got.Def.Execution.RetryTimeouts {
		t.Fatalf("stored: %v %s", err, r.Body)
	}
	p := b.get("/admin/tools/make_target/edit")
	for _, id := range []string{"field-runs_argument_as_code", "field-retry_timeouts"} {
		if _, ok := p.TestID(id).Attr("checked"); !ok {
			t.Errorf("%s is not ticked on the edit form", id)
		}
	}
	if v, _ := p.TestID("field-option_arguments").Attr("value"); v != "text" {
		t.Errorf("option arguments prefilled as %q", v)
	}
}

// Each problem of a submitted form lands beside the field that edits it.
func TestConsoleRegisterFieldErrors(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	b.get("/admin/tools/new")
	httpRunner := map[string]string{"runner_kind": "http", "sandbox": "", "argv": ""}
	cases := []struct {
		name  string
		set   map[string]string
		field string
		want  string
	}{
		{"bad tag", map[string]string{"tags": "ok, Not OK"}, "tags", "Item 2:"},
		{"parameters not JSON", map[string]string{"parameters": "{type: object}"}, "parameters", "not valid JSON"},
		{"argv starts with a placeholder", map[string]string{"argv": "{{text}}\nx"}, "argv", "Item 1: must name a fixed program"},
		{"command outside the sandbox", map[string]string{"sandbox": ""}, "sandbox", "must be true"},
		{"retries without retryable", map[string]string{"max_retries": "3"}, "max_retries", "retryable is false"},
		{"ttl without cacheable", map[string]string{"cache_ttl": "1000"}, "cache_ttl", "cacheable is false"},
		{"timeouts retried without retries", map[string]string{"retry_timeouts": "on"}, "retry_timeouts", "maxRetries is 0"},
		{"code argument undeclared", map[string]string{"argv": "bash\n-c\n[[ $1 -gt 5 ]]\nbash\n{{text}}"}, "argv", "runsArgumentAsCode"},
		{"code declared but safe", map[string]string{"argv": "make\n-n", "runs_argument_as_code": "on"}, "level", "must be moderate or dangerous"},
		{"rate window too short", map[string]string{"rate_max_calls": "10", "rate_window_ms": "10"}, "rate_window_ms", "between 1000"},
		{"rate calls not a number", map[string]string{"rate_max_calls": "many", "rate_window_ms": "1000"}, "rate_max_calls", `"many" is not a whole number`},
		{"allowed paths outside filesystem", map[string]string{"allowed_paths": "."}, "allowed_paths", "only filesystem tools"},
		{"http without url", toolFormMerge(httpRunner, map[string]string{"url": ""}), "url", "URL template is required"},
		{"http placeholder names nothing", toolFormMerge(httpRunner, map[string]string{"url": "https://api.example.com/{{nope}}"}), "url", "{{nope}}"},
		{"header without colon", toolFormMerge(httpRunner, map[string]string{"url": "https://api.example.com/", "headers": "Accept json"}), "headers", "is not Name: value"},
		{"literal secret header", toolFormMerge(httpRunner, map[string]string{"url": "https://api.example.com/", "headers": "Authorization: Bearer sk-1"}), "headers", "environment"},
		{"steps not JSON", map[string]string{"runner_kind": "composite", "sandbox": "", "steps": "[{"}, "steps", "not a JSON array"},
		{"step calls a missing tool", map[string]string{"runner_kind": "composite", "sandbox": "", "steps": `[{"tool": "no_such_tool"}]`}, "steps", "At /0/tool: tool \"no_such_tool\" is not registered"},
	}
	for _, tc := range cases {
		form := toolRegisterForm("field_errors")
		for k, v := range tc.set {
			form.Set(k, v)
		}
		p := b.post("/admin/tools/new", form)
		if got := p.TestID("error-" + tc.field).Text(); p.Status != 422 || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d, %s error %q, want %q; summary %q", tc.name, p.Status, tc.field, got, tc.want, p.TestID("form-problems").Text())
		}
		if v, _ := p.TestID("field-" + tc.field).Attr("aria-invalid"); v != "true" {
			t.Errorf("%s: %s not marked invalid", tc.name, tc.field)
		}
	}
	if r := app.do(t, "admin", "GET", "/api/v1/tools/field_errors", nil); r.Status != 404 {
		t.Fatalf("an invalid form stored the tool: %d", r.Status)
	}
}

func toolFormMerge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestConsoleRetireAndRollBack: retiring and rolling back ask first (each
// behind a "…" that opens its confirmation), retire turns the tool off
// (not offered, calls refused) and restore on again; a tool from a tool
// file says it is file-managed, and one registered by hand does not.
func TestConsoleRetireAndRollBack(t *testing.T) {
	t.Parallel() // its own app and database
	app, file := newTestAppWithToolFile(t)
	b := signedIn(t, app, "admin")

	p := b.get("/admin/tools/note_words")
	if got := p.TestID("file-managed").Text(); p.Status != 200 || !strings.Contains(got, file) || !strings.Contains(got, "replaced when that file changes") {
		t.Errorf("file-managed tool: %d %q", p.Status, got)
	}
	if b.get("/admin/tools/file_read").TestID("file-managed").Length() != 0 {
		t.Error("a built-in tool is marked file-managed")
	}

	// Roll-back sits behind its confirmation, which names both versions.
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("two_versions")); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/two_versions", toolDef("two_versions", func(m map[string]any) { m["version"] = "2.0.0" })); r.Status != 200 && r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	p = b.get("/admin/tools/two_versions")
	confirm := p.TestID("version-1.0.0").Find("details.confirm")
	if confirm.Find(`[data-testid="rollback-open-1.0.0"]`).Length() != 1 || confirm.Find(`[data-testid="rollback"]`).Length() != 1 ||
		!strings.Contains(confirm.Text(), "version 1.0.0 instead of 2.0.0") {
		t.Errorf("roll-back confirmation: %q", confirm.Text())
	}

	// Retire: confirmed, then off for agents, and restored on.
	p = b.get("/admin/tools/file_list")
	if p.Doc.Find("details.confirm").Find(`[data-testid="retire-open"]`).Length() != 1 {
		t.Fatal("no retire confirmation")
	}
	p = b.post("/admin/tools/file_list/retire", url.Values{})
	if p.Status != 200 || !strings.Contains(p.TestID("notice").Text(), "file_list is retired") || p.TestID("restore").Length() != 1 || p.TestID("retire-open").Length() != 0 {
		t.Fatalf("retire: %d %q", p.Status, p.TestID("notice").Text())
	}
	if code, res := app.call(t, "admin", map[string]any{"tool": "file_list"}); code != 404 || errCode(res) != "TOOL_NOT_FOUND" {
		t.Errorf("a retired tool's call: %d %v", code, res)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/tools/file_list", nil); r.Status != 404 {
		t.Errorf("the API still serves the retired tool: %d", r.Status)
	}
	p = b.post("/admin/tools/file_list/rollback", url.Values{"version": {"1.0.0"}})
	if code, _ := app.call(t, "admin", map[string]any{"tool": "file_list"}); p.Status != 200 || code != 200 {
		t.Errorf("restored tool: page %d, call %d", p.Status, code)
	}
	if p = b.post("/admin/tools/no_such_tool/retire", url.Values{}); p.Status != 404 {
		t.Errorf("retiring a tool that does not exist: %d", p.Status)
	}
}

// newTestAppWithToolFile is a test app whose tools directory holds one
// tool file, note.yaml, registering note_words; it returns the file's path.
func newTestAppWithToolFile(t *testing.T) (*testApp, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "note.yaml")
	if err := os.WriteFile(file, []byte(`name: note_words
description: Count the words of a note in the work directory, as the wc command does.
category: shell
parameters:
  type: object
  properties:
    path: {type: string, description: The note}
  required: [path]
security: {level: safe, sandbox: true}
runner: {kind: command, argv: [wc, -w, "{{path}}"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, netpolicy.Policy{}, func(c *app.Config) { c.ToolsDir = dir }), file
}
