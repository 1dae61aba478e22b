package dbtest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fileTemplates are the template files SQLiteFrom made, by name.
var fileTemplates struct {
	mu    sync.Mutex
	files map[string]*fileTemplate
}

type fileTemplate struct {
	once sync.Once
	path string
	err  error
}

// SQLiteFrom writes at path (mode 0600) a copy of the SQLite file
// template, which the first call of the process makes in a ProcessDir by
// having fill write it, given its path. fill must leave the whole database
// in that file (no -wal beside it): a closed database after a TRUNCATE
// checkpoint. A failed fill fails every test asking for that template.
func SQLiteFrom(t testing.TB, path, template string, fill func(path string) error) {
	t.Helper()
	fileTemplates.mu.Lock()
	if fileTemplates.files == nil {
		fileTemplates.files = map[string]*fileTemplate{}
	}
	tmpl := fileTemplates.files[template]
	if tmpl == nil {
		tmpl = &fileTemplate{}
		fileTemplates.files[template] = tmpl
	}
	fileTemplates.mu.Unlock()
	tmpl.once.Do(func() { tmpl.path, tmpl.err = makeFileTemplate(template, fill) })
	if tmpl.err != nil {
		t.Fatalf("template database %s: %v", template, tmpl.err)
	}
	if err := copyFile(tmpl.path, path); err != nil {
		t.Fatalf("copy template database %s: %v", template, err)
	}
}

func makeFileTemplate(template string, fill func(path string) error) (string, error) {
	dir, err := ProcessDir("templates", 0o700)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, template+".db")
	if err := fill(path); err != nil {
		return "", err
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return "", fmt.Errorf("%s-wal holds %d bytes: fill must checkpoint and close the database", path, fi.Size())
	}
	return path, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}
