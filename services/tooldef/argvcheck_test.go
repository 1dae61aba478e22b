package tooldef

import (
	"strings"
	"testing"
)

// TestCodeArgument: a placeholder in the script position of a shell or
// interpreter is found, through wrappers, combined flags and options
// with values; placeholders that are the arguments of a fixed script are
// not.
func TestCodeArgument(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"sh", "-c", "{{script}}"}, 2},
		{[]string{"/bin/bash", "-ec", "{{script}}"}, 2},
		{[]string{"bash", "-o", "pipefail", "-c", "{{s}}"}, 4},
		{[]string{"busybox", "sh", "-c", "{{s}}"}, 3},
		{[]string{"env", "LANG=C", "timeout", "5", "sh", "-c", "{{s}}"}, 6},
		{[]string{"python3", "-c", "{{code}}"}, 2},
		{[]string{"python3.11", "-Ic", "{{code}}"}, 2},
		{[]string{"python3", "-m", "{{module}}"}, 2},
		{[]string{"python3", "{{file}}"}, 1},
		{[]string{"python3", "-W", "ignore", "-c", "{{code}}"}, 4},
		{[]string{"node", "-e", "{{js}}"}, 2},
		{[]string{"node", "--eval", "{{js}}"}, 2},
		{[]string{"nodejs", "-p", "{{js}}"}, 2},
		{[]string{"perl", "-E", "{{p}}"}, 2},
		{[]string{"ruby", "-e", "{{r}}"}, 2},
		{[]string{"php", "-r", "{{p}}"}, 2},
		{[]string{"awk", "{{prog}}", "data.csv"}, 1},
		{[]string{"awk", "-F", ",", "{{prog}}"}, 3},
		{[]string{"sed", "-e", "{{expr}}", "file"}, 2},
		{[]string{"sed", "{{expr}}", "file"}, 1},
		{[]string{"pwsh", "-Command", "{{ps}}"}, 2},
		{[]string{"sh", "{{flag}}", "{{code}}"}, 1},
		// Found by attacking the first version of this check.
		{[]string{"bash", "-c", "--", "{{x}}"}, 3},
		{[]string{"timeout", "-s", "KILL", "5", "sh", "-c", "{{x}}"}, 6},
		{[]string{"/usr/bin/env", "-u", "FOO", "sh", "-c", "{{x}}"}, 5},
		{[]string{"env", "-S", "{{x}}"}, 2},
		{[]string{"find", ".", "-exec", "sh", "-c", "{{x}}", ";"}, 5},
		{[]string{"find", ".", "-name", "*.go", "-execdir", "{{x}}", "{}", "+"}, 5},
		{[]string{"sqlite3", ":memory:", "{{x}}"}, 2},
		{[]string{"git", "-c", "{{x}}", "log"}, 0},
		{[]string{"tar", "-xf", "a.tar", "--to-command", "{{x}}"}, 4},
		{[]string{"xargs", "-n", "1", "sh", "-c", "{{x}}"}, 5},
		{[]string{"watch", "-n", "5", "{{x}}"}, 3},
		{[]string{"flock", "/tmp/lock", "-c", "{{x}}"}, 3},
		{[]string{"su", "nobody", "-c", "{{x}}"}, 3},
		{[]string{"make", "-f", "{{x}}"}, 0},
		{[]string{"ssh", "host", "{{x}}"}, 2},
		{[]string{"env", "{{x}}"}, 1},
		{[]string{"nohup", "{{x}}", "arg"}, 1},
		{[]string{"taskset", "0x3", "sh", "-c", "{{x}}"}, 4},
		{[]string{"uv", "run", "python", "-c", "{{x}}"}, 4},
		{[]string{"eatmydata", "sh", "-c", "{{x}}"}, 3},
		{[]string{"sort", "-S", "1M", "--compress-program", "{{x}}", "f"}, 4},
		{[]string{"jq", "-r", "{{x}}", "data.json"}, 2},
		{[]string{"jq", "-n", "--arg", "v", "{{x}}", "{{y}}"}, 5},
		{[]string{"vim", "-u", "{{x}}"}, 2},
		{[]string{"vim", "-c", "{{x}}", "file.txt"}, 2},
		// Found by attacking the second version: it failed open on what
		// it did not understand.
		{[]string{"perl", "-e", "print 1", "-e", "{{x}}"}, 4},
		{[]string{"node", "-p", "1", "-e", "{{x}}"}, 4},
		{[]string{"bash", "--rcfile", "/dev/null", "-c", "{{x}}"}, 4},
		{[]string{"bash", "--init-file", "/dev/null", "-c", "{{x}}"}, 4},
		{[]string{"python3", "--check-hash-based-pycs", "never", "-c", "{{x}}"}, 4},
		{[]string{"python3", "--some-new-option", "value", "-c", "{{x}}"}, 4},
		{[]string{"sh", "+e", "-c", "{{x}}"}, 3},
		{[]string{"bash", "-c", "-", "{{x}}"}, 3},
		{[]string{"python3", "-m", "timeit", "{{x}}"}, 3},
		{[]string{"python3", "-X", "dev", "-m", "pdb", "-c", "{{x}}", "p.py"}, 6},
		{[]string{"script", "-qc", "{{x}}", "/dev/null"}, 2},
		{[]string{"zip", "-T", "-TT", "{{x}}", "a.zip", "a"}, 3},
		{[]string{"valgrind", "sh", "-c", "{{x}}"}, 3},
		{[]string{"sh", "-c", "$1", "sh", "{{x}}"}, 4},
		{[]string{"bash", "-c", "$0", "{{x}}"}, 3},
		{[]string{"sh", "-c", "eval \"$1\"", "sh", "{{x}}"}, 4},
		{[]string{"python3", "-c", "import sys;exec(sys.argv[1])", "{{x}}"}, 3},
		{[]string{"perl", "-e", "eval $ARGV[0]", "{{x}}"}, 3},
		{[]string{"node", "-e", "eval(process.argv[1])", "{{x}}"}, 3},
		{[]string{"timeout", "--weird", "5", "sh", "-c", "{{x}}"}, 5},
		// Issue 39: a fixed script of a language may evaluate its
		// arguments in ways no list of evaluators knows; every argument
		// handed to one is code.
		{[]string{"bash", "-c", "[[ $1 -gt 5 ]] && echo big", "bash", "{{n}}"}, 4},
		{[]string{"bash", "-c", "declare -i n=$1; echo $n", "bash", "{{n}}"}, 4},
		{[]string{"python3", "-c", "import pickle,sys; pickle.loads(bytes.fromhex(sys.argv[1]))", "{{x}}"}, 3},
		{[]string{"node", "-e", "require('vm').runInThisContext(process.argv[1])", "{{x}}"}, 3},
		{[]string{"perl", "-e", "open(F, $ARGV[0]); print <F>", "{{x}}"}, 3},
		{[]string{"awk", "BEGIN { cmd = ARGV[1]; cmd | getline l; print l }", "{{x}}"}, 2},
		{[]string{"sh", "-c", "grep -- \"$1\" notes.txt", "sh", "{{pattern}}"}, 4},
		{[]string{"python3", "-c", "import sys; print(sys.argv[1])", "{{x}}"}, 3},
		{[]string{"awk", "-F", ",", "{print $1}", "{{file}}"}, 4},
		{[]string{"bash", "-c", "echo \"$1\"", "bash", "{{x}}"}, 4},
		{[]string{"bash", "-e", "-u", "-c", "printf '%s\\n' \"$1\"", "bash", "{{x}}"}, 6},
		{[]string{"python3", "/opt/tools/tool.py", "{{x}}"}, 2},
		{[]string{"php", "/opt/tools/tool.php", "{{x}}"}, 2},
		{[]string{"env", "LANG=C", "ruby", "-e", "puts ARGV[0]", "{{x}}"}, 5},
		// Programs that run code the work directory holds, with or
		// without a placeholder: a script or program file there, make,
		// npm, pytest, git, and a fixed shell script that runs one.
		{[]string{"python3", "tool.py", "{{x}}"}, 1},
		{[]string{"python3", "-u", "-I", "tool.py"}, 3},
		{[]string{"node", "script.js", "--name", "{{name}}"}, 1},
		{[]string{"sh", "run.sh"}, 1},
		{[]string{"./build.sh", "{{x}}"}, 0},
		{[]string{"make", "test"}, 0},
		{[]string{"timeout", "60", "make"}, 2},
		{[]string{"npm", "test"}, 0},
		{[]string{"pytest", "-q"}, 0},
		{[]string{"cargo", "build"}, 0},
		{[]string{"git", "status", "--short"}, 0},
		{[]string{"git", "log", "--grep", "{{x}}"}, 0},
		{[]string{"sh", "-c", "cd sub && make all"}, 2},
		{[]string{"bash", "-c", "git diff"}, 2},
		{[]string{"python3", "-m", "pytest", "-q"}, 2},
		{[]string{"sh", "-c", "\"$@\"", "sh", "make", "test"}, 4},
		{[]string{"uv", "run", "pytest"}, 2},
		{[]string{"/work/build.sh"}, 0},
		{[]string{"python3", "/work/tool.py", "{{x}}"}, 1},
		{[]string{"sh", "-c", "./run.sh && echo done"}, 2},
		{[]string{"sh", "-c", "cd src; /usr/bin/make"}, 2},
		{[]string{"sh", "-c", "echo ./run.sh"}, -1},
		// Safe: no interpreter reads the caller's text, and nothing runs
		// from the work directory.
		{[]string{"echo", "{{text}}"}, -1},
		{[]string{"grep", "-rn", "{{pattern}}", "."}, -1},
		{[]string{"cat", "--", "{{path}}"}, -1},
		{[]string{"timeout", "5", "grep", "{{p}}"}, -1},
		{[]string{"find", ".", "-name", "{{pattern}}"}, -1},
		{[]string{"tar", "-tf", "{{archive}}"}, -1},
		{[]string{"env", "LANG=C", "grep", "{{p}}", "notes.txt"}, -1},
		{[]string{"timeout", "--foreground", "5", "grep", "{{p}}", "f"}, -1},
		{[]string{"xargs", "-0", "-n", "1", "echo"}, -1},
		{[]string{"jq", "-n", "--arg", "v", "{{x}}", "$v"}, -1},
		{[]string{"sed", "-e", "s/a/b/", "--", "{{file}}"}, -1},
		{[]string{"sort", "-r", "{{x}}"}, -1},
		{[]string{"python3", "-c", "print(1)"}, -1},
		{[]string{"sh", "-c", "echo make; ls -l"}, -1},
		{[]string{"wc", "--", "{{path}}"}, -1},
	} {
		if got := codeArgument(tc.argv).at; got != tc.want {
			t.Errorf("%q: %d, want %d", tc.argv, got, tc.want)
		}
	}
}

// TestRegisterRefusesCodePlaceholder: registration refuses sh -c
// {{arg}} with a problem at the element naming the field that allows it,
// and accepts the same definition with runsArgumentAsCode.
func TestRegisterRefusesCodePlaceholder(t *testing.T) {
	def := Definition{Name: "run_shell", Version: "1.0.0", Description: "Runs a shell script the caller writes.", Category: "shell",
		Parameters: []byte(`{"type":"object","properties":{"arg":{"type":"string"}},"required":["arg"]}`),
		Security:   Security{Level: LevelDangerous, Sandbox: true},
		Runner:     Runner{Kind: RunnerCommand, Argv: []string{"sh", "-c", "{{arg}}"}}}
	_, ps := Validate(&def, func(string) bool { return true })
	found := false
	for _, p := range ps {
		if p.Pointer == "/runner/argv/2" && strings.Contains(p.Message, "runner.runsArgumentAsCode") && strings.Contains(p.Message, "where sh runs the caller's text") {
			found = true
		}
	}
	if !found {
		t.Fatalf("problems %v", ps)
	}
	def.Runner.RunsArgumentAsCode = true
	_, again := Validate(&def, func(string) bool { return true })
	for _, p := range again {
		if strings.HasPrefix(p.Pointer, "/runner") {
			t.Errorf("with runsArgumentAsCode: %v", p)
		}
	}
}
