package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bounds of DirUsage's walk: a work directory past them counts as over
// any quota (the walk must end, and a million empty files cost inodes
// that st_blocks does not show).
const (
	MaxDirEntries = 200_000
	maxDirDepth   = 128
)

// ErrTooManyEntries means a directory tree is past DirUsage's bounds.
var ErrTooManyEntries = fmt.Errorf("more than %d entries or %d levels", MaxDirEntries, maxDirDepth)

// DiskPoll is how often a running command's work directory is measured
// when nothing in it changes; a change noticed (inotify) measures it at
// once, after a pause of at least diskMinGap and as long as the last
// measure took (the watch takes at most half a CPU).
//
// The watch runs at real-time priority while a measure takes at most
// maxRealtimeWalk of CPU (a few thousand entries), at nice -10 after one
// takes longer, so that work directories with many files cannot together
// hold the host's CPUs at real-time priority.
const (
	DiskPoll        = 100 * time.Millisecond
	diskMinGap      = time.Millisecond
	maxRealtimeWalk = 5 * time.Millisecond
)

// DirUsage is the space dir takes: the blocks allocated to it and to
// everything below it (st_blocks × 512, a hard-linked file once). The walk
// opens each directory from its parent without following any link, and
// fails with ErrTooManyEntries past MaxDirEntries entries.
func DirUsage(dir string) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return dirUsageFD(fd, nil)
}

// dirUsageFD measures the tree of the open directory fd (not closed).
// onDir, when set, sees every directory's fd while it is open.
func dirUsageFD(fd int, onDir func(fd int)) (int64, error) {
	return new(walker).usage(fd, onDir)
}

// walker measures directory trees. It keeps its buffers from one walk
// to the next: the disk watch walks every few milliseconds, and a walk
// that allocates brings on garbage collections, whose pauses stall the
// watch's thread with the rest.
type walker struct {
	total   int64
	entries int
	seen    map[[2]uint64]bool // hard links
	onDir   func(fd int)
	bufs    [][]byte // getdents buffers, one per depth
}

func (w *walker) usage(fd int, onDir func(fd int)) (int64, error) {
	w.total, w.entries, w.onDir = 0, 0, onDir
	if w.seen == nil {
		w.seen = map[[2]uint64]bool{}
	}
	clear(w.seen)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	w.total = st.Blocks * 512
	// A fresh open of the directory, not a dup: a dup shares the offset,
	// which the last walk left at the end.
	again, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	err = w.dir(again, 0)
	return w.total, err
}

// dir adds what is below the directory fd, which it closes.
func (w *walker) dir(fd int, depth int) error {
	defer unix.Close(fd)
	if w.onDir != nil {
		w.onDir(fd)
	}
	if len(w.bufs) <= depth {
		w.bufs = append(w.bufs, make([]byte, 16<<10))
	}
	buf := w.bufs[depth]
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // removed meanwhile
			}
			return err
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return errors.New("sandbox: bad directory entry")
			}
			name := buf[off+19 : off+reclen]
			off += reclen
			if k := bytes.IndexByte(name, 0); k >= 0 {
				name = name[:k]
			}
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			if err := w.entry(fd, depth, unsafe.String(&name[0], len(name))); err != nil {
				return err
			}
		}
	}
}

// entry adds one entry of the directory fd. name points into a getdents
// buffer: it must not outlive the call.
func (w *walker) entry(fd, depth int, name string) error {
	if w.entries++; w.entries > MaxDirEntries {
		return ErrTooManyEntries
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed meanwhile
		}
		return err
	}
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		key := [2]uint64{st.Dev, st.Ino}
		if w.seen[key] {
			return nil
		}
		w.seen[key] = true
	}
	w.total += st.Blocks * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if depth+1 >= maxDirDepth {
		return ErrTooManyEntries
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil // replaced meanwhile: never followed
		}
		return err
	}
	return w.dir(sub, depth+1)
}

// diskWatch measures a running command's work directory and, when it
// holds more than quota bytes (or cannot be measured within the walk's
// bounds), kills the command and closes over.
//
// The overshoot is what the command writes between the measure that
// finds it over and the kill, so both happen on one thread, at real-time
// priority (SCHED_RR, the lowest) where the server may, else at nice -10,
// and that thread waits only in system calls (poll on inotify and an
// eventfd, nanosleep), which the kernel wakes at that priority: a
// goroutine's wake-up goes through the runtime's other threads. On a
// host at load 14 on 2 cores, a normal goroutine waited up to 210 ms
// between two measures while the sandboxed writers, in their own
// session's autogroup, kept their CPU.
type diskWatch struct {
	fd      int // the work directory (the runner closes it)
	quota   int64
	pids    func() []int // the run's processes now
	over    chan struct{}
	stopFD  int                // eventfd: written by end
	notify  int                // inotify, -1 if unavailable
	watches map[[2]uint64]bool // the directories watched
	done    sync.WaitGroup
}

// maxWatches bounds the inotify watches of one run (they count against
// the user's fs.inotify.max_user_watches); directories past it are still
// measured by the poll.
const maxWatches = 256

func startDiskWatch(fd int, quota int64, pids func() []int, kill func()) (*diskWatch, error) {
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &diskWatch{fd: fd, quota: quota, pids: pids, over: make(chan struct{}), stopFD: stop, notify: -1, watches: map[[2]uint64]bool{}}
	if in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
		w.notify = in
	}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		// The thread ends with the goroutine (it is never unlocked), its
		// priority with it.
		runtime.LockOSThread()
		realtime := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_RR, Priority: 1}, 0) == nil
		if !realtime {
			_ = unix.Setpriority(unix.PRIO_PROCESS, 0, -10)
		}
		fds := []unix.PollFd{{Fd: int32(w.stopFD), Events: unix.POLLIN}}
		if w.notify >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(w.notify), Events: unix.POLLIN})
		}
		buf := make([]byte, 4096)
		var walk walker
		// Deleted files held open are looked for every heldEvery passes
		// (each costs a read of /proc per process): such space stays held
		// until the run ends, so it is found in time, and the walk, which
		// catches fast writers, is not slowed.
		const heldEvery = 4
		var held int64
		for pass := 0; ; pass++ {
			cpu := threadCPU()
			used, err := walk.usage(w.fd, w.addWatch)
			if err == nil {
				if pass%heldEvery == 0 {
					held = heldOpen(w.pids(), w.dev())
				}
				used += held
			}
			if err != nil || used > w.quota {
				// Over first, so that whoever sees the command end by this
				// kill also sees why.
				close(w.over)
				kill()
				return
			}
			// At most half a CPU: a pause as long as the measure's CPU time
			// (not its wall time, which a preemption stretches).
			spent := threadCPU() - cpu
			if realtime && spent > maxRealtimeWalk {
				// A tree this large would take real-time CPU from every
				// other thread of the host: back to a normal thread.
				realtime = false
				_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: -10}, 0)
			}
			pause := unix.NsecToTimespec(int64(max(diskMinGap, spent)))
			_ = unix.Nanosleep(&pause, nil)
			if _, err := unix.Poll(fds, int(DiskPoll/time.Millisecond)); err != nil && err != unix.EINTR {
				return
			}
			if fds[0].Revents != 0 {
				return
			}
			if len(fds) > 1 && fds[1].Revents != 0 {
				for { // drain: what changed does not matter, only that something did
					if _, err := unix.Read(w.notify, buf); err != nil {
						break
					}
				}
			}
		}
	}()
	return w, nil
}

// dev is the device of the work directory.
func (w *diskWatch) dev() uint64 {
	var st unix.Stat_t
	if unix.Fstat(w.fd, &st) != nil {
		return 0
	}
	return st.Dev
}

// heldOpen is the space that files the processes hold open, but that no
// directory entry names any more, take on device dev: a file unlinked
// after it was opened, or made with O_TMPFILE. No walk of the directory
// sees them, yet they fill the disk until closed.
func heldOpen(pids []int, dev uint64) int64 {
	var total int64
	seen := map[uint64]bool{}
	for _, pid := range pids {
		total += heldIn(fmt.Sprintf("/proc/%d/fd", pid), dev, seen)
		total += mappedDeleted(pid, dev, seen)
	}
	return total
}

// mappedDeleted sums the deleted files on dev that pid maps (a shared
// mapping keeps a file's blocks after its descriptor is closed). Only the
// mappings /proc/<pid>/maps marks deleted are looked at, through
// map_files (which needs CAP_SYS_ADMIN: a root server has it), so the
// watch's pass stays cheap.
func mappedDeleted(pid int, dev uint64, seen map[uint64]bool) int64 {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil || !bytes.Contains(maps, []byte(" (deleted)")) {
		return 0
	}
	var total int64
	for _, line := range bytes.Split(maps, []byte{'\n'}) {
		if !bytes.HasSuffix(line, []byte(" (deleted)")) {
			continue
		}
		addr, _, _ := bytes.Cut(line, []byte{' '})
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/map_files/%s", pid, addr), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
			st.Nlink != 0 || st.Dev != dev || seen[st.Ino] {
			continue
		}
		seen[st.Ino] = true
		total += st.Blocks * 512
	}
	return total
}

// heldIn sums the deleted regular files on dev that the links in dir (a
// /proc/<pid>/fd directory) name, each once.
func heldIn(dir string, dev uint64, seen map[uint64]bool) int64 {
	links, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range links {
		var st unix.Stat_t
		// stat follows the magic link to the open file itself.
		if unix.Stat(dir+"/"+e.Name(), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 || st.Dev != dev || seen[st.Ino] {
			continue
		}
		seen[st.Ino] = true
		total += st.Blocks * 512
	}
	return total
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// addWatch watches a directory of the tree for changes, through its fd
// (the magic link names the open directory, not a path to resolve).
func (w *diskWatch) addWatch(fd int) {
	if w.notify < 0 || len(w.watches) >= maxWatches {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || w.watches[[2]uint64{st.Dev, st.Ino}] {
		return // watched already
	}
	const mask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR
	if _, err := unix.InotifyAddWatch(w.notify, fmt.Sprintf("/proc/self/fd/%d", fd), mask); err == nil {
		w.watches[[2]uint64{st.Dev, st.Ino}] = true
	}
}

// end stops the watch and waits for it.
func (w *diskWatch) end() {
	_, _ = unix.Write(w.stopFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	w.done.Wait()
	unix.Close(w.stopFD)
	if w.notify >= 0 {
		unix.Close(w.notify)
	}
}
