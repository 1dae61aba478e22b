package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// The file tools work inside the session work directory through os.Root,
// so neither "..", an absolute path nor a symlink can reach outside it,
// whatever the guards upstream let through.

// DefaultReadBytes is how much file_read returns unless asked for less.
const DefaultReadBytes = 1 << 20

// maxListEntries caps file_list's answer.
const maxListEntries = 1000

// pathError turns a file error into a result the LLM can act on.
func pathError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &toolError{code: CodeExecutionFailed, msg: fmt.Sprintf("%s does not exist", p), suggestion: "List the directory with file_list to see which files exist."}
	case strings.Contains(err.Error(), "escapes from parent"), strings.Contains(err.Error(), "path escapes"):
		return &toolError{code: CodePathNotAllowed, msg: fmt.Sprintf("%s leads outside the work directory", p), suggestion: "Use a path inside the session work directory."}
	case errors.Is(err, fs.ErrPermission):
		return &toolError{code: CodePathNotAllowed, msg: fmt.Sprintf("%s may not be accessed", p), suggestion: "Use another file."}
	}
	return &toolError{code: CodeExecutionFailed, msg: fmt.Sprintf("%s: %v", p, err), suggestion: "Check the path and try again."}
}

func intArg(args map[string]any, name string, def int) int {
	switch v := args[name].(type) {
	case float64:
		return int(v)
	case interface{ Int64() (int64, error) }:
		if n, err := v.Int64(); err == nil {
			return int(n)
		}
	}
	return def
}

func fileRead(c *call) (any, error) {
	p, _ := c.args["path"].(string)
	root, err := openRoot(c)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(p)
	if err != nil {
		return nil, pathError(p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, pathError(p, err)
	}
	if info.IsDir() {
		return nil, &toolError{code: CodeExecutionFailed, msg: p + " is a directory", suggestion: "Use file_list for directories."}
	}
	limit := intArg(c.args, "max_bytes", DefaultReadBytes)
	buf, err := io.ReadAll(io.LimitReader(f, int64(limit)))
	if err != nil {
		return nil, pathError(p, err)
	}
	if !utf8.Valid(buf) {
		// A cut in the middle of a character is not binary content.
		trimmed := buf
		for len(trimmed) > 0 && !utf8.Valid(trimmed) && len(buf)-len(trimmed) < 4 {
			trimmed = trimmed[:len(trimmed)-1]
		}
		if !utf8.Valid(trimmed) {
			return nil, &toolError{code: CodeExecutionFailed, msg: p + " is not UTF-8 text", suggestion: "file_read reads text files only."}
		}
		buf = trimmed
	}
	return map[string]any{"path": p, "content": string(buf), "size": info.Size(), "truncated": int64(len(buf)) < info.Size()}, nil
}

func fileWrite(c *call) (any, error) {
	p, _ := c.args["path"].(string)
	content, _ := c.args["content"].(string)
	appendMode, _ := c.args["append"].(bool)
	root, err := openRoot(c)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if dir := path.Dir(strings.ReplaceAll(p, `\`, "/")); dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return nil, pathError(p, err)
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendMode {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := root.OpenFile(p, flags, 0o640)
	if err != nil {
		return nil, pathError(p, err)
	}
	n, werr := f.WriteString(content)
	cerr := f.Close()
	if werr != nil {
		return nil, pathError(p, werr)
	}
	if cerr != nil {
		return nil, pathError(p, cerr)
	}
	if c.owner != nil {
		// Sandboxed commands run as another uid: what the session writes
		// is theirs to read and change too.
		clean := path.Clean(strings.ReplaceAll(p, `\`, "/"))
		for d := path.Dir(clean); d != "."; d = path.Dir(d) {
			_ = root.Lchown(d, c.owner[0], c.owner[1])
		}
		if err := root.Lchown(clean, c.owner[0], c.owner[1]); err != nil {
			return nil, pathError(p, err)
		}
	}
	return map[string]any{"path": p, "bytes_written": n, "appended": appendMode}, nil
}

func fileList(ctx context.Context, c *call) (any, error) {
	dir, _ := c.args["path"].(string)
	if dir == "" {
		dir = "."
	}
	recursive, _ := c.args["recursive"].(bool)
	pattern, _ := c.args["pattern"].(string)
	if pattern != "" {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, &toolError{code: CodeValidation, msg: fmt.Sprintf("pattern %q is not a valid glob", pattern), suggestion: "Use a glob such as *.go."}
		}
	}
	root, err := openRoot(c)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fsys := root.FS()
	type entry struct {
		Path     string    `json:"path"`
		Type     string    `json:"type"`
		Size     int64     `json:"size"`
		Modified time.Time `json:"modified"`
	}
	entries := []entry{}
	truncated := false
	walkRoot := path.Clean(strings.ReplaceAll(dir, `\`, "/"))
	err = fs.WalkDir(fsys, walkRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == walkRoot {
			return nil
		}
		if ok, _ := path.Match(pattern, d.Name()); pattern == "" || ok {
			if len(entries) >= maxListEntries {
				truncated = true
				return fs.SkipAll
			}
			info, ierr := d.Info()
			if ierr == nil {
				kind := "file"
				if d.IsDir() {
					kind = "dir"
				} else if d.Type()&fs.ModeSymlink != 0 {
					kind = "symlink"
				}
				entries = append(entries, entry{Path: p, Type: kind, Size: info.Size(), Modified: info.ModTime().UTC()})
			}
		}
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, pathError(dir, err)
	}
	return map[string]any{"path": dir, "entries": entries, "truncated": truncated}, nil
}
