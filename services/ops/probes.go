package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"toolbelt/services/sandbox"
)

// Probe checks one thing the service needs, within ctx, and says what it
// found.
type Probe func(ctx context.Context) Component

// Probes cost I/O: each runs at most once every probeInterval and one run
// at a time, within probeTimeout; a report waits for a run at most until
// its own deadline, so a file system that hangs a probe's system call
// makes the component down, not /readyz hang.
const (
	probeInterval = time.Second
	probeTimeout  = time.Second
)

// cachedProbe is a Probe whose last result is shared for probeInterval.
type cachedProbe struct {
	check Probe

	mu   sync.Mutex
	last Component
	at   time.Time     // when last was found; zero before the first run
	run  chan struct{} // closed when the run under way ends; nil when none is
}

// cached wraps check; nil for none.
func cached(check Probe) *cachedProbe {
	if check == nil {
		return nil
	}
	return &cachedProbe{check: check}
}

// get returns the last result while it is fresh, else waits for a run
// (starting one unless one is under way) until ctx ends.
func (p *cachedProbe) get(ctx context.Context) Component {
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < probeInterval {
		defer p.mu.Unlock()
		return p.last
	}
	run := p.run
	if run == nil {
		run = make(chan struct{})
		p.run = run
		go p.measure(run)
	}
	p.mu.Unlock()
	select {
	case <-run:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.last
	case <-ctx.Done():
		return Component{Status: StatusDown, Detail: "the check did not answer in time"}
	}
}

// measure runs the check on its own deadline, not a caller's: a report
// that gave up waiting does not cut the run short for the next one.
func (p *cachedProbe) measure(run chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	c := p.check(ctx)
	p.mu.Lock()
	p.last, p.at, p.run = c, time.Now(), nil
	p.mu.Unlock()
	close(run)
}

// fullBelow is the free space under which a disk counts as full: 64 MiB,
// or 1% of a disk smaller than 6.4 GiB. The call journal, the database's
// WAL and the session work directories all grow there, and a write that
// fails for space fails the request.
func fullBelow(total uint64) uint64 { return min(64<<20, total/100) }

// DiskProbe checks the free space of the file system dir (the data
// directory) is on: full below fullBelow of it, or with almost no file
// left to create (inodes). Free is what the server may use: root may
// fill the blocks reserved for it.
func DiskProbe(dir string) Probe {
	return func(context.Context) Component {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return Component{Status: StatusDown, Detail: fmt.Sprintf("the data directory's disk cannot be measured: %v", err)}
		}
		bsize := uint64(st.Bsize)
		total, free := st.Blocks*bsize, st.Bavail*bsize
		if os.Geteuid() == 0 {
			free = st.Bfree * bsize
		}
		switch limit := fullBelow(total); {
		case free < limit:
			return Component{Status: StatusFull, Detail: fmt.Sprintf("the data directory's disk is full: %s free of %s on the file system of %s (full below %s)",
				size(free), size(total), dir, size(limit))}
		case st.Files > 0 && st.Ffree < min(1024, st.Files/100):
			return Component{Status: StatusFull, Detail: fmt.Sprintf("the data directory's disk is full: %d files may still be created on the file system of %s",
				st.Ffree, dir)}
		}
		return Component{Status: StatusOK, Detail: fmt.Sprintf("%s free of %s on the file system of %s", size(free), size(total), dir)}
	}
}

// JournalProbe checks that the call journal's directory takes a record:
// a file made in it takes a block and is removed.
func JournalProbe(dir string) Probe {
	return func(context.Context) Component {
		if err := writeProbe(dir); err != nil {
			return Component{Status: StatusDown, Detail: "the call journal cannot be written: " + err.Error()}
		}
		return Component{Status: StatusOK, Detail: dir + " is writable"}
	}
}

// SessionsProbe checks that a call's work directory can be made under
// root and written as a call writes it: the server makes a directory
// there as it makes a session's (sandbox.PrepareDir, which also checks
// that the sandbox's user can reach root), then, as that user when
// sandboxed commands run as another (the server is root), opens it by its
// path, as bubblewrap resolves it, and writes a file in it.
func SessionsProbe(box *sandbox.Sandbox, root string) Probe {
	who := "the server"
	if uid, _, ok := box.Owner(); ok {
		who = fmt.Sprintf("uid %d", uid)
	}
	return func(context.Context) Component {
		if err := checkSessions(box, root); err != nil {
			return Component{Status: StatusDown, Detail: fmt.Sprintf("no work directory can be made in %s and written by %s: %v", root, who, err)}
		}
		return Component{Status: StatusOK, Detail: fmt.Sprintf("%s is writable by %s", root, who)}
	}
}

// probeName names the probes' files and directories: a session's id
// cannot start with a dot, and a journal segment is calls-N.jsonl.
const probeName = ".ready-probe"

// checkSessions makes the probe directory under root, writes in it as
// the sandbox's user would, and removes it.
func checkSessions(box *sandbox.Sandbox, root string) error {
	dir, err := box.PrepareDir(root, probeName)
	if err != nil {
		return err
	}
	path := dir.Name()
	_ = dir.Close()
	defer os.RemoveAll(path)
	write := func() error { return writeProbe(path) }
	if uid, gid, ok := box.Owner(); ok {
		return asUser(uid, gid, write)
	}
	return write()
}

// probeBlock is what a probe writes: a block, which a full disk refuses
// (an empty file takes none).
var probeBlock = make([]byte, 4096)

// writeProbe makes a file in dir, writes a block to it and removes it.
func writeProbe(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, probeName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(probeBlock)
	cerr := f.Close()
	return errors.Join(werr, cerr, os.Remove(f.Name()))
}

// asUser runs fn on a thread of its own whose file system identity is
// uid and gid, without supplementary groups: what fn opens, it opens with
// that user's permissions, as a sandboxed command would. The thread is
// never given back to the runtime (it ends with its goroutine), so
// nothing else runs with that identity.
func asUser(uid, gid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		// Raw system calls: they change this thread alone (the syscall
		// package's Setgroups changes every thread).
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			done <- fmt.Errorf("drop supplementary groups: %w", e)
			return
		}
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
		// Each returns the previous id, whether it changed or not: asking
		// with an invalid one (-1) tells which is in force.
		fsuid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
		fsgid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
		if int(fsuid) != uid || int(fsgid) != gid {
			done <- fmt.Errorf("cannot act as uid %d gid %d (acting as %d, %d)", uid, gid, fsuid, fsgid)
			return
		}
		done <- fn()
	}()
	return <-done
}

// size is n bytes for a person: 12 KiB, 3.4 GiB.
func size(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
