package authserver

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Unset, the key is made at the first start (private to the server) and
// read at every start after; a short configured key is refused.
func TestLoadKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := LoadKey("", dir)
	if err != nil || len(first) < MinKeyBytes {
		t.Fatalf("first start: %d bytes, %v", len(first), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if again, err := LoadKey("", dir); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("second start read another key: %v", err)
	}
	if _, err := LoadKey("short", dir); err == nil || !strings.Contains(err.Error(), "TOOLBELT_OAUTH_KEY") {
		t.Fatalf("a short key: %v", err)
	}
	if derive(first, "tokens") == derive(first, "signing key") {
		t.Fatal("the derived keys are the same")
	}
}
