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
var fileTemplates onces[string]

// SQLiteFrom writes at path (mode 0600) a copy of the SQLite file
// template, which the first call of the process makes in a ProcessDir by
// having fill write it, given its path. fill must leave the whole database
// in that file (no -wal beside it): a closed database after a TRUNCATE
// checkpoint. A failed fill fails every test asking for that template.
func SQLiteFrom(t testing.TB, path, template string, fill func(path string) error) {
	t.Helper()
	from, err := fileTemplates.do(template, func() (string, error) { return makeFileTemplate(template, fill) })
	if err != nil {
		t.Fatalf("template database %s: %v", template, err)
	}
	if err := copyFile(from, path); err != nil {
		t.Fatalf("copy template database %s: %v", template, err)
	}
}

// onces runs a function once per name and keeps what it returned.
type onces[T any] struct {
	mu    sync.Mutex
	byKey map[string]*once[T]
}

type once[T any] struct {
	once sync.Once
	v    T
	err  error
}

// do returns what fn returned the first time do was called with name.
func (o *onces[T]) do(name string, fn func() (T, error)) (T, error) {
	o.mu.Lock()
	if o.byKey == nil {
		o.byKey = map[string]*once[T]{}
	}
	e := o.byKey[name]
	if e == nil {
		e = &once[T]{}
		o.byKey[name] = e
	}
	o.mu.Unlock()
	e.once.Do(func() { e.v, e.err = fn() })
	return e.v, e.err
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
