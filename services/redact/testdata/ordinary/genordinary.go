//go:build ignore

// Command genordinary writes ordinary.jsonl: text with no secret in it, as
// tools return it (source code, JSON documents, prose and HTML), for
// measuring how often the redactor alters what it should leave alone. The
// windows are drawn from files on a Debian machine with Go installed, none
// of which holds a credential: the Go distribution's non-test sources and
// documentation, Python's standard library, package-lock.json files
// (their integrity hashes are base64), JSON from Go's and Python's trees,
// and the prose in /usr/share/doc. Windows that hold a PEM block are
// left out (test keys are secrets in form).
//
//	go run services/redact/testdata/ordinary/genordinary.go > services/redact/testdata/ordinary/ordinary.jsonl
package main

import (
	"encoding/json"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// kind is one family of ordinary text: where to walk, which files to
// take, how many windows to keep.
type kind struct {
	name  string
	roots []string
	take  func(path string) bool
	keep  int
}

func main() {
	goroot := runtime.GOROOT()
	pylib := firstDir("/usr/lib/python3.11", "/usr/lib/python3.12", "/usr/lib/python3.13")
	kinds := []kind{
		{"go-source", []string{filepath.Join(goroot, "src")}, func(p string) bool {
			return strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go")
		}, 200},
		{"python-source", []string{pylib}, func(p string) bool {
			return strings.HasSuffix(p, ".py") && !strings.Contains(p, "/test")
		}, 120},
		{"json", []string{filepath.Join(goroot, "src"), "/usr/lib/python3", "testdata/node"}, func(p string) bool {
			return strings.HasSuffix(p, ".json") && !strings.Contains(p, "crypto")
		}, 120},
		{"prose", []string{filepath.Join(goroot, "doc"), "/usr/share/doc"}, func(p string) bool {
			base := filepath.Base(p)
			return strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".html") || strings.HasSuffix(p, ".txt") ||
				strings.HasPrefix(base, "README") || base == "copyright"
		}, 160},
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, k := range kinds {
		for _, w := range windows(k) {
			enc.Encode(map[string]any{"source": k.name + "-" + runtime.Version(), "rule": "ordinary-" + k.name, "tp": false, "text": w})
		}
	}
}

// windows returns k.keep 20-line windows of k's files, a deterministic
// sample independent of the walk order.
func windows(k kind) []string {
	var out []string
	seen := map[string]bool{}
	for _, root := range k.roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == "vendor" || d.Name() == "node_modules" || d.Name() == "__pycache__") {
				return filepath.SkipDir
			}
			if d.IsDir() || !k.take(p) {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil || strings.ContainsRune(string(b), 0) {
				return nil
			}
			lines := strings.Split(string(b), "\n")
			for i := 0; i < len(lines); i += 20 {
				w := strings.Join(lines[i:min(i+20, len(lines))], "\n")
				if len(strings.TrimSpace(w)) < 80 || strings.Contains(w, "-----BEGIN") || seen[w] {
					continue
				}
				seen[w] = true
				out = append(out, w)
			}
			return nil
		})
	}
	hash := func(s string) uint32 { h := fnv.New32a(); h.Write([]byte(s)); return h.Sum32() }
	sort.Slice(out, func(a, b int) bool { return hash(out[a]) < hash(out[b]) })
	return out[:min(k.keep, len(out))]
}

func firstDir(dirs ...string) string {
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return dirs[0]
}
