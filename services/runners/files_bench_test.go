package runners

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFileWriteQuota: what the disk quota's check (a walk of the
// work directory) adds to a file_write, in a session holding 10, 1,000 and
// 10,000 files.
func BenchmarkFileWriteQuota(b *testing.B) {
	for _, files := range []int{10, 1000, 10000} {
		dir, err := (&Table{dataDir: b.TempDir()}).WorkDir(1, "bench")
		if err != nil {
			b.Fatal(err)
		}
		for i := range files {
			if err := os.WriteFile(filepath.Join(dir.Path, fmt.Sprintf("f%05d", i)), []byte("x"), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		for _, quota := range []int64{0, DefaultSessionQuota} {
			b.Run(fmt.Sprintf("files=%d/quota=%v", files, quota > 0), func(b *testing.B) {
				c := &Call{Dir: withDir(dir, quota, nil), Args: map[string]any{"path": "out.txt", "content": "hello"}}
				for b.Loop() {
					if _, err := fileWrite(c); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
