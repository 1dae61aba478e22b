package web_test

import (
	"strconv"
	"strings"
	"testing"
)

// codeProblem is the message of a 422 body's problem at pointer, or "".
func codeProblem(t *testing.T, r response, pointer string) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	ps, _ := e["problems"].([]any)
	for _, p := range ps {
		if m := p.(map[string]any); m["pointer"] == pointer {
			return m["message"].(string)
		}
	}
	return ""
}

// registerAsCode registers argv as a command tool, through the API, three
// times: as it is (safe), which must be refused with a problem at
// pointer naming runner.runsArgumentAsCode; declared but safe, refused at
// the level; declared and moderate, accepted.
func registerAsCode(t *testing.T, app *testApp, name string, argv []any, pointer string) {
	t.Helper()
	def := func(level string, declared bool) map[string]any {
		return toolDef(name, func(m map[string]any) {
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}
			m["security"] = map[string]any{"level": level, "sandbox": true}
			m["runner"] = map[string]any{"kind": "command", "argv": argv, "runsArgumentAsCode": declared}
		})
	}
	r := app.do(t, "admin", "POST", "/api/v1/tools", def("safe", false))
	if msg := codeProblem(t, r, pointer); r.Status != 422 || !strings.Contains(msg, "runner.runsArgumentAsCode") {
		t.Errorf("%s %q: %d, problem at %s %q: %s", name, argv, r.Status, pointer, msg, r.Body)
	}
	r = app.do(t, "admin", "POST", "/api/v1/tools", def("safe", true))
	if msg := codeProblem(t, r, "/security/level"); r.Status != 422 || !strings.Contains(msg, "moderate or dangerous") {
		t.Errorf("%s declared safe: %d %s", name, r.Status, r.Body)
	}
	if r = app.do(t, "admin", "POST", "/api/v1/tools", def("moderate", true)); r.Status != 201 {
		t.Errorf("%s declared and moderate: %d %s", name, r.Status, r.Body)
	}
}

// TestArgumentsOfFixedScriptsAreCode (issue 39, item 2): a placeholder
// handed to a fixed script of an interpreter is code, whatever the
// script does with it. The first six are the scripts through which the
// issue's payloads ran in the sandbox from a safe tool (bash arithmetic
// and declare -i with a[$(touch X)], pickle.loads, vm.runInThisContext,
// perl's two-argument open, awk's cmd | getline); the other six are
// evaluators the old name list knew or did not. Each is refused through
// the real API naming runsArgumentAsCode, registers once declared and not
// safe; templates whose program is no interpreter still register as safe.
func TestArgumentsOfFixedScriptsAreCode(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	for i, argv := range [][]any{
		{"bash", "-c", `[[ $1 -gt 5 ]] && echo big`, "bash", "{{x}}"},
		{"bash", "-c", `declare -i n="$1"; echo "$n"`, "bash", "{{x}}"},
		{"python3", "-c", "import pickle, sys; print(pickle.loads(bytes.fromhex(sys.argv[1])))", "{{x}}"},
		{"node", "-e", "console.log(require('vm').runInThisContext(process.argv[1]))", "{{x}}"},
		{"perl", "-e", "open(F, $ARGV[0]) or die; print <F>", "{{x}}"},
		{"awk", `BEGIN { "date -d " ARGV[1] | getline d; print d }`, "{{x}}"},
		{"sh", "-c", `eval "echo $1"`, "sh", "{{x}}"},
		{"zsh", "-c", `print -r -- ${(e)1}`, "zsh", "{{x}}"},
		{"ruby", "-e", "puts eval(ARGV[0])", "{{x}}"},
		{"php", "-r", "echo $argv[1];", "{{x}}"},
		{"python3", "-c", "import sys; print(eval(sys.argv[1]))", "{{x}}"},
		{"node", "-e", "console.log(Function('return ' + process.argv[1])())", "{{x}}"},
	} {
		registerAsCode(t, app, "script_"+string(rune('a'+i)), argv, "/runner/argv/"+strconv.Itoa(len(argv)-1))
	}
	for i, argv := range [][]any{
		{"grep", "-rn", "--", "{{x}}", "."},
		{"cat", "--", "{{x}}"},
		{"sort", "--", "{{x}}"},
		{"sed", "-e", "s/a/b/", "--", "{{x}}"},
	} {
		def := toolDef("plain_"+string(rune('a'+i)), func(m map[string]any) {
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}, "required": []any{"x"}}
			m["runner"] = map[string]any{"kind": "command", "argv": argv}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Errorf("%q: %d %s", argv, r.Status, r.Body)
		}
	}
}

// TestWorkDirProgramsAreCode (issue 39, item 3): a program that runs code
// its working directory holds, with no switch to stop it, runs the
// caller's code, who can write there: make's Makefile, npm's scripts,
// pytest's conftest.py, cargo's build.rs, git's attribute drivers, a
// script or program file of the work directory, and a fixed shell script
// that runs one of them. Each is refused naming runsArgumentAsCode and
// registers once declared and not safe.
func TestWorkDirProgramsAreCode(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	for i, tc := range []struct {
		argv []any
		at   int
	}{
		{[]any{"make", "test"}, 0},
		{[]any{"timeout", "60", "make"}, 2},
		{[]any{"npm", "test"}, 0},
		{[]any{"npx", "eslint", "."}, 0},
		{[]any{"pytest", "-q"}, 0},
		{[]any{"cargo", "build"}, 0},
		{[]any{"git", "status", "--short"}, 0},
		{[]any{"git", "diff"}, 0},
		{[]any{"python3", "tool.py"}, 1},
		{[]any{"./build.sh"}, 0},
		{[]any{"sh", "-c", "cd src && make all"}, 2},
	} {
		registerAsCode(t, app, "workdir_"+string(rune('a'+i)), tc.argv, "/runner/argv/"+strconv.Itoa(tc.at))
	}
}
