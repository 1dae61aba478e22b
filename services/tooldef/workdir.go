package tooldef

import (
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A command runs in the session's work directory, which is also its
// HOME, and the caller can write there (file_write, any command tool that
// writes files). Many programs read code or configuration that runs code
// from their working directory or HOME: git's .git/config (core.fsmonitor
// runs on `git status`) and .gitattributes drivers, make's Makefile,
// npm's package.json scripts, pytest's conftest.py, python's user site
// (~/.local/…/*.pth) and the working directory on sys.path, zsh's
// ~/.zshenv. A template with no placeholder at all then runs the caller's
// code.
//
// workDirPrograms is the one table of them. Where a switch keeps the
// program from reading that code, env holds it and every command tool
// runs with it (WorkDirEnv); where none does, reads says what runs, and a
// template that runs the program is code: registration refuses it unless
// runner.runsArgumentAsCode says so (checkCodeArgument), like an
// argument in a script position.
type workDirProgram struct {
	reads string   // what runs from the work directory that no switch turns off; "" when env is enough
	env   []string // environment that keeps the program from reading the rest
}

var workDirPrograms = map[string]workDirProgram{
	// git reads .git/config, which can name programs: core.fsmonitor
	// (run by status and diff), hooks, the pager and editor, ssh and
	// credential helpers, gpg. Command-line configuration (here through
	// GIT_CONFIG_COUNT, so that argv stays the template's) overrides each.
	// A filter, diff or merge driver has a name the repository chooses
	// (.gitattributes: "*.txt filter=x"; .git/config: filter.x.clean),
	// so no override reaches it, and git 2.39 has no switch to ignore the
	// repository's attributes or configuration: status runs a clean
	// filter on a file whose timestamp changed.
	"git": {reads: "the filter, diff and merge drivers that .gitattributes names and .git/config defines: status and diff run them, and git has no switch that ignores them",
		env: gitEnv()},
	"python": {env: []string{"PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1"}}, // no working directory on sys.path, no ~/.local site
	"zsh":    {env: []string{"ZDOTDIR=/nonexistent"}},                   // no ~/.zshenv, which zsh reads even with -c
	"make":   {reads: "the Makefile's recipes"}, "gmake": {reads: "the Makefile's recipes"},
	"just":     {reads: "the justfile's recipes"},
	"ninja":    {reads: "build.ninja's commands"},
	"cmake":    {reads: "CMakeLists.txt, which runs programs"},
	"npm":      {reads: "package.json's scripts and .npmrc"},
	"npx":      {reads: "package.json, .npmrc and node_modules/.bin"},
	"yarn":     {reads: "package.json's scripts and .yarnrc"},
	"pnpm":     {reads: "package.json's scripts and .npmrc"},
	"pytest":   {reads: "conftest.py and the plugins that pytest.ini names"},
	"py.test":  {reads: "conftest.py and the plugins that pytest.ini names"},
	"tox":      {reads: "tox.ini's commands"},
	"nox":      {reads: "noxfile.py"},
	"pip":      {reads: "setup.py of a local package, and pip.conf"},
	"cargo":    {reads: "build.rs, proc macros and .cargo/config.toml"},
	"go":       {reads: "the module's code, its cgo directives and go.mod's toolchain"},
	"mvn":      {reads: "pom.xml's plugins"},
	"gradle":   {reads: "build.gradle"},
	"ant":      {reads: "build.xml"},
	"rake":     {reads: "the Rakefile"},
	"bundle":   {reads: "the Gemfile"},
	"composer": {reads: "composer.json's scripts"},
}

// gitEnv is the environment that keeps git from reading the system's,
// HOME's (the work directory's) and the repository's settings that run a
// program.
func gitEnv() []string {
	env := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=false", "GIT_SEQUENCE_EDITOR=false",
		"GIT_SSH_COMMAND=false", "GIT_ASKPASS=false"}
	overrides := [][2]string{
		{"core.fsmonitor", "false"}, {"core.hooksPath", "/dev/null"}, {"core.pager", "cat"},
		{"core.editor", "false"}, {"sequence.editor", "false"}, {"core.sshCommand", "false"},
		{"core.askPass", "false"}, {"credential.helper", ""}, // an empty helper clears the list
		{"gpg.program", "false"}, {"gpg.ssh.program", "false"}, {"gpg.x509.program", "false"},
		{"log.showSignature", "false"}, {"protocol.ext.allow", "never"}, {"core.alternateRefsCommand", "false"},
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(overrides)))
	for i, o := range overrides {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+o[0], "GIT_CONFIG_VALUE_"+n+"="+o[1])
	}
	return env
}

// WorkDirEnv is the environment every command tool runs with, on top of
// the sandbox's: each program's switches at once, since a wrapper or a
// fixed script may start any of them and they inherit it.
func WorkDirEnv() []string {
	var env []string
	for _, name := range slices.Sorted(maps.Keys(workDirPrograms)) {
		env = append(env, workDirPrograms[name].env...)
	}
	return env
}

// runsWorkDirCode reports whether prog runs code from the work directory
// that no switch turns off.
func runsWorkDirCode(prog string) bool {
	return workDirPrograms[prog].reads != ""
}

// workDirReads says what prog runs from the work directory, for a message.
func workDirReads(prog string) string {
	if r := workDirPrograms[prog].reads; r != "" {
		return prog + " runs " + r
	}
	return "it is a program or script file there"
}

// shellWorkDirCommand finds, in command position in a shell script
// (first on a line or after ; | & ( ` then do else exec env time xargs),
// a program of workDirPrograms or one of the work directory (./build.sh,
// /work/run).
var shellWorkDirCommand = func() *regexp.Regexp {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(workDirPrograms)) {
		if runsWorkDirCode(name) {
			names = append(names, regexp.QuoteMeta(name))
		}
	}
	return regexp.MustCompile(`(?:^|[;&|\n(` + "`" + `]|\bthen|\bdo|\belse|\bexec|\benv|\btime|\bxargs)\s*` +
		`((?:\.\.?|/work)/[\w./-]+|(?:[\w./-]*/)?(?:` + strings.Join(names, "|") + `))(?:$|[\s;&|)` + "`" + `])`)
}()

// shellRunsWorkDirCode is the program of workDirPrograms that a fixed
// shell script runs, or "".
func shellRunsWorkDirCode(script string) string {
	if m := shellWorkDirCommand.FindStringSubmatch(script); m != nil {
		if inWorkDir(m[1]) {
			return m[1]
		}
		return path.Base(m[1])
	}
	return ""
}
