package runners

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/sandbox"
	"toolbelt/services/tooldef"
)

// sandboxTable is a Table over a real sandbox; it fails in CI (where
// bubblewrap is installed) and skips elsewhere when there is none.
func sandboxTable(t *testing.T) *Table {
	t.Helper()
	data := t.TempDir()
	// The sandbox's uid must reach the work directories (t.TempDir makes
	// its directories private).
	for _, p := range []string{filepath.Dir(data), data} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	box := sandbox.Probe(context.Background(), "", filepath.Join(data, "sessions"), log)
	if !box.Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sandbox in CI: %s", box.Status().Reason)
		}
		t.Skipf("no sandbox: %s", box.Status().Reason)
	}
	return NewTable(Deps{DataDir: data, Sandbox: box, Log: log})
}

// TestArgumentsNeverBecomeOptions registers, as a safe command tool, each
// template through which an argument ran a program (issue 30, item 5),
// and calls it with the argument an attacker would send. Each must be
// refused at registration or at the call, and nothing may run: the file
// the payload creates in the session's directory (on the host) must not
// exist afterwards.
func TestArgumentsNeverBecomeOptions(t *testing.T) {
	tbl := sandboxTable(t)
	cases := []struct {
		name   string
		argv   []string
		args   map[string]any // the attack; the parameters it leaves out are optional
		atCall bool           // refused at the call (a value), not at registration (the template)
	}{
		{"make --eval", []string{"make", "{{o}}"}, map[string]any{"o": "--eval=$(shell touch pwned)"}, true},
		{"make assignment", []string{"make", "{{target}}"}, map[string]any{"target": "X:=$(file >pwned,x)"}, true},
		{"tar --use-compress-program", []string{"tar", "{{o}}", "-cf", "out.tar", "data.txt"},
			map[string]any{"o": "--use-compress-program=sh -c 'touch pwned; cat'"}, true},
		{"vim -c", []string{"vim", "-es", "{{o}}", "{{p}}"}, map[string]any{"o": "-c", "p": "!touch pwned"}, true},
		{"vim +cmd", []string{"vim", "-es", "{{file}}"}, map[string]any{"file": "+!touch pwned"}, true},
		{"find -exec", []string{"find", ".", "-maxdepth", "0", "{{a}}", "{{b}}", "{{c}}", "{{d}}"},
			map[string]any{"a": "-exec", "b": "touch", "c": "pwned", "d": ";"}, true},
		{"find -fprint", []string{"find", ".", "{{a}}", "{{b}}"}, map[string]any{"a": "-fprint", "b": "pwned"}, true},
		{"git -c alias", []string{"git", "{{a}}", "{{b}}", "{{c}}"}, map[string]any{"a": "-c", "b": "alias.x=!touch pwned", "c": "x"}, true},
		{"sort --compress-program", []string{"sort", "--compress-program", "{{p}}", "data.txt"}, map[string]any{"p": "./pwn.sh"}, false},
		{"jq $ENV", []string{"jq", "-n", "{{p}}"}, map[string]any{"p": "$ENV"}, false},
		{"behind a wrapper's --", []string{"timeout", "--", "5", "make", "{{o}}"}, map[string]any{"o": "--eval=$(shell touch pwned)"}, true},
		{"through a fixed script", []string{"sh", "-c", "make \"$1\"", "sh", "{{o}}"}, map[string]any{"o": "--eval=$(shell touch pwned)"}, true},
		{"a negative number", []string{"make", "{{o}}"}, map[string]any{"o": "-j1"}, true},
		// Left out, lines would make -n take the path as its value.
		{"head -n, lines left out", []string{"head", "-n", "{{lines}}", "{{path}}"}, map[string]any{"path": "data.txt"}, false},
	}
	// Programs that run the work directory's code (make, git) are
	// registered as code (issue 39); their arguments are still never
	// options.
	declared := map[string]bool{"make --eval": true, "make assignment": true, "git -c alias": true,
		"behind a wrapper's --": true, "through a fixed script": true, "a negative number": true}
	refusedTemplates, refusedValues := 0, 0
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def := commandTool(tc.argv, tc.args)
			if declared[tc.name] {
				def.Runner.RunsArgumentAsCode = true
				def.Security.Level = tooldef.LevelModerate
			}
			if _, ps := tooldef.Validate(&def, func(string) bool { return true }); len(ps) > 0 {
				refusedTemplates++
				if tc.atCall {
					t.Errorf("refused at registration, not at the call: %v", ps)
				}
				return
			}
			if !tc.atCall {
				t.Errorf("template accepted")
			}
			dir, err := tbl.WorkDir(1, "s"+string(rune('a'+i)))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir.Path, "data.txt"), "b\na\n", 0o644)
			writeFile(t, filepath.Join(dir.Path, "pwn.sh"), "#!/bin/sh\ntouch pwned\ncat\n", 0o755)
			res, err := tbl.Run(context.Background(), &Call{ID: "c", Def: def, Args: tc.args, Session: "s", Dir: dir,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var re *Error
			if !errors.As(err, &re) || re.Code != models.CodeValidation {
				t.Errorf("ran: %v %v", res, err)
			} else {
				refusedValues++
				named := false
				for name := range tc.args {
					named = named || strings.Contains(re.Message, "\""+name+"\"")
				}
				if !named || re.Suggestion == "" {
					t.Errorf("the refusal names no argument or gives no advice: %+v", re)
				}
			}
			if _, err := os.Stat(filepath.Join(dir.Path, "pwned")); err == nil {
				t.Errorf("the argument ran a program: %s was created", filepath.Join(dir.Path, "pwned"))
			}
		})
	}
	t.Logf("%d templates refused at registration, %d values refused at the call, of %d", refusedTemplates, refusedValues, len(cases))
}

// TestOptionsWhereTheTemplateSaysSo: a value with a leading "-" is one
// argument after "--", and options the schema lists or optionArguments
// names still reach a program that reads them, in the real sandbox.
func TestOptionsWhereTheTemplateSaysSo(t *testing.T) {
	tbl := sandboxTable(t)
	dir, err := tbl.WorkDir(1, "s")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir.Path, "-data.txt"), "b\na\nc\n", 0o644)
	run := func(def tooldef.Definition, args map[string]any) string {
		t.Helper()
		if _, ps := tooldef.Validate(&def, func(string) bool { return true }); len(ps) > 0 {
			t.Fatalf("%q refused: %v", def.Runner.Argv, ps)
		}
		res, err := tbl.Run(context.Background(), &Call{ID: "c", Def: def, Args: args, Session: "s", Dir: dir,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("%q %v: %v", def.Runner.Argv, args, err)
		}
		out := res.(map[string]any)
		return out["stdout"].(string) + out["stderr"].(string)
	}
	if got := run(commandTool([]string{"cat", "--", "{{path}}"}, nil), map[string]any{"path": "-data.txt"}); got != "b\na\nc\n" {
		t.Errorf("after --: %q", got)
	}
	order := commandTool([]string{"sort", "{{order}}", "--", "{{path}}"}, nil)
	order.Parameters = []byte(`{"type":"object","properties":{"order":{"enum":["-r","-n"]},"path":{"type":"string"}},"required":["order","path"]}`)
	if got := run(order, map[string]any{"order": "-r", "path": "-data.txt"}); got != "c\nb\na\n" {
		t.Errorf("listed option: %q", got)
	}
	flags := commandTool([]string{"uniq", "{{flags}}", "--", "{{path}}"}, map[string]any{"flags": "", "path": ""})
	flags.Runner.OptionArguments = []string{"flags"}
	if got := run(flags, map[string]any{"flags": "-c", "path": "-data.txt"}); !strings.Contains(got, "1 b") {
		t.Errorf("optionArguments: %q", got)
	}
	head := commandTool([]string{"head", "-n", "{{lines}}", "--", "{{path}}"}, nil)
	head.Parameters = []byte(`{"type":"object","properties":{"lines":{"type":"integer"},"path":{"type":"string"}},"required":["lines","path"]}`)
	if got := run(head, map[string]any{"lines": json.Number("1"), "path": "-data.txt"}); got != "b\n" {
		t.Errorf("head with lines required: %q", got)
	}
}

// commandTool is a safe command tool over argv whose placeholders are
// strings, required when args has them.
func commandTool(argv []string, args map[string]any) tooldef.Definition {
	props, required := []string{}, []string{}
	for _, a := range argv {
		if m := tooldef.Placeholder.FindStringSubmatch(a); m != nil {
			props = append(props, `"`+m[1]+`":{"type":"string"}`)
			if _, ok := args[m[1]]; ok {
				required = append(required, `"`+m[1]+`"`)
			}
		}
	}
	def := tooldef.Definition{Name: "t", Version: "1.0.0", Description: "A command tool under attack.", Category: "shell",
		Parameters: []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(required, ",") + `]}`),
		Security:   tooldef.Security{Level: tooldef.LevelSafe, Sandbox: true},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerCommand, Argv: argv}}
	tooldef.Normalize(&def)
	return def
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestStoredCodeTemplatesDoNotRun: a safe template stored before
// registration refused it (issue 39: bash arithmetic ran a[$(touch X)]
// from an argument; make runs the caller's Makefile) is refused when it
// is called, and its payload does not run.
func TestStoredCodeTemplatesDoNotRun(t *testing.T) {
	tbl := sandboxTable(t)
	dir, err := tbl.WorkDir(1, "s")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir.Path, "Makefile"), "all:\n\ttouch pwned\n", 0o644)
	for _, tc := range []struct {
		argv []string
		args map[string]any
	}{
		{[]string{"bash", "-c", "[[ $1 -gt 5 ]] && echo big", "bash", "{{n}}"}, map[string]any{"n": "a[$(touch pwned)]"}},
		{[]string{"make"}, nil},
	} {
		def := commandTool(tc.argv, tc.args) // as stored: not validated
		res, err := tbl.Run(context.Background(), &Call{ID: "c", Def: def, Args: tc.args, Session: "s", Dir: dir,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var re *Error
		if !errors.As(err, &re) || re.Code != models.CodeCommandRejected || !strings.Contains(re.Message, "runsArgumentAsCode") {
			t.Errorf("%q ran: %v %v", tc.argv, res, err)
		}
		if _, err := os.Stat(filepath.Join(dir.Path, "pwned")); err == nil {
			t.Fatalf("%q ran its payload", tc.argv)
		}
	}
}
