// Package nodetest runs, from Go tests, the validators and clients that
// other projects publish on npm: the MCP TypeScript SDK, Ajv, Redocly.
// They are test infrastructure, not the product: testdata/node holds
// their package.json, the lock file that pins them and the scripts that
// drive them; `make test` and .ci/run install them with `npm ci`.
//
// A test that needs them is skipped when node or the installed packages
// are missing, except on CI (CI=true), where it fails.
package nodetest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Dir is testdata/node at the root of the module, with its packages
// installed. It skips or fails t when they are not.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the npm test packages are needed on CI: %v", err)
		}
		t.Skipf("npm test packages unavailable (run `make test`, which installs them): %v", err)
	}
	return dir
}

// find walks up from the working directory to the module root.
func find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "testdata", "node")
			if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
				return "", errors.New("testdata/node/node_modules is not installed: npm ci --prefix testdata/node")
			}
			return dir, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}

// Run runs script (a file in testdata/node, run by node, or the name of
// an installed package's command) with args and stdin, and returns its
// standard output; a non-zero exit fails t with what it printed.
func Run(t testing.TB, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	out, err := Exec(t, stdin, script, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// Exec is Run that returns the exit error (with stderr appended to the
// output) instead of failing t, for tests that expect a refusal.
func Exec(t testing.TB, stdin []byte, script string, args ...string) ([]byte, error) {
	t.Helper()
	dir := Dir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"node", script}, args...)
	if filepath.Ext(script) == "" {
		argv = append([]string{filepath.Join(dir, "node_modules", ".bin", script)}, args...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	// The tests talk to loopback only: no usage reports, no update checks.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}
