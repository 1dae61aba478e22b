package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Keys the tests configure: made by openssl rand -hex 32, as the messages
// tell an operator to.
const (
	testAdminKey    = "7b6d3782afcdd9b285fcffe8f591fd400d19a6a56f9f36389f9e7d5076acc07e"
	testOAuthKey    = "5d1e9a3c7b2f6e0a4d8c1b5f9e3a7d2c6b0f4e8a1d5c9b3f7e2a6d0c4b8f1e5a"
	testCallbackKey = "ea2ea0bb9a2999eac99ccfb4964375646cd59c78914655f259021f26583852db"
	testVaultKey    = "f426f3349663f43c63bf9f15e11807df57b19ade2259d2f57e86e42e048dcea3"
)

// A server refuses to start with an admin or callback key that an
// attacker could guess: the placeholders the deployment examples ship,
// the obvious words, repeats and sequences, and a phrase of common words.
// The message names the setting, says what is wrong and how to make a
// good key, and never repeats the key.
func TestWeakKeysRefused(t *testing.T) {
	cases := []struct {
		name, key, want string
	}{
		{"the Kubernetes example's admin key", "CHANGE-ME-TO-A-LONG-RANDOM-ADMIN-KEY", `is a placeholder (it contains "changeme")`},
		{"the Kubernetes example's callback key", "CHANGE-ME-TO-AT-LEAST-32-BYTES-OF-RANDOM", `is a placeholder (it contains "changeme")`},
		{"the compose example's callback key", "change-me-to-at-least-32-bytes-of-random", `is a placeholder (it contains "changeme")`},
		{"change_me with random after it", "change_me_" + testAdminKey, `is a placeholder (it contains "changeme")`},
		{"replace me", "Replace.Me.With.A.Real.Key.Please.0000", `is a placeholder (it contains "replaceme")`},
		{"an example key", "example-api-key-9f8e7d6c5b4a39281706f5e4", `is a placeholder (it contains "example")`},
		{"your key here", "<your-key-here>-<your-key-here>-<your-key-here>", `is a placeholder (it contains "yourkey")`},
		{"password", "password", "is too easy to guess"},
		{"long password", "passwordpasswordpasswordpasswordpassword", "is too easy to guess"},
		{"secret", "supersecretadminkeysupersecret1", "is too easy to guess"},
		{"leetspeak repeated", "P@ssw0rd!P@ssw0rd!P@ssw0rd!P@ssw0rd!", "is too easy to guess"},
		{"one character", strings.Repeat("k", 64), "is too easy to guess"},
		{"two characters", "tb_" + strings.Repeat("c1", 32), "is too easy to guess"},
		{"hex digits twice", "0123456789abcdef0123456789abcdef", "is too easy to guess"},
		{"alphabet", "abcdefghijklmnopqrstuvwxyz0123456789", "is too easy to guess"},
		{"backwards", "zyxwvutsrqponmlkjihgfedcba9876543210", "is too easy to guess"},
		{"keyboard rows", "qwertyuiopasdfghjklzxcvbnm1234567890", "is too easy to guess"},
		{"a phrase", "tb_one-admin-key-for-the-whole-cluster", "is too easy to guess"},
		{"a capitalised phrase", "ThisIsMyVeryLongAdminKeyForToolbelt", "is too easy to guess"},
		{"words and a year", "my-super-secret-admin-key-2024!", "is too easy to guess"},
		{"a passphrase", "correcthorsebatterystaplecorrecthorse", "is too easy to guess"},
		{"short random", "Xq3vT9pLm2Rz", "is too easy to guess"},
	}
	for _, tc := range cases {
		for _, setting := range []string{"TOOLBELT_ADMIN_KEY", "TOOLBELT_CALLBACK_KEY"} {
			t.Run(tc.name+"/"+setting, func(t *testing.T) {
				env := map[string]string{setting: tc.key}
				_, err := ParseConfig(nil, lookupIn(env))
				if err == nil {
					t.Fatalf("%q accepted", tc.key)
				}
				msg := err.Error()
				if setting == "TOOLBELT_CALLBACK_KEY" && len(tc.key) < 32 {
					// Refused for its length first, as before.
					if !strings.HasPrefix(msg, "TOOLBELT_CALLBACK_KEY must be at least 32 bytes") {
						t.Errorf("message %q", msg)
					}
					return
				}
				if !strings.HasPrefix(msg, setting+" "+tc.want) {
					t.Errorf("message %q, want it to start %q", msg, setting+" "+tc.want)
				}
				if !strings.HasSuffix(msg, "openssl rand -hex 32") {
					t.Errorf("message %q does not say how to make a good key", msg)
				}
				if strings.Contains(msg, tc.key) {
					t.Errorf("message %q repeats the key", msg)
				}
			})
		}
	}
}

// Random keys of the lengths an operator is told to use (32 bytes) are
// accepted, however they are written, and so are keys with words beside
// enough random characters. (Shorter random keys are refused now and then:
// docs/security.md has the figures.)
func TestRandomKeysAccepted(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	makers := map[string]func() string{
		"openssl rand -hex 32":    func() string { return hex.EncodeToString(random(32)) },
		"openssl rand -base64 32": func() string { return base64.StdEncoding.EncodeToString(random(32)) },
		"url-safe base64 of 32":   func() string { return base64.RawURLEncoding.EncodeToString(random(32)) },
		"a key Toolbelt makes":    func() string { return "tb_" + hex.EncodeToString(random(32)) },
		"a word and random":       func() string { return "toolbelt-admin-password-" + hex.EncodeToString(random(32)) },
	}
	for name, make := range makers {
		for range 500 {
			key := make()
			for _, setting := range []string{"TOOLBELT_ADMIN_KEY", "TOOLBELT_CALLBACK_KEY"} {
				if err := checkKey(setting, key); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	}
}

// New refuses a weak key in a Config built in code too, before it makes
// the data directory or opens a database.
func TestNewRefusesWeakKey(t *testing.T) {
	for _, cfg := range []Config{
		{AdminKey: "CHANGE-ME-TO-A-LONG-RANDOM-ADMIN-KEY"},
		{AdminKey: testAdminKey, CallbackKey: strings.Repeat("k", 32)},
	} {
		cfg.DataDir = filepath.Join(t.TempDir(), "data")
		_, err := New(context.Background(), cfg, Options{LogOutput: &strings.Builder{}})
		if err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("New with %+v: %v", cfg, err)
		}
		if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
			t.Errorf("the data directory was made before the key was refused: %v", err)
		}
	}
}
