package runners

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"toolbelt/services/sandbox"
)

// Session work directories are dataDir/sessions/p<principal>/<session>.
// They are made and opened from the sessions root one element at a time,
// each with O_NOFOLLOW, checked to be a real directory owned as expected,
// and chowned through its descriptor (sandbox.PrepareDir): a link planted
// anywhere below the root (by a sandboxed program, or left by an older
// server) is refused, never followed, so no principal reaches a path
// outside its own session directory. The sandbox mounts that directory
// from its descriptor as its only writable place; the file tools open it
// as an os.Root, checked to be the same directory.

// dirID identifies a directory (device and inode), so a work directory
// opened again by path can be checked to be the one made.
type dirID struct{ dev, ino uint64 }

func idOf(info os.FileInfo) (dirID, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, false
	}
	return dirID{uint64(st.Dev), st.Ino}, true
}

// WorkDir is a session's work directory, made: where it is, its identity
// (checked at every open, so a directory swapped for a link is refused),
// its quota and what it holds.
type WorkDir struct {
	Path string
	// Quota is the bytes it may hold; 0: unbounded.
	Quota int64
	// Owner is the uid and gid files written for the session get, when
	// sandboxed commands run as another user; nil otherwise.
	Owner *[2]int
	id    dirID
	usage *dirUsage // what it holds, for file_write's quota check
	key   sessionKey
}

// sessionKey names a session's work directory: sessions/p<principal>/<session>.
type sessionKey struct {
	principal uint
	session   string
}

// errPlanted is a work directory that is no longer the directory the
// server made for the session.
var errPlanted = errors.New("not the directory the server made")

// prepareWorkDir makes (or opens) a session's work directory with the
// sandbox's PrepareDir, which follows no link at any step, and returns it
// open; the caller closes it.
func (t *Table) prepareWorkDir(key sessionKey) (*os.File, error) {
	return t.sandbox.PrepareDir(filepath.Join(t.dataDir, "sessions"), fmt.Sprintf("p%d", key.principal), key.session)
}

// WorkDir makes the work directory of a principal's session once and
// remembers its path and identity. Work directories belong to a principal
// and a session: two agents using the same session id never share files.
func (t *Table) WorkDir(principal uint, session string) (WorkDir, error) {
	key := sessionKey{principal, session}
	made, ok := t.dirs.Load(key)
	if !ok {
		f, err := t.prepareWorkDir(key)
		if err != nil {
			return WorkDir{}, err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return WorkDir{}, err
		}
		id, _ := idOf(info)
		made, _ = t.dirs.LoadOrStore(key, WorkDir{Path: f.Name(), id: id, usage: &dirUsage{}, key: key})
	}
	dir := made.(WorkDir)
	dir.Quota = t.quota.disk
	if uid, gid, ok := t.sandbox.Owner(); ok {
		dir.Owner = &[2]int{uid, gid}
	}
	return dir, nil
}

// openWorkDir opens the call's work directory again, following no link,
// for a sandboxed command to be mounted from; it must be the directory
// made for the session.
func (t *Table) openWorkDir(c *Call) (*os.File, error) {
	f, err := t.prepareWorkDir(c.Dir.key)
	if err != nil {
		return nil, err
	}
	if err := sameDir(c, f.Stat); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameDir checks that what stat describes is the directory made for the
// call's session.
func sameDir(c *Call, stat func() (os.FileInfo, error)) error {
	info, err := stat()
	if err != nil {
		return err
	}
	if id, ok := idOf(info); !ok || id != c.Dir.id {
		return fmt.Errorf("work directory %s was replaced: %w", c.Dir.Path, errPlanted)
	}
	return nil
}

// openRoot opens the call's work directory as an os.Root and checks it is
// still the directory made for the session.
func openRoot(c *Call) (*os.Root, error) {
	root, err := os.OpenRoot(c.Dir.Path)
	if err != nil {
		return nil, err
	}
	if err := sameDir(c, func() (os.FileInfo, error) { return root.Stat(".") }); err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// Quota bounds what a session's work directory may hold: disk in all,
// file for one file a sandboxed program writes.
type Quota struct{ disk, file int64 }

// DefaultSessionQuota is a session's disk quota unless configured.
const DefaultSessionQuota = 1 << 30

// NewQuota is a session quota of disk bytes, each file written by a
// sandboxed program at most a quarter of it: a few processes each making
// one large write at once cannot overshoot the quota by much before the
// sandbox's watch kills them.
func NewQuota(disk int64) Quota { return Quota{disk: disk, file: max(disk/4, 1)} }

// Limits are the sandbox limits that hold a command to the quota.
func (q Quota) Limits() sandbox.Limits { return sandbox.Limits{Disk: q.disk, FileSize: q.file} }
