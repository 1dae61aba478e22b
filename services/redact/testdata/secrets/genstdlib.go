//go:build ignore

// Command genstdlib writes stdlib.jsonl: look-alikes from real text, not
// made up for the test: 30-line windows of the Go distribution's own
// non-test sources that talk about passwords, tokens, keys, secrets and
// Authorization headers (HTTP clients, SMTP, SQL drivers, crypto), none of
// which holds a credential.
//
//	go run services/redact/testdata/secrets/genstdlib.go > services/redact/testdata/secrets/stdlib.jsonl
package main

import (
	"encoding/json"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

var talk = regexp.MustCompile(`(?i)passw|token|secret|bearer|authorization|api[_-]?key|private|credential`)

func main() {
	root := filepath.Join(runtime.GOROOT(), "src")
	var windows []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+30 <= len(lines); i += 30 {
			w := strings.Join(lines[i:i+30], "\n")
			if talk.MatchString(w) && !strings.Contains(w, "-----BEGIN") {
				windows = append(windows, w)
			}
		}
		return nil
	})
	// A deterministic sample, independent of walk order.
	hash := func(s string) uint32 { h := fnv.New32a(); h.Write([]byte(s)); return h.Sum32() }
	sort.Slice(windows, func(a, b int) bool { return hash(windows[a]) < hash(windows[b]) })
	if len(windows) > 600 {
		windows = windows[:600]
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, w := range windows {
		enc.Encode(map[string]any{"source": "go-" + runtime.Version() + "-src", "rule": "non-secret-go-source", "tp": false, "text": w})
	}
}
