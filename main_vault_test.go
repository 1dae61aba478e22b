package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rotatedVaultKey is the key TestVaultRotateCommand rotates to (openssl
// rand -hex 32).
const rotatedVaultKey = "3c5b8e0f27a94d61b0e7c2f59a18d346e0b7f2c95d8a1e4b76c03f9d2a5e81b7"

// TestVaultRotateCommand runs the binary as an operator would: a person
// stores a secret (which the server's log never shows), "toolbelt vault
// rotate" with TOOLBELT_VAULT_KEY="new,old" seals it anew, a start with
// the old key alone is refused saying why, and the new key alone serves
// it.
func TestVaultRotateCommand(t *testing.T) {
	t.Parallel()
	const value = "ghp_MainBinarySecretValue0123456789abcd"
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	s := start(t, bin, data, "TOOLBELT_ADMIN_KEY="+testAdminKey)
	req, _ := http.NewRequest(http.MethodPut, s.base+"/api/v1/me/secrets/GITHUB_TOKEN", strings.NewReader(`{"value":"`+value+`"}`))
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("store a secret: %d", resp.StatusCode)
	}
	s.stop(t)
	if strings.Contains(s.log.String(), value) || strings.Contains(s.output(), value) {
		t.Error("the server's log holds the secret")
	}

	run := func(args []string, env ...string) (string, error) {
		// A bound on a start that was not refused, not a timing assert.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run([]string{"vault", "rotate", "--data-dir", data}, "TOOLBELT_VAULT_KEY="+rotatedVaultKey+","+testVaultKey)
	if err != nil || !strings.Contains(out, "1 credentials, 0 upstream client secrets, 1 canary") {
		t.Fatalf("vault rotate: %v\n%s", err, out)
	}
	out, err = run([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--tools-dir", ""}, "TOOLBELT_VAULT_KEY="+testVaultKey, "TOOLBELT_OAUTH_KEY="+testOAuthKey)
	if err == nil || !strings.Contains(out, "none of the keys in TOOLBELT_VAULT_KEY is the one the database was sealed under") ||
		strings.Contains(out, testVaultKey) || strings.Contains(out, rotatedVaultKey) {
		t.Fatalf("a start with the old key: %v\n%s", err, out)
	}
	s = start(t, bin, data, "TOOLBELT_VAULT_KEY="+rotatedVaultKey)
	if code, body := s.get(t, "/api/v1/me/secrets", testAdminKey); code != http.StatusOK || !strings.Contains(fmt.Sprint(body), "GITHUB_TOKEN") {
		t.Errorf("the secret after rotation: %d %v", code, body)
	}
}
