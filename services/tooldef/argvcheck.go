package tooldef

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"toolbelt/models"
)

// A command tool's placeholders become single arguments, never shell
// text; but an argument in the script position of a shell or interpreter
// (`sh -c {{x}}`, `python3 -c {{x}}`, `awk {{x}}`), or in an option that
// runs a command (`find -exec sh -c {{x}}`, `git -c {{x}}`, `tar
// --to-command {{x}}`), is run as a program all the same. So is an
// argument handed to a fixed script of a general-purpose language: the
// script may evaluate it (`eval`, `[[ $1 -gt 5 ]]`, `pickle.loads`,
// perl's two-argument open, awk's `cmd | getline`), and no list of
// evaluators can be complete, so every placeholder that reaches one is
// code. Registration refuses the forms this table knows unless the
// definition says running the caller's code is the tool's purpose
// (runner.runsArgumentAsCode). It is a lint of known programs, not a
// proof: a program it does not know may still interpret an argument.

// argvRule says how a program reads its arguments.
type argvRule struct {
	code     []string // options whose next argument is program text, a script, a module or a command line
	values   []string // options whose next argument is a plain value
	operands int      // positional arguments before the script or command (timeout's duration, sqlite3's database)
	script   bool     // the first positional argument after the operands is program text or a script file
	wrapper  bool     // after the operands comes a command, read by its own rule
	allCode  bool     // every positional argument after the operands is program text (watch, ssh, parallel)
	sub      []string // options followed by a command up to ";" or "+" (find -exec)
	combined bool     // single-letter options combine, and one ending in c takes the script ("-ec")
	flags    []string // options known to take no value; for interpreters and wrappers any other
	// option fails closed: what follows it might be its value or the script, so a later placeholder
	// is refused
	letters string // single-letter options (clustered, after - or +) known to take no value
	// stops says options end at the script: what follows it are the
	// script's own arguments, not the interpreter's options (sh, python,
	// node, perl, ruby; not sed or awk, whose GNU versions read options
	// anywhere).
	stops bool
	plus  bool     // a leading "+" is an option or a command too (vim +cmd, less +cmd, sh +o)
	pairs []string // options followed by two plain values (jq --arg name value)
	// assigns says an operand with "=" is a variable assignment the
	// program evaluates (make 'X:=$(shell cmd)'), not a plain value.
	assigns bool
	// lang marks a general-purpose language: a fixed script of it can do
	// anything with its arguments, so an argument after one is code too
	// (not sed, jq, bc or dc, whose scripts cannot read their arguments).
	lang bool
	// inline says the first positional argument is program text, not a
	// script file (awk).
	inline bool
}

var (
	shellRule = argvRule{code: []string{"-c", "--command"}, values: []string{"-o", "+o", "-O", "+O", "--rcfile", "--init-file"},
		flags:   []string{"--norc", "--noprofile", "--posix", "--login", "--restricted", "--verbose", "--noediting", "--"},
		letters: "abefhkmnprstuvxBCEHPTil", script: true, combined: true, stops: true, plus: true, lang: true}
	pythonRule = argvRule{code: []string{"-c", "-m"}, values: []string{"-W", "-X", "--check-hash-based-pycs"},
		letters: "bBdEiIOPqRsSuvx", script: true, combined: true, stops: true, lang: true}
	nodeRule = argvRule{code: []string{"-e", "--eval", "-p", "--print"}, values: []string{"-r", "--require", "--import"},
		flags: []string{"--no-warnings", "--enable-source-maps", "--no-deprecation", "--trace-warnings"}, script: true, stops: true, lang: true}
	awkRule   = argvRule{code: []string{"--source", "-e", "-f", "--file"}, values: []string{"-F", "-v"}, script: true, lang: true, inline: true}
	pwshRule  = argvRule{code: []string{"-c", "-command", "-encodedcommand", "-e", "-ec", "-f", "-file"}, script: true, lang: true}
	langRule  = argvRule{script: true, lang: true}
	plainWrap = argvRule{wrapper: true}
	vimRule   = argvRule{code: []string{"-c", "--cmd", "-S", "-s", "-u", "-U"}, plus: true}
	pagerRule = argvRule{plus: true} // less +cmd runs a pager command; !cmd in one runs a shell
	jqRule    = argvRule{code: []string{"-f", "--from-file"}, values: []string{"--indent", "-L"},
		pairs: []string{"--arg", "--argjson", "--slurpfile", "--rawfile"}, script: true,
		flags: []string{"-n", "--null-input", "-r", "--raw-output", "-j", "--join-output", "-c", "--compact-output",
			"-s", "--slurp", "-e", "--exit-status", "-S", "--sort-keys", "-a", "--ascii-output", "-R", "--raw-input",
			"--tab", "--seq", "-C", "-M", "--args", "--jsonargs", "--"}}
)

var argvRules = map[string]argvRule{
	"sh": shellRule, "bash": shellRule, "dash": shellRule, "zsh": shellRule, "ksh": shellRule, "mksh": shellRule,
	"ash": shellRule, "csh": shellRule, "tcsh": shellRule, "fish": shellRule, "rbash": shellRule,
	"python": pythonRule, "pypy": pythonRule, "ipython": pythonRule, "pythonw": pythonRule,
	"node": nodeRule, "nodejs": nodeRule, "bun": nodeRule, "deno": {code: []string{"eval", "-e", "--eval"}, script: true, lang: true},
	"perl": {code: []string{"-e", "-E"}, values: []string{"-I"}, script: true, stops: true, lang: true},
	"ruby": {code: []string{"-e"}, values: []string{"-I", "-r"}, script: true, stops: true, lang: true},
	"php":  {code: []string{"-r", "-B", "-E", "-R", "-F"}, script: true, lang: true},
	"lua":  {code: []string{"-e"}, script: true, lang: true}, "luajit": {code: []string{"-e"}, script: true, lang: true},
	"rscript": {code: []string{"-e"}, script: true, lang: true}, "r": {code: []string{"-e"}, script: true, lang: true},
	"tclsh": langRule, "wish": langRule, "expect": {code: []string{"-c", "-f"}, script: true, lang: true},
	"osascript": {code: []string{"-e"}, script: true, lang: true}, "pwsh": pwshRule, "powershell": pwshRule,
	"awk": awkRule, "gawk": awkRule, "mawk": awkRule, "nawk": awkRule, "busybox": {wrapper: true},
	"sed":    {code: []string{"-e", "--expression", "-f", "--file"}, script: true},
	"jshell": langRule, "groovy": {code: []string{"-e"}, script: true, lang: true}, "scala": {code: []string{"-e"}, script: true, lang: true},
	"julia": {code: []string{"-e", "--eval", "-E", "--print"}, script: true, lang: true}, "guile": {code: []string{"-c"}, script: true, lang: true},
	"dc": {code: []string{"-e", "--expression", "-f", "--file"}, script: true}, "bc": {script: true},
	"gdb":    {code: []string{"-ex", "-x", "-eval-command", "-iex"}},
	"sqlite": {code: []string{"-cmd", "-init"}, operands: 1, allCode: true}, // sqlite3, its version stripped
	"psql":   {code: []string{"-c", "--command", "-f", "--file"}, values: []string{"-d", "-U", "-h", "-p"}},
	"mysql":  {code: []string{"-e", "--execute"}, values: []string{"-u", "-h", "-P", "-D"}},
	"make":   {code: []string{"--eval", "-f", "--file", "--makefile"}, values: []string{"-C", "-j"}, assigns: true},
	"vim":    vimRule, "vi": vimRule, "nvim": vimRule, "ex": vimRule, "view": vimRule, "rvim": vimRule, "vimdiff": vimRule, "gvim": vimRule,
	"less": pagerRule, "more": pagerRule,
	"emacs": {code: []string{"--eval", "-l", "--load", "-f", "--funcall"}},
	// jq's filter is a program (it reads $ENV, env and input files);
	// sort runs its --compress-program on its temporary files.
	"jq": jqRule, "gojq": jqRule, "jaq": jqRule, "yq": jqRule,
	"sort":     {code: []string{"--compress-program"}},
	"man":      {code: []string{"-P", "--pager", "-H", "--html"}},
	"rsync":    {code: []string{"-e", "--rsh", "--rsync-path"}},
	"ssh":      {values: []string{"-p", "-l", "-i", "-o", "-F", "-J", "-b", "-c", "-D", "-E", "-e", "-I", "-L", "-m", "-O", "-Q", "-R", "-S", "-W", "-w"}, operands: 1, allCode: true},
	"git":      {code: []string{"-c", "--config-env", "--exec-path"}, values: []string{"-C"}},
	"tar":      {code: []string{"--to-command", "--checkpoint-action", "-I", "--use-compress-program", "--rsh-command", "--info-script", "-F", "--new-volume-script"}},
	"find":     {sub: []string{"-exec", "-execdir", "-ok", "-okdir"}},
	"watch":    {values: []string{"-n", "--interval", "-d", "-q"}, allCode: true},
	"parallel": {allCode: true},
	"su":       {code: []string{"-c", "--command", "--session-command"}, values: []string{"-s", "--shell", "-g", "-G", "-w"}},
	"runuser":  {code: []string{"-c", "--command", "--session-command"}, values: []string{"-s", "--shell", "-g", "-G", "-u", "-w"}},
	"script":   {code: []string{"-c", "--command"}, combined: true},
	"flock":    {code: []string{"-c", "--command"}, values: []string{"-w", "--timeout", "-E", "--conflict-exit-code"}, operands: 1, wrapper: true},
	"env":      {code: []string{"-S", "--split-string"}, values: []string{"-u", "--unset", "-C", "--chdir"}, wrapper: true},
	"timeout":  {values: []string{"-s", "--signal", "-k", "--kill-after"}, operands: 1, wrapper: true},
	"nice":     {values: []string{"-n", "--adjustment"}, wrapper: true},
	"ionice":   {values: []string{"-c", "--class", "-n", "--classdata"}, wrapper: true},
	"chrt":     {operands: 1, wrapper: true},
	"taskset":  {values: []string{"-c", "--cpu-list"}, operands: 1, wrapper: true},
	"stdbuf":   {values: []string{"-i", "-o", "-e"}, wrapper: true},
	"xargs":    {values: []string{"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars"}, wrapper: true},
	"sudo":     {values: []string{"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}, wrapper: true},
	"doas":     {values: []string{"-u", "-C"}, wrapper: true},
	"strace":   {values: []string{"-o", "-e", "-p", "-s", "-u", "-P", "-I", "-b", "-a", "-S", "-X"}, wrapper: true},
	"ltrace":   {values: []string{"-o", "-e", "-p", "-s", "-u", "-n", "-a", "-S"}, wrapper: true},
	"chroot":   {operands: 1, wrapper: true}, "uv": {operands: 1, wrapper: true}, "poetry": {operands: 1, wrapper: true},
	"zip":      {code: []string{"-TT", "--unzip-command"}},
	"valgrind": {wrapper: true},
	"perf":     {values: []string{"-e", "-o", "-p", "-t", "-c", "-F", "--event", "--output"}, operands: 1, wrapper: true},
	"npx":      {code: []string{"-c", "--call"}, values: []string{"-p", "--package"}, wrapper: true},
	"setsid":   plainWrap, "nohup": plainWrap, "exec": plainWrap, "command": plainWrap, "time": plainWrap, "setpriv": plainWrap,
	"unshare": plainWrap, "nsenter": plainWrap, "firejail": plainWrap, "sg": {operands: 1, wrapper: true},
	"eatmydata": plainWrap, "nocache": plainWrap, "chronic": plainWrap, "unbuffer": plainWrap, "torsocks": plainWrap,
	"proxychains": plainWrap, "catchsegv": plainWrap, "dbus-run-session": plainWrap, "systemd-run": plainWrap,
	"faketime": {operands: 1, wrapper: true},
}

var versionSuffix = regexp.MustCompile(`[0-9.\-]+$`)

func programName(p string) string {
	name := strings.ToLower(path.Base(p))
	name = strings.TrimSuffix(name, ".exe")
	if trimmed := versionSuffix.ReplaceAllString(name, ""); trimmed != "" {
		name = trimmed
	}
	return name
}

func isPlaceholder(a string) bool { return Placeholder.MatchString(a) }

// codeUse is a place where a command template runs the caller's code.
type codeUse struct {
	at   int    // the argv element; -1 when there is none
	prog string // the program that runs it
	how  useKind
}

type useKind int

const (
	useText      useKind = iota // the element is program text, a script or a command line the caller picks
	useScriptArg                // the element is an argument of a fixed script of a language
	useWorkDir                  // the program runs code it reads from the work directory
)

var noUse = codeUse{at: -1}

// codeArgument returns the first place where argv runs the caller's
// code: a placeholder in a script or command position, or one handed to
// a fixed script, or a program that runs what the work directory holds.
func codeArgument(argv []string) codeUse {
	return commandAt(argv, 0, 0)
}

// commandAt reads argv[i:] as a command line; depth bounds the wrappers.
func commandAt(argv []string, i, depth int) codeUse {
	if i >= len(argv) || depth > 8 {
		return noUse
	}
	if isPlaceholder(argv[i]) {
		return codeUse{i, "the command line", useText} // the caller picks the program
	}
	if inWorkDir(argv[i]) {
		return codeUse{i, argv[i], useWorkDir} // ./build.sh: a file of the work directory
	}
	prog := programName(argv[i])
	if runsWorkDirCode(prog) {
		return codeUse{i, prog, useWorkDir}
	}
	rule, ok := argvRules[prog]
	if !ok {
		return noUse
	}
	positional := 0
	fixed := false  // the script is given, not the caller's: what follows are its arguments
	unsure := false // an option not understood, or a module run
	strict := rule.script || rule.wrapper
	for j := i + 1; j < len(argv); j++ {
		a := argv[j]
		switch {
		case isPlaceholder(a):
			if unsure {
				return codeUse{j, prog, useText} // fail closed
			}
			if fixed {
				switch {
				case rule.allCode:
					return codeUse{j, prog, useText}
				case rule.lang:
					return codeUse{j, prog, useScriptArg}
				}
				continue
			}
			if positional < rule.operands && !rule.allCode {
				positional++
				continue // an operand the caller picks (a duration, a database)
			}
			if rule.script || rule.allCode || rule.wrapper {
				return codeUse{j, prog, useText} // the script, or the program of the command run
			}
		case isFlag(prog, a, rule.code), rule.combined && combinedScript(a):
			// The next argument (past "--" or "-") is program text. A code
			// option after the script is one too (perl and node join or
			// take repeated -e).
			k := j + 1
			for k < len(argv) && (argv[k] == "--" || argv[k] == "-") {
				k++
			}
			if k < len(argv) && isPlaceholder(argv[k]) {
				return codeUse{k, prog, useText}
			}
			if prog == "env" {
				// env -S splits its fixed value into the command line: its
				// words are not argv elements, there is nothing more to read.
				return noUse
			}
			if k < len(argv) && rule.combined && rule.lang {
				if p := shellRunsWorkDirCode(argv[k]); p != "" {
					return codeUse{k, p, useWorkDir} // sh -c 'make test'
				}
			}
			if a == "-m" {
				if k < len(argv) && runsWorkDirCode(argv[k]) {
					return codeUse{k, argv[k], useWorkDir} // python3 -m pytest
				}
				unsure = true // a module: it may be a script that runs its arguments
			}
			j = k
			if rule.script {
				fixed = true
			}
		case !fixed && isFlag(prog, a, rule.values):
			if j+1 < len(argv) && isPlaceholder(argv[j+1]) {
				return codeUse{j + 1, prog, useText} // a value the caller picks before the script: refused to be safe
			}
			j++
		case !fixed && isFlag(prog, a, rule.pairs):
			j += 2 // jq --arg name {{value}}: data, bound to a variable the filter reads
		case isFlag(prog, a, rule.sub):
			end := j + 1
			for end < len(argv) && argv[end] != ";" && argv[end] != "+" {
				end++
			}
			if u := commandAt(argv[:end], j+1, depth+1); u.at >= 0 {
				return u
			}
			j = end
		case a == "--":
		case (strings.HasPrefix(a, "-") || rule.combined && strings.HasPrefix(a, "+")) && a != "-" && !fixed:
			// an option of its own: known, or (for interpreters and
			// wrappers) a reason to refuse any placeholder after it
			if strict && !isFlag(prog, a, rule.flags) && !knownLetters(a, rule.letters) {
				unsure = true
			}
		case prog == "env" && strings.Contains(a, "=") && positional == 0:
			// NAME=value
		default:
			if fixed {
				if rule.combined && rule.lang && runsWorkDirCode(programName(a)) {
					return codeUse{j, programName(a), useWorkDir} // sh -c '"$@"' sh make
				}
				continue
			}
			if positional < rule.operands {
				positional++
				continue
			}
			if rule.wrapper {
				return commandAt(argv, j, depth+1)
			}
			if rule.script {
				if rule.lang && !rule.inline && !unsure && (!path.IsAbs(a) || inWorkDir(a)) {
					return codeUse{j, prog, useWorkDir} // python3 tool.py: a script of the work directory
				}
				fixed = true // a fixed script file: the rest are its arguments
				continue
			}
			if rule.allCode {
				fixed = true
			}
		}
	}
	return noUse
}

// inWorkDir reports whether a program or script path names a file of
// the work directory: a relative path (the command starts there) or one
// under /work, where bubblewrap mounts it.
func inWorkDir(p string) bool {
	if !path.IsAbs(p) {
		return strings.Contains(p, "/")
	}
	return p == "/work" || strings.HasPrefix(p, "/work/")
}

// knownLetters reports whether a is a cluster of single-letter options
// (after - or +), all known to take no value.
func knownLetters(a, letters string) bool {
	if letters == "" || len(a) < 2 || a[0] != '-' && a[0] != '+' || a[1] == '-' {
		return false
	}
	for _, c := range a[1:] {
		if !strings.ContainsRune(letters, c) {
			return false
		}
	}
	return true
}

// combinedScript reports whether a is single-letter options ending in c
// ("-ec", "-xc"): the next argument is the script.
func combinedScript(a string) bool {
	return len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.HasSuffix(a, "c")
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

// checkCodeArgument adds a problem when argv runs the caller's code
// without the definition saying so, and when a definition that says so
// is safe: an agent may then be granted it by name, outside its category.
func checkCodeArgument(def *Definition, ps *models.Problems) {
	r := def.Runner
	if r.RunsArgumentAsCode {
		if def.Security.Level == LevelSafe {
			ps.Add("/security/level", "must be moderate or dangerous: runner.runsArgumentAsCode says the tool runs the caller's code, and a safe tool may be granted by name outside its category (as code_execute, which is moderate, may not)")
		}
		return
	}
	u := codeArgument(r.Argv)
	if u.at < 0 {
		return
	}
	ps.Add(fmt.Sprintf("/runner/argv/%d", u.at), "%s", u.problem(r.Argv))
}

// UndeclaredCode is the problem checkCodeArgument finds in def, or "":
// a template stored before registration refused it is refused when it
// is called instead.
func UndeclaredCode(def Definition) string {
	var ps models.Problems
	checkCodeArgument(&def, &ps)
	if len(ps) == 0 {
		return ""
	}
	return ps[0].Pointer + ": " + ps[0].Message
}

// problem is the message of a use the definition did not declare.
func (u codeUse) problem(argv []string) string {
	const declare = "set runner.runsArgumentAsCode to true (with a security level of moderate or dangerous) if running the caller's code is this tool's purpose"
	switch u.how {
	case useScriptArg:
		return fmt.Sprintf("%q is an argument of a fixed %s script, and a script may run its arguments as code (eval, arithmetic, pickle, two-argument open, | getline; no list of such forms is complete): pass the value to a program that is not an interpreter, or %s",
			argv[u.at], u.prog, declare)
	case useWorkDir:
		return fmt.Sprintf("%q runs code from the session's work directory, which the caller can write (%s): %s",
			argv[u.at], workDirReads(u.prog), declare)
	}
	return fmt.Sprintf("%q is in a position where %s runs the caller's text as a program: %s",
		argv[u.at], u.prog, declare)
}
