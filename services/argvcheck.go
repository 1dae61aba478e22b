package services

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// A command tool's placeholders become single arguments, never shell
// text; but an argument in the script position of a shell or interpreter
// (`sh -c {{x}}`, `python3 -c {{x}}`, `node -e {{x}}`, `awk {{x}}`) is
// run as a program all the same. Registration refuses that unless the
// definition says running the caller's code is the tool's purpose
// (runner.runsArgumentAsCode).

// interpreters maps a program (its base name without a version) to the
// options whose next argument is program text, a script file or a module
// to run. For each, the first argument that is not an option is program
// text or a script file too.
var interpreters = map[string][]string{
	"sh": {"-c"}, "bash": {"-c"}, "dash": {"-c"}, "zsh": {"-c"}, "ksh": {"-c"}, "mksh": {"-c"}, "ash": {"-c"},
	"fish": {"-c", "--command"}, "csh": {"-c"}, "tcsh": {"-c"}, "busybox": nil,
	"python": {"-c", "-m"}, "pypy": {"-c", "-m"}, "node": {"-e", "--eval", "-p", "--print"}, "nodejs": {"-e", "--eval", "-p", "--print"},
	"bun": {"-e", "--eval", "-p", "--print"}, "deno": {"eval"}, "perl": {"-e", "-E"}, "ruby": {"-e"}, "php": {"-r"},
	"lua": {"-e"}, "luajit": {"-e"}, "rscript": {"-e"}, "r": {"-e"}, "tclsh": nil, "wish": nil, "osascript": {"-e"},
	"pwsh": {"-c", "-command", "-encodedcommand", "-e"}, "powershell": {"-c", "-command", "-encodedcommand", "-e"},
	"awk": {"--source", "-f"}, "gawk": {"--source", "-e", "-f", "--file"}, "mawk": {"-f"}, "nawk": {"-f"},
	"sed":    {"-e", "--expression", "-f", "--file"},
	"jshell": nil, "groovy": {"-e"}, "scala": {"-e"}, "julia": {"-e", "--eval", "-E", "--print"}, "guile": {"-c"},
	"sqlite3": nil, "psql": {"-c", "--command"}, "gdb": {"-ex"},
}

// valueFlags are options whose next argument is their value, not the
// script (so `awk -F , {{x}}` is still seen as running {{x}}).
var valueFlags = map[string][]string{
	"awk": {"-F", "-v"}, "gawk": {"-F", "-v"}, "mawk": {"-F", "-v"}, "nawk": {"-F", "-v"},
	"python": {"-W", "-X"}, "pypy": {"-W", "-X"}, "node": {"-r", "--require", "--import"}, "nodejs": {"-r", "--require", "--import"},
	"perl": {"-I", "-M"}, "ruby": {"-I", "-r"}, "bash": {"-o", "-O"}, "sh": {"-o"}, "dash": {"-o"}, "zsh": {"-o"}, "ksh": {"-o"},
	"psql": {"-d", "-U", "-h", "-p"}, "sqlite3": {"-cmd"},
}

// wrappers run the rest of argv as a command, after options of their own.
var wrappers = map[string]bool{"env": true, "timeout": true, "nice": true, "nohup": true, "stdbuf": true,
	"setsid": true, "xargs": true, "exec": true, "command": true, "time": true, "ionice": true, "chrt": true, "taskset": true}

// combinedFlags are interpreters whose single-letter options combine
// ("-ec" is "-e -c").
var combinedFlags = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "python": true, "pypy": true}

var versionSuffix = regexp.MustCompile(`[0-9.\-]+$`)

func programName(p string) string {
	name := strings.ToLower(path.Base(p))
	name = strings.TrimSuffix(name, ".exe")
	if trimmed := versionSuffix.ReplaceAllString(name, ""); trimmed != "" {
		name = trimmed
	}
	return name
}

// codeArgument returns the index of the first argv element that is a
// placeholder in a script position, and the interpreter running it; -1
// when there is none.
func codeArgument(argv []string) (int, string) {
	i := 0
	// Skip wrappers (env FOO=1 timeout 5 sh -c …) to the real program.
	for i < len(argv) && wrappers[programName(argv[i])] {
		i++
		for i < len(argv) && (strings.HasPrefix(argv[i], "-") || strings.Contains(argv[i], "=") || isNumberish(argv[i])) {
			if placeholder.MatchString(argv[i]) {
				return i, programName(argv[i-1])
			}
			i++
		}
	}
	if i >= len(argv) {
		return -1, ""
	}
	prog := programName(argv[i])
	if prog == "busybox" && i+1 < len(argv) {
		i++ // busybox sh -c …: the applet is the program
		prog = programName(argv[i])
	}
	evalFlags, ok := interpreters[prog]
	if !ok {
		return -1, ""
	}
	positional := false
	for j := i + 1; j < len(argv); j++ {
		a := argv[j]
		if placeholder.MatchString(a) && !positional {
			// At or before the script position: a flag, the program text or
			// the script file the interpreter runs.
			return j, prog
		}
		if isEvalFlag(prog, a, evalFlags) {
			if j+1 < len(argv) && placeholder.MatchString(argv[j+1]) {
				return j + 1, prog
			}
			j++
			positional = true // the script is fixed; what follows are its arguments
			continue
		}
		if a == "--" {
			continue
		}
		if isFlag(prog, a, valueFlags[prog]) {
			if j+1 < len(argv) && placeholder.MatchString(argv[j+1]) {
				return j + 1, prog // conservatively: a value the caller picks before the script
			}
			j++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			positional = true
		}
	}
	return -1, ""
}

// isFlag reports whether a is one of flags (PowerShell's options are
// case-insensitive; they are listed in lower case).
func isFlag(prog, a string, flags []string) bool {
	if prog == "pwsh" || prog == "powershell" {
		a = strings.ToLower(a)
	}
	for _, f := range flags {
		if a == f {
			return true
		}
	}
	return false
}

func isEvalFlag(prog, a string, flags []string) bool {
	if isFlag(prog, a, flags) {
		return true
	}
	if combinedFlags[prog] && len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.HasSuffix(a, "c") {
		return true
	}
	return false
}

// isNumberish is a wrapper's numeric operand (timeout 5s, nice -n 10).
func isNumberish(s string) bool { return duration.MatchString(s) }

var duration = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[smhd]?$`)

// checkCodeArgument adds a problem when argv runs a placeholder as code
// without the definition saying so.
func checkCodeArgument(r Runner, ps *problems) {
	if r.RunsArgumentAsCode {
		return
	}
	i, prog := codeArgument(r.Argv)
	if i < 0 {
		return
	}
	ps.add(fmt.Sprintf("/runner/argv/%d", i),
		"%q is in the script position of %s, which would run the caller's text as a program; pass it as an argument after a fixed script (e.g. [\"sh\", \"-c\", \"grep -- \\\"$1\\\" notes.txt\", \"sh\", \"{{pattern}}\"]), or set runner.runsArgumentAsCode to true if running the caller's code is this tool's purpose",
		r.Argv[i], prog)
}
