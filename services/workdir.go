package services

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Session work directories are dataDir/sessions/p<principal>/<session>.
// They are made and opened from the sessions root one element at a time,
// each with O_NOFOLLOW, checked to be a real directory owned as expected,
// and chowned through its descriptor: a link planted anywhere below the
// root (by a sandboxed program, or left by an older server) is refused,
// never followed, so no principal reaches a path outside its own session
// directory. The sandbox's only writable place is that one directory.

// SessionIDRule is what a session id may be: one path element that
// cannot name a parent, itself or a hidden entry.
const SessionIDRule = "session_id must be 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' (it names one directory: \".\", \"..\" and hidden names are refused)"

// ValidSessionID reports whether id may name a call session.
func ValidSessionID(id string) bool {
	if len(id) == 0 || len(id) > 128 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

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

// workDir is a session's directory, made: its path and identity.
type workDir struct {
	path string
	id   dirID
}

// errPlanted is a work directory path holding something other than the
// directories the server made.
var errPlanted = errors.New("not a directory the server made")

// makeWorkDir makes (or opens) root/elems... with no link followed at any
// step. Intermediate directories belong to the server and can be
// traversed, not listed or written, by others; the last belongs to owner
// when sandboxed programs run as another uid, and is 0700.
func makeWorkDir(root string, owner *[2]int, elems ...string) (workDir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return workDir{}, err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return workDir{}, fmt.Errorf("open %s: %w", root, err)
	}
	defer func() { unix.Close(fd) }()
	self := uint32(os.Geteuid())
	if owner != nil {
		if err := traversable(fd, root, self); err != nil {
			return workDir{}, err
		}
	}
	path := root
	for i, name := range elems {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return workDir{}, fmt.Errorf("%q is not one path element", name)
		}
		last := i == len(elems)-1
		path = filepath.Join(path, name)
		mode := uint32(0o700)
		if err := unix.Mkdirat(fd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
			return workDir{}, fmt.Errorf("make %s: %w", path, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return workDir{}, fmt.Errorf("%s is %w (a link or a file planted there)", path, errPlanted)
			}
			return workDir{}, fmt.Errorf("open %s: %w", path, err)
		}
		unix.Close(fd)
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return workDir{}, err
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return workDir{}, fmt.Errorf("%s is %w", path, errPlanted)
		case !last && (st.Uid != self || st.Mode&0o022 != 0):
			return workDir{}, fmt.Errorf("%s is %w (owner %d, mode %o)", path, errPlanted, st.Uid, st.Mode&0o777)
		case last && st.Uid != self && (owner == nil || st.Uid != uint32(owner[0])):
			return workDir{}, fmt.Errorf("%s is %w (owner %d)", path, errPlanted, st.Uid)
		}
		if owner == nil {
			continue
		}
		if !last {
			if err := traversable(fd, path, self); err != nil {
				return workDir{}, err
			}
			continue
		}
		if err := unix.Fchown(fd, owner[0], owner[1]); err != nil {
			return workDir{}, fmt.Errorf("chown %s: %w", path, err)
		}
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return workDir{}, fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return workDir{}, err
	}
	return workDir{path: path, id: dirID{st.Dev, st.Ino}}, nil
}

// traversable lets the sandbox's uid pass through the directory open as
// fd (o+x), never list or write it.
func traversable(fd int, path string, self uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Uid != self {
		return fmt.Errorf("%s belongs to uid %d, not the server's", path, st.Uid)
	}
	if perm := st.Mode & 0o777; perm&0o711 != 0o711 || perm&0o066 != 0 {
		if err := unix.Fchmod(fd, perm&0o700|0o711); err != nil {
			return fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	return nil
}

// openRoot opens the call's work directory as an os.Root and checks it is
// still the directory made for the session.
func openRoot(c *call) (*os.Root, error) {
	root, err := os.OpenRoot(c.workDir)
	if err != nil {
		return nil, err
	}
	info, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if id, ok := idOf(info); c.workID != (dirID{}) && (!ok || id != c.workID) {
		root.Close()
		return nil, fmt.Errorf("work directory %s was replaced: %w", c.workDir, errPlanted)
	}
	return root, nil
}
