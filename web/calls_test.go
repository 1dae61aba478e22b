package web_test

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// callResult posts a call and returns the status and the ToolResult.
func (a *testApp) call(t *testing.T, role string, body map[string]any) (int, map[string]any) {
	t.Helper()
	r := a.do(t, role, "POST", "/api/v1/calls", body)
	return r.Status, r.JSON(t)
}

func errCode(res map[string]any) string {
	if e, ok := res["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	return ""
}

// TestCallsThroughTheChain covers each guard's outcome through HTTP.
func TestCallsThroughTheChain(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem", "shell"}})

	code, res := app.call(t, "agent", map[string]any{"tool": "file_write", "session_id": "s1", "arguments": map[string]any{"path": "notes/a.txt", "content": "hello"}})
	if code != 200 || res["success"] != true || res["status"] != "succeeded" || res["call_id"] == "" {
		t.Fatalf("file_write: %d %v", code, res)
	}
	code, res = app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "s1", "arguments": map[string]any{"path": "notes/a.txt"}})
	if code != 200 || res["data"].(map[string]any)["content"] != "hello" || res["metadata"].(map[string]any)["tool_version"] != "1.0.0" {
		t.Fatalf("file_read: %d %v", code, res)
	}
	// Another session has its own work directory.
	if _, res := app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "s2", "arguments": map[string]any{"path": "notes/a.txt"}}); res["success"] != false || errCode(res) != "EXECUTION_FAILED" {
		t.Errorf("read across sessions: %v", res)
	}
	// A cacheable tool answers the same call from the cache.
	_, res = app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "s1", "arguments": map[string]any{"path": "notes/a.txt"}})
	if res["metadata"].(map[string]any)["cached"] != true {
		t.Errorf("second identical read not cached: %v", res["metadata"])
	}

	cases := []struct {
		name       string
		role       string
		body       map[string]any
		status     int
		code       string
		suggestion string
		// retryable agrees with the suggestion: a waiting call is not
		// retried (that would ask for another approval), nor is a call a
		// guard refused or one an administrator must fix first.
		retryable bool
	}{
		{"unknown tool", "agent", map[string]any{"tool": "read_file", "arguments": map[string]any{"path": "a"}}, 404, "TOOL_NOT_FOUND", "file_read", false},
		{"unknown version", "agent", map[string]any{"tool": "file_read", "version": "9.9.9", "arguments": map[string]any{"path": "a"}}, 404, "TOOL_NOT_FOUND", "", false},
		{"missing argument", "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{}}, 422, "VALIDATION_ERROR", `"required":["path"]`, false},
		{"wrong type", "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{"path": 5}}, 422, "VALIDATION_ERROR", "schema", false},
		{"unknown argument", "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "a", "mode": "x"}}, 422, "VALIDATION_ERROR", "", false},
		{"arguments not an object", "agent", map[string]any{"tool": "file_read", "arguments": []any{1}}, 422, "VALIDATION_ERROR", "", false},
		{"bad session", "agent", map[string]any{"tool": "file_list", "session_id": "../x"}, 422, "VALIDATION_ERROR", "session_id", false},
		{"not granted", "agent", map[string]any{"tool": "web_search", "arguments": map[string]any{"query": "go"}}, 403, "PERMISSION_DENIED", "grant", false},
		{"dangerous waits for approval", "agent", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "ls"}}, 202, "CONFIRMATION_REQUIRED", "Poll GET /api/v1/calls/", false},
		{"absolute path", "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "/etc/passwd"}}, 403, "PATH_NOT_ALLOWED", "relative", false},
		{"parent path", "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "../../etc/passwd"}}, 403, "PATH_NOT_ALLOWED", "", false},
		{"search not configured", "admin", map[string]any{"tool": "web_search", "arguments": map[string]any{"query": "go"}}, 200, "UPSTREAM_ERROR", "TOOLBELT_SEARXNG_URL", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, res := app.call(t, tc.role, tc.body)
			if code != tc.status || errCode(res) != tc.code || res["success"] != false {
				t.Fatalf("%d %v, want %d %s", code, res, tc.status, tc.code)
			}
			if sug := res["error"].(map[string]any)["suggestion"].(string); !strings.Contains(sug, tc.suggestion) {
				t.Errorf("suggestion %q lacks %q", sug, tc.suggestion)
			}
			if r := res["error"].(map[string]any)["retryable"]; r != tc.retryable {
				t.Errorf("retryable %v, want %v", r, tc.retryable)
			}
		})
	}
	code, res = app.call(t, "agent", map[string]any{"tool": "file_read", "arguments": map[string]any{"path": 5}})
	if ps := res["error"].(map[string]any)["problems"].([]any); code != 422 || ps[0].(map[string]any)["pointer"] != "/path" {
		t.Errorf("problems %v", ps)
	}
}

// TestCallPathsFromCorpora feeds every traversal and sensitive-file entry,
// raw and URL-decoded, to file_read and file_write: nothing outside the
// work directory is read or written.
func TestCallPathsFromCorpora(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	outside := filepath.Join(filepath.Dir(app.dbPath), "secret.txt")
	if err := os.WriteFile(outside, []byte("TOP-SECRET-SENTINEL"), 0o600); err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, name := range []string{"traversal.txt", "linux-files.txt"} {
		f, err := os.Open(filepath.Join("..", "testdata", "corpora", name))
		if err != nil {
			t.Fatalf("corpus: %v", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			entries = append(entries, line)
			if dec, err := url.PathUnescape(line); err == nil && dec != line {
				entries = append(entries, dec)
			}
			entries = append(entries, strings.ReplaceAll(line, "/etc/passwd", "../secret.txt"))
		}
		f.Close()
	}
	if len(entries) < 200 {
		t.Fatalf("only %d corpus entries", len(entries))
	}
	codes := map[string]int{}
	for _, p := range entries {
		for _, tool := range []string{"file_read", "file_write"} {
			args := map[string]any{"path": p, "content": "PWNED"}
			if tool == "file_read" {
				delete(args, "content")
			}
			r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": tool, "session_id": "corpus", "arguments": args})
			res := r.JSON(t)
			if strings.Contains(string(r.Body), "TOP-SECRET-SENTINEL") || strings.Contains(string(r.Body), "root:") {
				t.Fatalf("%s %q read outside the work directory: %s", tool, p, r.Body)
			}
			if res["success"] == true {
				// Only a path that stays inside may succeed (e.g. "etc/passwd"
				// relative, created inside the work directory).
				if !strings.HasPrefix(filepath.Clean(filepath.Join("sessions/corpus", filepath.FromSlash(p))), "sessions/corpus") {
					t.Errorf("%s %q succeeded", tool, p)
				}
			}
			codes[errCode(res)]++
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "TOP-SECRET-SENTINEL" {
		t.Fatal("a file outside the work directory was written")
	}
	// Nothing escaped into the data directory or above.
	_ = filepath.WalkDir(filepath.Dir(app.dbPath), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, string(filepath.Separator)+"sessions"+string(filepath.Separator)) &&
			!strings.HasPrefix(filepath.Base(p), "toolbelt.db") && filepath.Base(p) != "secret.txt" && !serverKey(p) &&
			!(filepath.Base(filepath.Dir(p)) == "journal" && strings.HasPrefix(filepath.Base(p), "calls-")) {
			t.Errorf("unexpected file outside the sessions: %s", p)
		}
		return nil
	})
	if codes["PATH_NOT_ALLOWED"] == 0 {
		t.Errorf("no entry refused as PATH_NOT_ALLOWED: %v", codes)
	}
	t.Logf("outcomes: %v", codes)
}

// TestCallHistory lists and reads calls; agents see only their own, and a
// call in a session teaches the selection index.
func TestCallHistory(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
	app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "peek into the notes of the project", "session_id": "h1"})
	app.call(t, "agent", map[string]any{"tool": "file_list", "session_id": "h1"})
	app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "h1", "arguments": map[string]any{"path": "missing.txt"}})
	app.call(t, "admin", map[string]any{"tool": "file_list", "session_id": "h2"})

	list := app.do(t, "agent", "GET", "/api/v1/calls", nil).JSON(t)
	if list["total"] != float64(2) {
		t.Fatalf("agent sees %v calls, want its 2", list["total"])
	}
	all := app.do(t, "reviewer", "GET", "/api/v1/calls", nil).JSON(t)
	if all["total"] != float64(3) {
		t.Fatalf("reviewer sees %v calls, want 3", all["total"])
	}
	failed := app.do(t, "admin", "GET", "/api/v1/calls?status=failed&tool=file_read", nil).JSON(t)["calls"].([]any)
	if len(failed) != 1 || failed[0].(map[string]any)["error_code"] != "EXECUTION_FAILED" {
		t.Errorf("failed calls %v", failed)
	}
	first := list["calls"].([]any)[1].(map[string]any)
	if r := app.do(t, "agent", "GET", "/api/v1/calls/"+first["id"].(string), nil); r.Status != 200 || r.JSON(t)["result"].(map[string]any)["status"] != "succeeded" {
		t.Errorf("get call: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"limit=0", "since=yesterday", "colour=red"} {
		if r := app.do(t, "admin", "GET", "/api/v1/calls?"+bad, nil); r.Status != 400 {
			t.Errorf("%s: %d", bad, r.Status)
		}
	}
	// The successful call in session h1 taught file_list the session's task.
	app.selector.WaitLearning()
	qs := app.do(t, "admin", "GET", "/api/v1/tools/file_list/queries", nil).JSON(t)["queries"].([]any)
	var texts []string
	for _, q := range qs {
		texts = append(texts, q.(map[string]any)["query"].(string))
	}
	if !slices.Contains(texts, "peek into the notes of the project") {
		t.Errorf("call did not teach the index: %v", texts)
	}
}

// TestCallRateLimit refuses calls past the tool's rate with 429 and
// Retry-After, per principal.
func TestCallRateLimit(t *testing.T) {
	app := newTestApp(t)
	def := toolDef("tiny_list", func(m map[string]any) {
		m["category"] = "filesystem"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		m["security"] = map[string]any{"level": "safe", "rateLimit": map[string]any{"maxCalls": 2, "windowMs": 60000}}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "file_list"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	for i := range 2 {
		if code, res := app.call(t, "admin", map[string]any{"tool": "tiny_list"}); code != 200 || res["success"] != true {
			t.Fatalf("call %d: %d %v", i, code, res)
		}
	}
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "tiny_list"})
	res := r.JSON(t)
	if r.Status != 429 || errCode(res) != "RATE_LIMIT_EXCEEDED" || r.Header.Get("Retry-After") == "" || res["error"].(map[string]any)["retryable"] != true {
		t.Fatalf("third call: %d %v %v", r.Status, r.Header, res)
	}
	if !strings.Contains(res["error"].(map[string]any)["suggestion"].(string), "Wait") {
		t.Errorf("suggestion %v", res["error"])
	}
	// Another principal has its own budget.
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"tools": []string{"tiny_list"}})
	if code, res := app.call(t, "agent", map[string]any{"tool": "tiny_list"}); code != 200 {
		t.Errorf("agent's first call: %d %v", code, res)
	}
}

// TestCallRedaction checks that secrets in arguments and output reach
// neither the caller, nor the history, nor the database.
func TestCallRedaction(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	secret := "AKIAZ7VRSQ4TJNWDEMPX"
	content := "aws_access_key_id = " + secret + "\nconfigured: test-configured-secret\n"
	_, w := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "r1", "arguments": map[string]any{"path": "creds.txt", "content": content}})
	if w["success"] != true {
		t.Fatalf("write: %v", w)
	}
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "file_read", "session_id": "r1", "arguments": map[string]any{"path": "creds.txt"}})
	got := r.JSON(t)["data"].(map[string]any)["content"].(string)
	if strings.Contains(got, secret) || strings.Contains(got, "test-configured-secret") || !strings.Contains(got, "[REDACTED:") {
		t.Fatalf("output not redacted: %q", got)
	}
	rec := app.do(t, "admin", "GET", "/api/v1/calls/"+w["call_id"].(string), nil)
	if strings.Contains(string(rec.Body), secret) || !strings.Contains(string(rec.Body), "creds.txt") {
		t.Errorf("history holds the secret or lost the arguments: %s", rec.Body)
	}
	if stored := app.stored(t); strings.Contains(stored, secret) || strings.Contains(stored, "test-configured-secret") {
		t.Error("the database holds a secret in plain text")
	}
}

// TestCallRedactionEncoded: an agent writes secrets spelled in encodings
// into a file and reads it back; neither the answer, nor either call's
// record, nor the database gives them away (issue 30: 216 of 300 encoded
// secrets came back, the configured secret and an API key among them
// once their first letters were \u-escaped).
func TestCallRedactionEncoded(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
	aws := "AKIAZ7VRSQ4TJNWDEMPX"
	token := "ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L"
	key := app.keys["reviewer"] // another principal's key, known to the agent
	zeroWidth := strings.Join(strings.Split(token, ""), "\u200b")
	secrets := []string{aws, token, key, testSecret}
	lines := []string{
		base64.StdEncoding.EncodeToString([]byte("aws_access_key_id = " + aws)),
		`configured: \u0074est-configured-secret`,
		`key: \u0074\u0062_` + key[3:],
		"hex: " + hex.EncodeToString([]byte(token)),
		"entities: &#116;&#101;&#115;&#116;" + testSecret[4:],
		"invisible: " + zeroWidth,
		"url: https://ci.acme.dev/hook?t=" + url.PathEscape(token[:3]) + "%5F" + token[4:],
	}
	content := strings.Join(lines, "\n") + "\n"
	code, w := app.call(t, "agent", map[string]any{"tool": "file_write", "session_id": "enc", "arguments": map[string]any{"path": "notes.txt", "content": content}})
	if code != 200 || w["success"] != true {
		t.Fatalf("write: %d %v", code, w)
	}
	code, r := app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "enc", "arguments": map[string]any{"path": "notes.txt"}})
	if code != 200 || r["success"] != true {
		t.Fatalf("read: %d %v", code, r)
	}
	// What each place gives away: the secret as it is or as the file
	// spells it (each spelling's tail is unique to it), marks aside.
	marks := regexp.MustCompile(`\[REDACTED:[a-z0-9-]+\]`)
	leaks := func(where, text string) {
		t.Helper()
		text = marks.ReplaceAllString(text, "")
		plain := strings.Map(func(c rune) rune {
			if c == '\u200b' {
				return -1
			}
			return c
		}, text)
		for _, s := range secrets {
			if strings.Contains(plain, s) || strings.Contains(text, s[4:]) {
				t.Errorf("%s gives away %q", where, s)
			}
		}
		for _, l := range lines {
			if tail := l[len(l)-16:]; strings.Contains(text, tail) {
				t.Errorf("%s holds %q", where, l)
			}
		}
	}
	got := r["data"].(map[string]any)["content"].(string)
	leaks("the answer", got)
	if n := strings.Count(got, "[REDACTED:"); n < len(lines) || !strings.HasPrefix(strings.Split(got, "\n")[1], "configured: ") {
		t.Errorf("answer %q: want each line's secret redacted and the rest kept", got)
	}
	for _, res := range []map[string]any{w, r} {
		rec := app.do(t, "agent", "GET", "/api/v1/calls/"+res["call_id"].(string), nil)
		if rec.Status != 200 {
			t.Fatalf("GET call: %d %s", rec.Status, rec.Body)
		}
		leaks("GET /calls/"+res["call_id"].(string), string(rec.Body))
	}
	leaks("the database", app.stored(t))
}

// TestCallShellCommandCheck refuses chained commands before anything runs.
func TestCallShellCommandCheck(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	def := toolDef("quick_shell", func(m map[string]any) {
		m["category"] = "shell"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []any{"command"}}
		m["security"] = map[string]any{"level": "moderate", "sandbox": true}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "shell_exec"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	for _, cmd := range []string{"echo hi; id", "cat notes | mail x", "echo $(id)", "echo hi > /etc/x", "ls\nid"} {
		code, res := app.call(t, "admin", map[string]any{"tool": "quick_shell", "arguments": map[string]any{"command": cmd}})
		if code != 403 || errCode(res) != "COMMAND_REJECTED" {
			t.Errorf("%q: %d %v", cmd, code, res)
		}
	}
	if code, res := app.call(t, "admin", map[string]any{"tool": "quick_shell", "arguments": map[string]any{"command": "ls -la"}}); errCode(res) == "COMMAND_REJECTED" || code == 403 {
		t.Errorf("a plain command was rejected: %d %v", code, res)
	}
}

// TestCallIsolation keeps principals apart and retired tools unrunnable.
func TestCallIsolation(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
	other := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "other-agent", "role": "agent"}).JSON(t)
	app.keys["other"] = other["key"].(string)
	app.do(t, "admin", "PUT", "/api/v1/principals/"+fmt.Sprint(other["id"])+"/grants", map[string]any{"categories": []string{"filesystem"}})

	if _, res := app.call(t, "agent", map[string]any{"tool": "file_write", "session_id": "run-42", "arguments": map[string]any{"path": "mine.txt", "content": "private"}}); res["success"] != true {
		t.Fatalf("write: %v", res)
	}
	if _, res := app.call(t, "other", map[string]any{"tool": "file_read", "session_id": "run-42", "arguments": map[string]any{"path": "mine.txt"}}); res["success"] != false {
		t.Errorf("another agent read the file through the same session id: %v", res)
	}
	// A retired tool runs in no version, pinned or not.
	app.do(t, "admin", "DELETE", "/api/v1/tools/file_list", nil)
	for _, body := range []map[string]any{{"tool": "file_list"}, {"tool": "file_list", "version": "1.0.0"}} {
		if code, res := app.call(t, "admin", body); code != 404 || errCode(res) != "TOOL_NOT_FOUND" {
			t.Errorf("%v on a retired tool: %d %v", body, code, res)
		}
	}
}

// TestStrictNullsAreAbsent: a model in OpenAI's strict mode sends null for
// every optional field it leaves out (the openai rendering makes them
// nullable); the call runs as if they were absent, while a null for a
// required field is still refused.
func TestStrictNullsAreAbsent(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	export := app.do(t, "admin", "GET", "/api/v1/tools/file_read?format=openai", nil).JSON(t)
	fn, _ := export["function"].(map[string]any)
	if fn["strict"] != true {
		t.Fatalf("file_read is not exported strict: %v", export)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "nulls",
		"arguments": map[string]any{"path": "a.txt", "content": "hi", "append": nil}})
	if code != 200 || res["success"] != true {
		t.Fatalf("file_write with append null: %d %v", code, res)
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "nulls",
		"arguments": map[string]any{"path": "a.txt", "max_bytes": nil}})
	if data, _ := res["data"].(map[string]any); code != 200 || res["success"] != true || data["content"] != "hi" {
		t.Fatalf("file_read with max_bytes null: %d %v", code, res)
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "nulls",
		"arguments": map[string]any{"path": nil}})
	if e, _ := res["error"].(map[string]any); code != 422 || e["code"] != "VALIDATION_ERROR" {
		t.Fatalf("file_read with path null: %d %v", code, res)
	}
}

// TestGeminiJSONTextObjects: Gemini refuses an OBJECT without properties,
// so its rendering asks for a free-form object as JSON text; a call that
// sends it so runs with the object itself (the echo tool returns what it
// was given), while a string that is not a JSON object is still refused.
func TestGeminiJSONTextObjects(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	def := toolDef("echo_meta", func(m map[string]any) {
		m["parameters"] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"type": "string"},
				"meta": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}},
				"rows": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
			},
			"required":             []any{"name"},
			"additionalProperties": false,
		}
		m["security"] = map[string]any{"level": "safe"}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "echo"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	export := app.do(t, "admin", "GET", "/api/v1/tools/echo_meta?format=gemini", nil).JSON(t)
	props, _ := export["parametersJsonSchema"].(map[string]any)["properties"].(map[string]any)
	meta, _ := props["meta"].(map[string]any)
	if meta["type"] != "string" || !strings.Contains(fmt.Sprint(meta["description"]), "JSON text") {
		t.Fatalf("the gemini rendering of a free-form object: %v", meta)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "echo_meta",
		"arguments": map[string]any{"name": "n", "meta": `{"a": 1, "b": 2}`, "rows": []any{`{"k": "v"}`, map[string]any{"k": 3}}}})
	data, _ := res["data"].(map[string]any)
	if code != 200 || res["success"] != true {
		t.Fatalf("a call with JSON text: %d %v", code, res)
	}
	if got, _ := json.Marshal(data); string(got) != `{"meta":{"a":1,"b":2},"name":"n","rows":[{"k":"v"},{"k":3}]}` {
		t.Errorf("the tool was given %s", got)
	}
	for _, bad := range []any{`{"a": "x"}`, `not json`, `[1]`} {
		code, res = app.call(t, "admin", map[string]any{"tool": "echo_meta", "arguments": map[string]any{"name": "n", "meta": bad}})
		if e, _ := res["error"].(map[string]any); code != 422 || e["code"] != "VALIDATION_ERROR" {
			t.Errorf("meta %q: %d %v", bad, code, res)
		}
	}
}

// serverKey reports whether p is a key file the server made at its start
// in the data directory (the callback, OAuth and vault keys), and holds no
// call's writing.
func serverKey(p string) bool {
	if b := filepath.Base(p); b != "callback.key" && b != "oauth.key" && b != "vault.key" {
		return false
	}
	got, err := os.ReadFile(p)
	return err == nil && !strings.Contains(string(got), "PWNED")
}
