package invoke

import (
	"bufio"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCommand(t *testing.T) {
	cases := []struct {
		cmd  string
		ok   bool
		with string // part of the reason
	}{
		{"ls -la", true, ""},
		{`grep -rn "TODO: fix" src`, true, ""},
		{"echo 'a; b | c'", false, "operator"},
		{"ls; id", false, "operator"},
		{"ls\nid", false, "operator"},
		{"ls && id", false, "operator"},
		{"ls | wc -l", false, "operator"},
		{"sleep 9 &", false, "operator"},
		{"cat < /etc/passwd", false, "operator"},
		{"echo hi > out.txt", false, "operator"},
		{"echo $(id)", false, "operator"},
		{"echo `id`", false, "operator"},
		{"echo $HOME", false, "operator"},
		{"(id)", false, "operator"},
		{"for i in 1 2 3", false, "parse"},
		{"if true", false, "parse"},
		{"! id", false, "negated"},
		{"FOO=1 env", false, "variables"},
		{"echo 'unterminated", false, "parse"},
	}
	for _, tc := range cases {
		got := checkCommand(tc.cmd, false)
		if (got == "") != tc.ok || !strings.Contains(got, tc.with) {
			t.Errorf("checkCommand(%q) = %q", tc.cmd, got)
		}
	}
	if got := checkCommand("ls | wc -l", true); got != "" {
		t.Errorf("operators allowed but refused: %q", got)
	}
}

// TestCheckCommandCorpus feeds the command-injection corpus, raw and
// URL-decoded, after a harmless command: every entry that brings a shell
// metacharacter is refused.
func TestCheckCommandCorpus(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "corpora", "command-injection.txt"))
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, refused := 0, 0
	for sc.Scan() {
		line := sc.Text()
		variants := []string{line}
		if dec, err := url.QueryUnescape(line); err == nil && dec != line {
			variants = append(variants, dec)
		}
		for _, v := range variants {
			n++
			cmd := "echo " + v
			got := checkCommand(cmd, false)
			if got != "" {
				refused++
				continue
			}
			if strings.ContainsAny(v, ";&|`$<>\n(){}") {
				t.Errorf("%q was accepted", cmd)
			}
		}
	}
	if n < 83 || refused < n/2 {
		t.Errorf("%d of %d refused", refused, n)
	}
}

func FuzzCheckCommand(f *testing.F) {
	for _, s := range []string{"ls -la", "ls; id", "echo $(id)", "a | b", "'", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkCommand(s, false) == "" && strings.ContainsAny(s, ";|&`\n") && !strings.ContainsAny(s, `'"\#`) {
			t.Fatalf("accepted %q", s)
		}
	})
}
