package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlantedGitSettingsDoNotRun (issue 39, item 3) replays the attack:
// an agent granted only the filesystem category writes core.fsmonitor
// and a pager into .git/config, and core.fsmonitor into ~/.gitconfig
// (HOME is the work directory), with file_write, then calls the git
// tools it was given. git works, and no planted program runs: no marker
// file appears in the session's directory on the host. git tools run the
// caller's code through attribute drivers all the same, so they are
// registered as such (runsArgumentAsCode, moderate), reached through
// their category.
func TestPlantedGitSettingsDoNotRun(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	if r := app.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", app.ids["agent"]), map[string]any{"categories": []string{"filesystem"}}); r.Status != 200 {
		t.Fatalf("grants: %d %s", r.Status, r.Body)
	}
	for name, argv := range map[string][]any{
		"git_init":   {"sh", "-c", "git init -q . && git add a.txt && git -c user.name=t -c user.email=t@t commit -qm one"},
		"git_status": {"git", "status", "--short"},
		"git_diff":   {"git", "diff"},
	} {
		def := toolDef(name, func(m map[string]any) {
			m["description"] = "Run " + name + " in the session's work directory. Input: nothing. Output: git's."
			m["category"] = "filesystem"
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
			m["security"] = map[string]any{"level": "moderate", "sandbox": true}
			m["runner"] = map[string]any{"kind": "command", "argv": argv, "runsArgumentAsCode": true}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register %s: %d %s", name, r.Status, r.Body)
		}
	}
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		code, res := app.call(t, "agent", map[string]any{"tool": tool, "session_id": "g", "arguments": args})
		if code != 200 || res["success"] != true {
			t.Fatalf("%s: %d %v", tool, code, res)
		}
		return data(res)
	}
	call("file_write", map[string]any{"path": "a.txt", "content": "one\n"})
	if d := call("git_init", map[string]any{}); d["exit_code"] != float64(0) {
		t.Fatalf("git init: %v", d)
	}
	config := call("file_read", map[string]any{"path": ".git/config"})["content"].(string)
	call("file_write", map[string]any{"path": ".git/config", "content": config +
		"[core]\n\tfsmonitor = touch pwned-fsmonitor\n\tpager = touch pwned-pager\n[pager]\n\tstatus = true\n"})
	call("file_write", map[string]any{"path": ".gitconfig", "content": "[core]\n\tfsmonitor = touch pwned-global\n"})
	call("file_write", map[string]any{"path": "a.txt", "content": "two\n"})

	if d := call("git_status", map[string]any{}); d["stdout"] != " M a.txt\n?? .gitconfig\n" {
		t.Errorf("git status: %v", d)
	}
	if d := call("git_diff", map[string]any{}); !strings.Contains(d["stdout"].(string), "-one\n+two\n") {
		t.Errorf("git diff: %v", d)
	}
	dir := app.workDir(t, "agent", "g")
	for _, m := range []string{"pwned-fsmonitor", "pwned-pager", "pwned-global"} {
		if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
			t.Errorf("a planted setting ran: %s was created", filepath.Join(dir, m))
		}
	}
}
