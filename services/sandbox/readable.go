package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// Readable says whether the sandboxed processes can read the host
// directory dir, as the user they run as (SandboxUID when the server is
// root, else the server's own): search every directory on the way to it,
// and list and search dir itself. A directory they cannot reach is what
// bubblewrap answers "Can't find source path …: Permission denied" to
// when it is mounted; this says so before, in words an admin can act
// on, naming the directory that stops them.
//
// dir must be absolute. The way is checked as written and, when a link is
// on it, as resolved: a link into a directory the user cannot enter is
// refused as that directory is. Permissions are the mode bits (no ACLs);
// the directories a chain of links passes through on the way are not
// checked one by one, only where it ends.
func (s *Sandbox) Readable(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s is not an absolute path", dir)
	}
	who := s.runner()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%s does not exist on the server", dir)
		}
		return fmt.Errorf("%s: %w", dir, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	link := ""
	if real != filepath.Clean(dir) {
		link = " (a link to " + real + ")"
	}
	for _, path := range []string{filepath.Clean(dir), real} {
		if err := who.reach(path); err != nil {
			return fmt.Errorf("%s%s is not readable by the sandbox user %s: %w", dir, link, who, err)
		}
	}
	return nil
}

// identity is a user and its groups, as the kernel checks permissions.
type identity struct {
	uid  uint32
	gids []uint32
}

// runner is the identity sandboxed processes run as: SandboxUID with its
// group alone (bwrap.go and native.go drop the supplementary groups), or
// the server's own.
func (s *Sandbox) runner() identity {
	if uid, gid, ok := s.Owner(); ok {
		return identity{uid: uint32(uid), gids: []uint32{uint32(gid)}}
	}
	id := identity{uid: uint32(os.Geteuid()), gids: []uint32{uint32(os.Getegid())}}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		id.gids = append(id.gids, uint32(g))
	}
	return id
}

func (id identity) String() string {
	uid := strconv.FormatUint(uint64(id.uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return fmt.Sprintf("%s (uid %s)", u.Username, uid)
	}
	return "uid " + uid
}

// reach checks that id may search every directory from / down to path
// and read path itself, and names the first that stops it.
func (id identity) reach(path string) error {
	var ways []string
	for p := path; ; p = filepath.Dir(p) {
		ways = append(ways, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(ways)
	for _, p := range ways {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		need := fs.FileMode(0o1) // search
		if p == path {
			need = 0o5 // read and search
		}
		if !id.may(st, need) {
			sys := st.Sys().(*syscall.Stat_t)
			if p == path {
				return fmt.Errorf("%s is mode %o, owner uid %d, group %d; let that user read it (chmod o+rx %s) or copy it where it can", p, st.Mode().Perm(), sys.Uid, sys.Gid, p)
			}
			return fmt.Errorf("%s is mode %o, owner uid %d, group %d, which that user cannot enter; move it under a directory that user can enter, or let it in (chmod o+x %s)", p, st.Mode().Perm(), sys.Uid, sys.Gid, p)
		}
	}
	return nil
}

// may says whether id has the permission bits need (of rwx, as "other"'s)
// on the file st describes: the owner's bits when it owns it, else its
// group's when it is in the group, else others'.
func (id identity) may(st fs.FileInfo, need fs.FileMode) bool {
	if id.uid == 0 {
		return true
	}
	sys := st.Sys().(*syscall.Stat_t)
	perm := st.Mode().Perm()
	switch {
	case sys.Uid == id.uid:
		perm >>= 6
	case slices.Contains(id.gids, sys.Gid):
		perm >>= 3
	}
	return perm&need == need
}
