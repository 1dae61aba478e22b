package tooldef

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"toolbelt/models"
)

// TestFillArgvRefusesOptions: a value that the program reading it would
// take as an option is refused, naming the argument, however it is
// spelled or wherever the template hides the program; it passes after the
// program's own "--", when the schema lists it, or when optionArguments
// names its parameter.
func TestFillArgvRefusesOptions(t *testing.T) {
	for _, tc := range []struct {
		argv    []string
		args    map[string]any
		enum    []string // the values o's schema lists
		options []string // runner.optionArguments
		want    []string // nil: refused
	}{
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": "-f/etc/passwd"}, nil, nil, nil},
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": "--"}, nil, nil, nil},
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": "-"}, nil, nil, nil},
		{[]string{"seq", "{{o}}"}, map[string]any{"o": json.Number("-5")}, nil, nil, nil},
		{[]string{"seq", "{{o}}"}, map[string]any{"o": -5.0}, nil, nil, nil},
		{[]string{"vim", "-es", "{{o}}"}, map[string]any{"o": "+!id"}, nil, nil, nil},
		{[]string{"less", "{{o}}"}, map[string]any{"o": "+!id"}, nil, nil, nil},
		{[]string{"bash", "{{o}}"}, map[string]any{"o": "+o"}, nil, nil, nil},
		// Behind a wrapper, the "--" is the wrapper's: the command after
		// it reads options again.
		{[]string{"timeout", "--", "5", "make", "{{o}}"}, map[string]any{"o": "--eval=x"}, nil, nil, nil},
		{[]string{"env", "--", "make", "{{o}}"}, map[string]any{"o": "--eval=x"}, nil, nil, nil},
		{[]string{"eatmydata", "--", "make", "{{o}}"}, map[string]any{"o": "--eval=x"}, nil, nil, nil},
		{[]string{"faketime", "--", "2020-01-01", "git", "{{o}}"}, map[string]any{"o": "-c"}, nil, nil, nil},
		{[]string{"find", ".", "-exec", "grep", "{{o}}", "{}", ";"}, map[string]any{"o": "-f/etc/passwd"}, nil, nil, nil},
		{[]string{"find", "--", ".", "-exec", "grep", "{{o}}", "{}", ";"}, map[string]any{"o": "-f/etc/passwd"}, nil, nil, nil},
		// A fixed script may pass its argument on as an option.
		{[]string{"sh", "-c", "make \"$1\"", "sh", "{{o}}"}, map[string]any{"o": "--eval=x"}, nil, nil, nil},
		{[]string{"python3", "tool.py", "{{o}}"}, map[string]any{"o": "--config=/etc/x"}, nil, nil, nil},
		// make evaluates an operand with "=", even after "--".
		{[]string{"make", "{{o}}"}, map[string]any{"o": "X:=$(file >pwned)"}, nil, nil, nil},
		{[]string{"make", "--", "{{o}}"}, map[string]any{"o": "X:=$(file >pwned)"}, nil, nil, nil},
		// Listed, but not this value; named, but another parameter.
		{[]string{"sort", "{{o}}", "f"}, map[string]any{"o": "--compress-program=sh"}, []string{"-r", "-n"}, nil, nil},
		{[]string{"sort", "{{o}}", "{{p}}"}, map[string]any{"o": "-r", "p": "-o/etc/x"}, nil, []string{"o"}, nil},

		// What passes.
		{[]string{"grep", "--", "{{o}}", "notes.txt"}, map[string]any{"o": "-f/etc/passwd"}, nil, nil, []string{"grep", "--", "-f/etc/passwd", "notes.txt"}},
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": " -x"}, nil, nil, []string{"grep", " -x", "notes.txt"}},
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": "‐x"}, nil, nil, []string{"grep", "‐x", "notes.txt"}},
		{[]string{"grep", "{{o}}", "notes.txt"}, map[string]any{"o": "+x"}, nil, nil, []string{"grep", "+x", "notes.txt"}},
		{[]string{"vim", "-es", "--", "{{o}}"}, map[string]any{"o": "+!id"}, nil, nil, []string{"vim", "-es", "--", "+!id"}},
		{[]string{"timeout", "5", "make", "--", "{{o}}"}, map[string]any{"o": "-B"}, nil, nil, []string{"timeout", "5", "make", "--", "-B"}},
		{[]string{"sort", "{{o}}", "f"}, map[string]any{"o": "-r"}, []string{"-r", "-n"}, nil, []string{"sort", "-r", "f"}},
		{[]string{"sort", "{{o}}", "f"}, map[string]any{"o": "-r"}, nil, []string{"o"}, []string{"sort", "-r", "f"}},
		{[]string{"sh", "-c", "grep -- \"$1\" f", "--", "{{o}}"}, map[string]any{"o": "-v"}, nil, nil, []string{"sh", "-c", "grep -- \"$1\" f", "--", "-v"}},
		{[]string{"sh", "-c", "grep -- \"$1\" f", "sh", "{{o}}"}, map[string]any{"o": "-v"}, nil, []string{"o"}, []string{"sh", "-c", "grep -- \"$1\" f", "sh", "-v"}},
		{[]string{"env", "LANG=C", "grep", "--", "{{o}}", "f"}, map[string]any{"o": "-v"}, nil, nil, []string{"env", "LANG=C", "grep", "--", "-v", "f"}},
		{[]string{"seq", "{{o}}"}, map[string]any{"o": json.Number("5")}, nil, nil, []string{"seq", "5"}},
		{[]string{"echo", "{{o}}", "{{p}}"}, map[string]any{"o": "a=b"}, nil, nil, []string{"echo", "a=b"}},
	} {
		def := argvTool(tc.argv, tc.args)
		if tc.enum != nil {
			list, _ := json.Marshal(tc.enum)
			def.Parameters = []byte(strings.Replace(string(def.Parameters), `"o":{}`, `"o":{"enum":`+string(list)+`}`, 1))
		}
		def.Runner.OptionArguments = tc.options
		got, err := FillArgv(def, tc.args)
		var ae *ArgvError
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%q %v: ran as %q", tc.argv, tc.args, got)
		case tc.want == nil && (!errors.As(err, &ae) || !strings.Contains(ae.Message, "argument \""+ae.Param+"\"") || ae.Suggestion == ""):
			t.Errorf("%q %v: %v, want an ArgvError naming the argument", tc.argv, tc.args, err)
		case tc.want != nil && !slices.Equal(got, tc.want):
			t.Errorf("%q %v: %q %v, want %q", tc.argv, tc.args, got, err, tc.want)
		}
	}
}

// TestFillArgvOptionalAfterOption: an optional argument left out after
// an option is refused at the call, for templates stored before
// registration refused them; left out elsewhere it is simply dropped.
func TestFillArgvOptionalAfterOption(t *testing.T) {
	def := argvTool([]string{"head", "-n", "{{lines}}", "{{path}}"}, nil)
	if _, err := FillArgv(def, map[string]any{"path": "notes.txt"}); err == nil || !strings.Contains(err.Error(), `"-n" before it`) {
		t.Errorf("head -n without lines: %v", err)
	}
	if got, err := FillArgv(def, map[string]any{"lines": "3", "path": "notes.txt"}); err != nil || !slices.Equal(got, []string{"head", "-n", "3", "notes.txt"}) {
		t.Errorf("with lines: %q %v", got, err)
	}
	def = argvTool([]string{"ls", "-l", "--", "{{dir}}"}, nil)
	if got, err := FillArgv(def, map[string]any{}); err != nil || !slices.Equal(got, []string{"ls", "-l", "--"}) {
		t.Errorf("ls -l -- without dir: %q %v", got, err)
	}
	def = argvTool([]string{"grep", "--color=never", "{{p}}", "f"}, nil)
	if got, err := FillArgv(def, map[string]any{}); err != nil || !slices.Equal(got, []string{"grep", "--color=never", "f"}) {
		t.Errorf("after --name=value: %q %v", got, err)
	}
}

// TestRegisterOptionArguments: the explicit forms stay coherent with the
// check of code positions, and an optional placeholder after an option is
// refused at registration.
func TestRegisterOptionArguments(t *testing.T) {
	for _, tc := range []struct {
		argv     []string
		enum     []string
		options  []string
		required bool   // every placeholder required
		asCode   bool   // runner.runsArgumentAsCode
		problem  string // "" accepted; else the pointer of a problem
	}{
		// Any option of a program known to run code from one is code.
		{[]string{"make", "{{o}}"}, nil, []string{"o"}, true, false, "/runner/optionArguments/0"},
		{[]string{"tar", "{{o}}", "-cf", "a.tar", "."}, nil, []string{"o"}, true, false, "/runner/optionArguments/0"},
		{[]string{"env", "LANG=C", "git", "{{o}}", "log"}, nil, []string{"o"}, true, false, "/runner/optionArguments/0"},
		{[]string{"make", "{{o}}"}, nil, []string{"o"}, true, true, ""},
		{[]string{"mytool", "{{o}}"}, nil, []string{"o"}, true, false, ""},
		{[]string{"sh", "-c", "mytool \"$1\"", "sh", "{{o}}"}, nil, []string{"o"}, true, false, "/runner/argv/4"},
		{[]string{"sh", "-c", "mytool \"$1\"", "sh", "{{o}}"}, nil, []string{"o"}, true, true, ""},
		{[]string{"mytool", "{{o}}"}, nil, []string{"p"}, true, false, "/runner/optionArguments/0"},
		// A listed option that makes the next placeholder a script.
		{[]string{"vim", "-es", "{{o}}", "{{p}}"}, []string{"-n", "-c"}, nil, true, false, "/runner/argv/3"},
		{[]string{"git", "{{o}}", "{{p}}", "log"}, []string{"-c"}, nil, true, false, "/runner/argv/0"},
		{[]string{"tar", "{{o}}", "{{p}}", "-xf", "a.tar"}, []string{"--to-command"}, nil, true, false, "/runner/argv/2"},
		{[]string{"bash", "{{o}}", "{{p}}"}, []string{"-c"}, nil, true, false, "/runner/argv/2"},
		{[]string{"vim", "-es", "{{o}}", "{{p}}"}, []string{"-n", "-R"}, nil, true, false, ""},
		{[]string{"sort", "{{o}}", "{{p}}"}, []string{"-r", "-n"}, nil, true, false, ""},
		// An optional placeholder right after an option.
		{[]string{"head", "-n", "{{o}}", "{{p}}"}, nil, nil, false, false, "/runner/argv/2"},
		{[]string{"deploy", "--dry-run", "{{o}}"}, nil, nil, false, false, "/runner/argv/2"},
		{[]string{"mytool", "{{o}}", "{{p}}"}, nil, []string{"o"}, false, false, "/runner/argv/2"},
		{[]string{"mytool", "{{o}}", "{{p}}"}, []string{"-v", "-q"}, nil, false, false, "/runner/argv/2"},
		{[]string{"deploy", "--dry-run", "--", "{{o}}"}, nil, nil, false, false, ""},
		{[]string{"grep", "--color=never", "{{o}}", "f"}, nil, nil, false, false, ""},
		{[]string{"head", "-n", "{{o}}", "{{p}}"}, nil, nil, true, false, ""},
		// New programs whose argument is code.
		{[]string{"sort", "--compress-program", "{{o}}", "f"}, nil, nil, true, false, "/runner/argv/2"},
		{[]string{"jq", "-n", "{{o}}"}, nil, nil, true, false, "/runner/argv/2"},
		{[]string{"jq", "-r", "{{o}}", "data.json"}, nil, nil, true, false, "/runner/argv/2"},
		{[]string{"jq", "--arg", "v", "{{o}}", ".[$v]", "data.json"}, nil, nil, true, false, ""},
		{[]string{"vim", "-u", "{{o}}"}, nil, nil, true, false, "/runner/argv/2"},
	} {
		args := map[string]any{}
		if tc.required {
			for _, a := range tc.argv {
				if m := Placeholder.FindStringSubmatch(a); m != nil {
					args[m[1]] = ""
				}
			}
		}
		def := argvTool(tc.argv, args)
		if tc.enum != nil {
			list, _ := json.Marshal(tc.enum)
			def.Parameters = []byte(strings.Replace(string(def.Parameters), `"o":{}`, `"o":{"enum":`+string(list)+`}`, 1))
		}
		def.Runner.OptionArguments = tc.options
		def.Runner.RunsArgumentAsCode = tc.asCode
		_, ps := Validate(&def, func(string) bool { return true })
		var runner []string
		for _, p := range ps {
			if strings.HasPrefix(p.Pointer, "/runner") {
				runner = append(runner, p.Pointer+": "+p.Message)
			}
		}
		found := slices.ContainsFunc(runner, func(p string) bool { return strings.HasPrefix(p, tc.problem+": ") })
		if tc.problem == "" && len(runner) > 0 || tc.problem != "" && !found {
			t.Errorf("%q enum %q options %q: %q, want %q", tc.argv, tc.enum, tc.options, runner, tc.problem)
		}
	}
	http := argvTool([]string{"x"}, nil)
	http.Runner = Runner{Kind: RunnerHTTP, URL: "https://example.com/", OptionArguments: []string{"o"}}
	http.Security.Sandbox = false
	if _, ps := Validate(&http, func(string) bool { return true }); !slices.ContainsFunc(ps, func(p models.Problem) bool { return p.Pointer == "/runner/optionArguments" }) {
		t.Errorf("optionArguments on an http runner: %v", ps)
	}
}

// argvTool is a command tool over argv whose placeholders take anything;
// those args has are required.
func argvTool(argv []string, args map[string]any) Definition {
	props, required := []string{}, []string{}
	seen := map[string]bool{}
	for _, a := range argv {
		if m := Placeholder.FindStringSubmatch(a); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			props = append(props, `"`+m[1]+`":{}`)
			if _, ok := args[m[1]]; ok {
				required = append(required, `"`+m[1]+`"`)
			}
		}
	}
	def := Definition{Name: "t", Version: "1.0.0", Description: "A command tool under test.", Category: "shell",
		Parameters: []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(required, ",") + `]}`),
		Security:   Security{Level: LevelSafe, Sandbox: true},
		Runner:     Runner{Kind: RunnerCommand, Argv: argv}}
	Normalize(&def)
	return def
}

// FuzzArgvFill: whatever the template (elements one per line) and the
// values of a, b and c, a template registration accepts is filled with
// each present value as exactly one argument; a value starting with "-"
// only follows a "--" or belongs to a parameter optionArguments names;
// and no option loses its value to a placeholder left out. mask: bits
// 0-2 give a, b, c; bits 3-5 make the given ones required; bit 6 names a
// in optionArguments; bit 7 sets runsArgumentAsCode.
func FuzzArgvFill(f *testing.F) {
	for _, seed := range []struct {
		argv    string
		a, b, c string
	}{
		{"make\n{{a}}", "--eval=$(shell id)", "", ""},
		{"tar\n{{a}}\n-cf\nout.tar\n{{b}}", "--use-compress-program=sh", ".", ""},
		{"vim\n-es\n{{a}}\n{{b}}", "-c", "!id", ""},
		{"find\n.\n{{a}}\n{{b}}\n{{c}}", "-exec", "id", ";"},
		{"git\n{{a}}\n{{b}}\n{{c}}", "-c", "alias.x=!id", "x"},
		{"sort\n--compress-program\n{{a}}", "sh", "", ""},
		{"jq\n-n\n{{a}}", "$ENV", "", ""},
		{"head\n-n\n{{a}}\n{{b}}", "", "notes.txt", ""},
		{"timeout\n--\n5\nmake\n{{a}}", "--eval=x", "", ""},
		{"grep\n--\n{{a}}\n{{b}}", "-v", "-f", ""},
	} {
		for _, mask := range []uint8{0x3f, 0x07, 0x06, 0x7f, 0xff} {
			f.Add(seed.argv, seed.a, seed.b, seed.c, mask)
		}
	}
	f.Fuzz(func(t *testing.T, tmpl, a, b, c string, mask uint8) {
		argv := strings.Split(tmpl, "\n")
		if len(argv) > MaxArgv {
			return
		}
		values := map[string]string{"a": a, "b": b, "c": c}
		args := map[string]any{}
		required := []string{}
		for i, name := range []string{"a", "b", "c"} {
			if mask&(1<<i) != 0 {
				args[name] = values[name]
				if mask&(8<<i) != 0 {
					required = append(required, `"`+name+`"`)
				}
			}
		}
		def := Definition{Name: "t", Version: "1.0.0", Description: "A fuzzed command tool.", Category: "shell",
			Parameters: []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"required":[` + strings.Join(required, ",") + `]}`),
			Security:   Security{Level: LevelSafe, Sandbox: true},
			Runner:     Runner{Kind: RunnerCommand, Argv: argv, RunsArgumentAsCode: mask&0x80 != 0}}
		if mask&0x40 != 0 {
			def.Runner.OptionArguments = []string{"a"}
		}
		Normalize(&def)
		if _, ps := Validate(&def, func(string) bool { return true }); len(ps) > 0 {
			return
		}
		got, err := FillArgv(def, args)
		if err != nil {
			return // refusing is always safe
		}
		var want []string
		endedAt := slices.Index(argv, "--") // the first "--"; -1: none
		for i, el := range argv {
			m := Placeholder.FindStringSubmatch(el)
			if m == nil {
				want = append(want, el)
				continue
			}
			v, present := args[m[1]]
			if !present {
				prev := argv[i-1]
				if pm := Placeholder.FindStringSubmatch(prev); pm != nil {
					prev, _ = args[pm[1]].(string)
				}
				if strings.HasPrefix(prev, "-") && prev != "-" && prev != "--" && !(strings.HasPrefix(prev, "--") && strings.Contains(prev, "=")) &&
					(endedAt < 0 || endedAt >= i-1) {
					t.Fatalf("%q %v: %q left out after the option %q, filled as %q", argv, args, el, prev, got)
				}
				continue
			}
			s := v.(string)
			if strings.HasPrefix(s, "-") && (endedAt < 0 || endedAt > i) && !slices.Contains(def.Runner.OptionArguments, m[1]) {
				t.Fatalf("%q %v: %q filled with the option %q: %q", argv, args, el, s, got)
			}
			want = append(want, s)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q %v: filled as %q, want %q", argv, args, got, want)
		}
	})
}
