package runners

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"toolbelt/models"
	"toolbelt/services/sandbox"
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
		return &Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("%s does not exist", p), Suggestion: "List the directory with file_list to see which files exist."}
	case strings.Contains(err.Error(), "escapes from parent"), strings.Contains(err.Error(), "path escapes"):
		return &Error{Code: models.CodePathNotAllowed, Message: fmt.Sprintf("%s leads outside the work directory", p), Suggestion: "Use a path inside the session work directory."}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Code: models.CodePathNotAllowed, Message: fmt.Sprintf("%s may not be accessed", p), Suggestion: "Use another file."}
	case models.FullDisk(err) != "":
		return &Error{Code: models.CodeStorageFull, Message: fmt.Sprintf("%s: %s is full", p, models.FullDisk(err)), Retryable: true,
			Suggestion: "Try again later: the server's administrator must free space first."}
	}
	return &Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("%s: %v", p, err), Suggestion: "Check the path and try again."}
}

// dirUsage is what a session's work directory holds, as file_write
// knows it: measured once (a walk, which costs about 2 µs a file), then
// kept up to date by each write, and measured again after anything else
// may have changed the directory (a sandboxed command, a screenshot).
// Its lock also serialises the session's writes, so two cannot both pass
// the quota with the room of one.
type dirUsage struct {
	mu    sync.Mutex
	bytes int64
	known bool
}

// stale makes the next write measure the directory again.
func (u *dirUsage) stale() {
	if u == nil {
		return
	}
	u.mu.Lock()
	u.known = false
	u.mu.Unlock()
}

// blocks is the space a file takes on disk (0 when it does not exist).
func blocks(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// withinQuota refuses a write of n bytes to p that would take the work
// directory past the session's disk quota (SANDBOX_LIMIT, as when a
// sandboxed program fills it). It is called with c.Dir.usage locked and
// returns the space p takes now, for account.
func withinQuota(c *Call, root *os.Root, p string, n int64, appending bool) (int64, error) {
	if c.Dir.Quota <= 0 || c.Dir.usage == nil {
		return 0, nil
	}
	u := c.Dir.usage
	if !u.known {
		used, err := sandbox.DirUsage(c.Dir.Path)
		if errors.Is(err, sandbox.ErrTooManyEntries) {
			return 0, &Error{Code: models.CodeSandboxLimit,
				Message:    fmt.Sprintf("the work directory %s, more than a session may, so the disk quota cannot be checked", strings.Replace(err.Error(), "more than", "holds more than", 1)),
				Suggestion: "Use another session_id; an administrator can remove this session's files."}
		} else if err != nil {
			return 0, err
		}
		u.bytes, u.known = used, true
	}
	var before int64
	add := n
	if info, err := root.Lstat(p); err == nil && info.Mode().IsRegular() {
		before = blocks(info)
		if !appending {
			add -= before // the file is replaced: its blocks are freed (a sparse file's size is not)
		}
	}
	if u.bytes+add <= c.Dir.Quota {
		return before, nil
	}
	return 0, &Error{Code: models.CodeSandboxLimit,
		Message: fmt.Sprintf("writing %d bytes to %s would pass the session's disk quota of %d MiB (the work directory holds %.1f MiB)",
			n, p, c.Dir.Quota>>20, float64(u.bytes)/(1<<20)),
		Suggestion: "Delete files you no longer need from the work directory, or write less."}
}

// account adds what a write changed to the known usage: the file's space
// now against before; made directories are measured again next time.
func account(c *Call, root *os.Root, p string, before int64, madeDirs bool) {
	u := c.Dir.usage
	if u == nil || !u.known {
		return
	}
	info, err := root.Lstat(p)
	if err != nil || madeDirs {
		u.known = false
		return
	}
	u.bytes += blocks(info) - before
}

// pathArg is the call's path argument with '\' read as the separator it
// is meant as (the guards read it so too), once for every use: creating
// directories, opening, chowning and the quota see the same path.
func pathArg(c *Call) string {
	p, _ := c.Args["path"].(string)
	return strings.ReplaceAll(p, `\`, "/")
}

// maxPathDepth bounds how deep file_write makes directories: below the
// sandbox's measuring walk's bound, so a session stays measurable.
const maxPathDepth = 64

// regularFile refuses what is not a regular file: FIFOs, sockets and
// devices would block a reader or writer, or reach the host's hardware.
func regularFile(p string, info fs.FileInfo) error {
	m := info.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeNamedPipe != 0:
		return specialFile(p, "a FIFO")
	case m&fs.ModeSocket != 0:
		return specialFile(p, "a socket")
	case m&fs.ModeDevice != 0:
		return specialFile(p, "a device")
	}
	return specialFile(p, "not a regular file")
}

// openError is pathError, naming the kind of a special file that could
// not be opened (ENXIO: a socket, or a FIFO with no reader).
func openError(root *os.Root, p string, err error) error {
	if errors.Is(err, syscall.ENXIO) {
		if info, lerr := root.Lstat(p); lerr == nil {
			return regularFile(p, info)
		}
		return specialFile(p, "a special file")
	}
	return pathError(p, err)
}

func specialFile(p, what string) error {
	return &Error{Code: models.CodePathNotAllowed, Message: fmt.Sprintf("%s is %s: the file tools read and write regular files only", p, what),
		Suggestion: "Use a regular file."}
}

// fileOp runs a file tool's work and returns when it ends or the call's
// context does, whichever comes first: the call ends within its timeout
// and its queue slot is released even if the file system stalls (the
// work then finishes, or fails, on its own).
func fileOp(ctx context.Context, op func() (any, error)) (any, error) {
	type result struct {
		data any
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := op()
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

func fileRead(c *Call) (any, error) {
	p := pathArg(c)
	root, err := openRoot(c)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Non-blocking: opening a FIFO must not wait for a writer. What is
	// open is then checked to be a regular file before it is read.
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, openError(root, p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, pathError(p, err)
	}
	if info.IsDir() {
		return nil, &Error{Code: models.CodeExecutionFailed, Message: p + " is a directory", Suggestion: "Use file_list for directories."}
	}
	if err := regularFile(p, info); err != nil {
		return nil, err
	}
	limit := intArg(c.Args, "max_bytes", DefaultReadBytes)
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
			return nil, &Error{Code: models.CodeExecutionFailed, Message: p + " is not UTF-8 text", Suggestion: "file_read reads text files only."}
		}
		buf = trimmed
	}
	return map[string]any{"path": p, "content": string(buf), "size": info.Size(), "truncated": int64(len(buf)) < info.Size()}, nil
}

func fileWrite(c *Call) (any, error) {
	p := pathArg(c)
	content, _ := c.Args["content"].(string)
	appendMode, _ := c.Args["append"].(bool)
	root, err := openRoot(c)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if c.Dir.usage != nil {
		c.Dir.usage.mu.Lock()
		defer c.Dir.usage.mu.Unlock()
	}
	if depth := strings.Count(path.Clean(p), "/"); depth >= maxPathDepth {
		return nil, &Error{Code: models.CodeValidation, Message: fmt.Sprintf("%s is %d directories deep; at most %d are allowed", p, depth, maxPathDepth-1),
			Suggestion: "Use a shallower path."}
	}
	before, err := withinQuota(c, root, p, int64(len(content)), appendMode)
	if err != nil {
		return nil, err
	}
	dir := path.Dir(p)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return nil, pathError(p, err)
		}
	}
	defer account(c, root, p, before, dir != ".")
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendMode {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	// O_NONBLOCK: a FIFO without a reader fails at once instead of
	// waiting; anything but a regular file is refused before a byte is
	// written (O_TRUNC is applied only to regular files, so it is safe).
	f, err := root.OpenFile(p, flags|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o640)
	if err != nil {
		return nil, openError(root, p, err)
	}
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, pathError(p, err)
		}
		if info.IsDir() {
			return nil, &Error{Code: models.CodeExecutionFailed, Message: p + " is a directory", Suggestion: "Write to a file path inside it."}
		}
		return nil, regularFile(p, info)
	}
	n, werr := f.WriteString(content)
	cerr := f.Close()
	if werr != nil {
		return nil, pathError(p, werr)
	}
	if cerr != nil {
		return nil, pathError(p, cerr)
	}
	if c.Dir.Owner != nil {
		// Sandboxed commands run as another uid: what the session writes
		// is theirs to read and change too.
		clean := path.Clean(p)
		for d := path.Dir(clean); d != "."; d = path.Dir(d) {
			_ = root.Lchown(d, c.Dir.Owner[0], c.Dir.Owner[1])
		}
		if err := root.Lchown(clean, c.Dir.Owner[0], c.Dir.Owner[1]); err != nil {
			return nil, pathError(p, err)
		}
	}
	return map[string]any{"path": p, "bytes_written": n, "appended": appendMode}, nil
}

func fileList(ctx context.Context, c *Call) (any, error) {
	dir := pathArg(c)
	if dir == "" {
		dir = "."
	}
	recursive, _ := c.Args["recursive"].(bool)
	pattern, _ := c.Args["pattern"].(string)
	if pattern != "" {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, &Error{Code: models.CodeValidation, Message: fmt.Sprintf("pattern %q is not a valid glob", pattern), Suggestion: "Use a glob such as *.go."}
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
	walkRoot := path.Clean(dir)
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
				switch t := d.Type(); {
				case d.IsDir():
					kind = "dir"
				case t&fs.ModeSymlink != 0:
					kind = "symlink"
				case !t.IsRegular():
					kind = "special" // a FIFO, socket or device: listed, never opened
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
