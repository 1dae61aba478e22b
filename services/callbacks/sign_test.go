package callbacks

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// TestSignStandardWebhooks signs the example of the Standard Webhooks
// libraries' own tests: a receiver using any of them verifies what
// Toolbelt sends.
func TestSignStandardWebhooks(t *testing.T) {
	sig, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; sig != want {
		t.Errorf("signature %s, want %s", sig, want)
	}
	if _, err := Sign("whsec_not base64!", "id", 1, nil); err == nil {
		t.Error("a secret that is not base64 signed")
	}
}

// TestLoadKey: without TOOLBELT_CALLBACK_KEY the key is made once, in a
// file only the server reads, and the same key is read at the next start;
// a configured key is used as it is, and a short one refused.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	first, err := LoadKey("", dir)
	if err != nil || len(first) != 32 {
		t.Fatalf("made key: %d bytes, %v", len(first), err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, err := LoadKey("", dir)
	if err != nil || string(again) != string(first) {
		t.Fatalf("a second start read another key: %v", err)
	}
	const configured = "0123456789abcdef0123456789abcdef"
	if k, err := LoadKey(configured, dir); err != nil || string(k) != configured {
		t.Errorf("configured key: %q %v", k, err)
	}
	if _, err := LoadKey("short", dir); err == nil {
		t.Error("a short key was taken")
	}
}

// TestSecrets: each principal has its own secret, stable across starts
// (derived from the key), and rotating one changes it and only it.
func TestSecrets(t *testing.T) {
	store, _ := modelstest.Store(t)
	ctx := context.Background()
	var ids []uint
	for _, name := range []string{"a", "b"} {
		p := &models.Principal{Name: name, Role: "agent"}
		if err := store.CreatePrincipal(ctx, p, &models.APIKey{Prefix: name, Hash: name}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	s := NewSecrets(store, key)
	a, _ := s.Of(ctx, ids[0])
	b, _ := s.Of(ctx, ids[1])
	if a.Secret == b.Secret || len(a.Secret) != len(SecretPrefix)+44 {
		t.Fatalf("secrets %q and %q", a.Secret, b.Secret)
	}
	if again, _ := NewSecrets(store, key).Of(ctx, ids[0]); again != a {
		t.Errorf("the same key derived another secret: %v %v", again, a)
	}
	rotated, err := s.Rotate(ctx, ids[0])
	if err != nil || rotated.Generation != 1 || rotated.Secret == a.Secret {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	if now, _ := s.Of(ctx, ids[0]); now != rotated {
		t.Errorf("after rotation: %+v, want %+v", now, rotated)
	}
	if bNow, _ := s.Of(ctx, ids[1]); bNow != b {
		t.Errorf("rotating a changed b: %+v", bNow)
	}
	if _, err := s.Rotate(ctx, 999); err == nil {
		t.Error("rotated the secret of no principal")
	}
}
