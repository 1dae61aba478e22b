package runners

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/services/sandbox"
	"toolbelt/services/tooldef"
)

// TestWorkDirSettingsDoNotRun plants, in a session's work directory
// (which is the command's HOME too), the settings through which a
// program runs code: git's core.fsmonitor (issue 39: `git status` gave
// a shell), core.pager, a hook and a global ~/.gitconfig; python's
// user site .pth file and a json.py beside the command. Each program
// still works, and nothing planted runs: no marker file appears in the
// session's directory on the host.
func TestWorkDirSettingsDoNotRun(t *testing.T) {
	tbl := sandboxTable(t)
	dir, err := tbl.WorkDir(1, "s")
	if err != nil {
		t.Fatal(err)
	}
	run := func(def tooldef.Definition) string {
		t.Helper()
		if _, ps := tooldef.Validate(&def, func(string) bool { return true }); len(ps) > 0 {
			t.Fatalf("%q refused: %v", def.Runner.Argv, ps)
		}
		res, err := tbl.Run(context.Background(), &Call{ID: "c", Def: def, Session: "s", Dir: dir,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("%q: %v", def.Runner.Argv, err)
		}
		out := res.(map[string]any)
		if out["exit_code"] != 0 {
			t.Errorf("%q: exit %v: %s", def.Runner.Argv, out["exit_code"], out["stderr"])
		}
		return out["stdout"].(string) + out["stderr"].(string)
	}
	// git runs the drivers .gitattributes names whatever the switches, so
	// a git tool says it runs the caller's code; its switchable settings
	// are off all the same.
	declared := func(argv ...string) tooldef.Definition {
		def := commandTool(argv, nil)
		def.Runner.RunsArgumentAsCode = true
		def.Security.Level = tooldef.LevelModerate
		return def
	}
	run(declared("sh", "-c", `git init -q . && echo one > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -qm one`))
	markers := []string{"pwned-fsmonitor", "pwned-global", "pwned-pager", "pwned-hook", "pwned-json", "pwned-pth"}
	config, err := os.ReadFile(filepath.Join(dir.Path, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	// What an agent writes with file_write: the host writes it.
	writeFile(t, filepath.Join(dir.Path, ".git", "config"), string(config)+
		"[core]\n\tfsmonitor = touch pwned-fsmonitor\n\tpager = touch pwned-pager\n[pager]\n\tstatus = true\n\tdiff = true\n", 0o644)
	writeFile(t, filepath.Join(dir.Path, ".gitconfig"), "[core]\n\tfsmonitor = touch pwned-global\n\thooksPath = .\n", 0o644)
	writeFile(t, filepath.Join(dir.Path, ".git", "hooks", "pre-commit"), "#!/bin/sh\ntouch pwned-hook\n", 0o755)
	writeFile(t, filepath.Join(dir.Path, "a.txt"), "two\n", 0o644)

	if got := run(declared("git", "status", "--short")); got != " M a.txt\n?? .gitconfig\n" {
		t.Errorf("git status: %q", got)
	}
	if got := run(declared("git", "diff")); !strings.Contains(got, "-one\n+two\n") {
		t.Errorf("git diff: %q", got)
	}
	run(declared("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two"))
	if got := run(declared("git", "log", "--format=%s")); got != "two\none\n" {
		t.Errorf("git log: %q", got)
	}

	// python: the work directory is not on sys.path, and ~/.local is not
	// a site directory.
	site := strings.TrimSpace(run(commandTool([]string{"python3", "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib', 'posix_user'))"}, nil)))
	site, ok := strings.CutPrefix(site, tbl.Sandbox().WorkPath(sandbox.Spec{Dir: dir.Path})+"/")
	if !ok {
		t.Fatalf("python's user site is not in the work directory: %q", site)
	}
	if err := os.MkdirAll(filepath.Join(dir.Path, site), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir.Path, site, "evil.pth"), "import os; open('pwned-pth', 'w')\n", 0o644)
	writeFile(t, filepath.Join(dir.Path, "json.py"), "open('pwned-json', 'w')\ndumps = str\n", 0o644)
	if got := run(commandTool([]string{"python3", "-c", "import json; print(json.dumps([1]))"}, nil)); got != "[1]\n" {
		t.Errorf("python: %q", got)
	}

	for _, m := range markers {
		if _, err := os.Stat(filepath.Join(dir.Path, m)); err == nil {
			t.Errorf("a planted setting ran: %s was created", filepath.Join(dir.Path, m))
		}
	}
}
