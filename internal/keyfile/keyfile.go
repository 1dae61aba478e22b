// Package keyfile keeps a server secret that no setting gives in a file of
// the data directory: made once, at the first start, readable by the
// server only, and read at every start after, so what was derived from it
// stays valid.
package keyfile

import (
	"errors"
	"fmt"
	"os"
)

// Load returns the key in path, of at least minBytes, making it with make
// when the file does not exist (what names the key in errors). Two starts
// racing to make it agree on the first one written.
func Load(path, what string, minBytes int, make func() []byte) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) < minBytes {
			return nil, fmt.Errorf("%s %s is shorter than %d bytes", what, path, minBytes)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	key = make()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return Load(path, what, minBytes, make) // made meanwhile by another start
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", what, err)
	}
	if _, err := f.Write(key); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", what, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", what, err)
	}
	return key, f.Close()
}
