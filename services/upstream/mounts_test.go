package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
)

// TestMountsTheSandboxCannotRead registers stdio servers whose mounts
// the sandbox's user cannot read (a directory under a parent it cannot
// enter, as a clone in root's home or under mktemp -d is; a link into
// one; a file; nothing) and ones that are not a plain absolute path: each
// is refused at registration, update and try, at its mounts entry, in
// words that say which directory, which user and what to do — not a
// failed initialize with bubblewrap's "Permission denied". A directory
// it can read passes.
func TestMountsTheSandboxCannotRead(t *testing.T) {
	box, root := bubblewrap(t)
	// private is a parent the sandbox's user cannot enter: 700 when it
	// runs as another user than the server, none at all when as the
	// server's own.
	private := filepath.Join(root, "home")
	mode := os.FileMode(0o700)
	if _, _, ok := box.Owner(); !ok {
		mode = 0
	}
	hidden := filepath.Join(private, "clone", "testdata", "node")
	open := filepath.Join(root, "shared", "node")
	for _, d := range []string{hidden, open} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(private, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(private, 0o700) }) // for t.TempDir's removal
	link := filepath.Join(root, "shared", "link")
	if err := os.Symlink(hidden, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "shared", "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	store, _ := modelstest.Store(t)
	s := &Sandboxed{Box: box, DataDir: filepath.Join(root, "data"), Log: quiet}
	m := New(Deps{Store: store, Registry: catalog.NewRegistry(store, quiet), Net: loopback, Stdio: s, Log: quiet})
	t.Cleanup(m.Close)
	ctx := context.Background()
	who := "uid " + fmt.Sprint(os.Geteuid())
	if uid, _, ok := box.Owner(); ok {
		who = fmt.Sprintf("(uid %d)", uid)
	}
	spec := func(dir string) Spec {
		return Spec{Name: "srv", Transport: models.TransportStdio, Category: "api", Command: []string{"node", "/opt/node/index.js"},
			Mounts: map[string]string{"node": dir}}
	}
	for _, tc := range []struct {
		name, dir string
		want      []string
	}{
		{"under a private parent", hidden, []string{hidden + " is not readable by the sandbox user", who, private + " is mode " + fmt.Sprintf("%o", mode),
			"move it under a directory that user can enter", "chmod o+x " + private}},
		{"a link into a private parent", link, []string{link + " (a link to " + hidden + ") is not readable by the sandbox user", private + " is mode"}},
		{"relative", "testdata/node", []string{`"testdata/node" must be an absolute, clean path`}},
		{"climbing out", open + "/../../home/clone/testdata/node", []string{"must be an absolute, clean path"}},
		{"missing", filepath.Join(root, "gone"), []string{filepath.Join(root, "gone") + " does not exist on the server"}},
		{"a file", file, []string{file + " is not a directory"}},
		{"the data directory", filepath.Join(root, "data"), []string{"inside the server's data directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, addErr := m.Add(ctx, spec(tc.dir), nil)
			_, tryErr := m.Try(ctx, spec(tc.dir))
			for _, err := range []error{addErr, tryErr} {
				var v *models.ValidationError
				if !errors.As(err, &v) || len(v.Problems) != 1 || v.Problems[0].Pointer != "/mounts/node" {
					t.Fatalf("want one problem at /mounts/node, got %v", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(v.Problems[0].Message, w) {
						t.Errorf("%q does not say %q", v.Problems[0].Message, w)
					}
				}
			}
		})
	}
	// A directory the sandbox's user reads passes validation (the rest
	// of Add starts the server, which this test does not have).
	ok := spec(open)
	if err := m.validate(&ok); err != nil {
		t.Errorf("%s: %v", open, err)
	}
	// Update validates as Add does: a registered server cannot be moved
	// to a mount it could not read.
	u := ok.upstream()
	if err := store.CreateUpstream(ctx, u); err != nil {
		t.Fatal(err)
	}
	var v *models.ValidationError
	if _, _, err := m.Update(ctx, spec(hidden), nil); !errors.As(err, &v) || v.Problems[0].Pointer != "/mounts/node" {
		t.Errorf("update: %v", err)
	}
}
