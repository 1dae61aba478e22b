package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups creates one cgroup per run under the server's own cgroup: v2
// where its memory and pids controllers can be delegated, else v1's memory
// and pids hierarchies.
type cgroups struct {
	version int
	// parents: v2, one directory; v1, the memory and the pids parent.
	memory, pids string
}

// cgroup is the group of one run.
type cgroup struct {
	version      int
	memory, pids string // equal on v2
}

// detectCgroups finds a writable cgroup hierarchy, or returns nil and why
// not.
func detectCgroups() (*cgroups, string) {
	if cg, err := detectV2(); err == nil {
		return cg, ""
	} else if cg1, err1 := detectV1(); err1 == nil {
		return cg1, ""
	} else {
		return nil, fmt.Sprintf("no writable cgroup (v2: %v; v1: %v)", err, err1)
	}
}

// ownCgroups maps controller names ("" for v2) to this process's cgroup
// path.
func ownCgroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

func detectV2() (*cgroups, error) {
	var root string
	for _, r := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(r, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			root = r
			break
		}
	}
	if root == "" {
		return nil, errors.New("no cgroup2 mount")
	}
	// Runs go under a child of the server's cgroup, with the controllers
	// enabled for its children. A cgroup that holds processes cannot
	// delegate controllers, so the parent is a fresh "toolbelt" group
	// beside them when the server's own group is the root.
	own := filepath.Join(root, ownCgroups()[""])
	parent := filepath.Join(own, "toolbelt-sandbox")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil || !strings.Contains(string(ctl), "memory") || !strings.Contains(string(ctl), "pids") {
		_ = os.Remove(parent)
		return nil, fmt.Errorf("memory and pids controllers are not delegated to %s", own)
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		_ = os.Remove(parent)
		return nil, fmt.Errorf("enable controllers: %w", err)
	}
	return &cgroups{version: 2, memory: parent, pids: parent}, nil
}

func detectV1() (*cgroups, error) {
	own := ownCgroups()
	cg := &cgroups{version: 1}
	for _, ctl := range []string{"memory", "pids"} {
		mount := filepath.Join("/sys/fs/cgroup", ctl)
		if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("no %s hierarchy", ctl)
		}
		parent := filepath.Join(mount, own[ctl], "toolbelt-sandbox")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", ctl, err)
		}
		if ctl == "memory" {
			cg.memory = parent
		} else {
			cg.pids = parent
		}
	}
	// A trial group proves the limits can be written.
	g, err := cg.create(Limits{}.withDefaults())
	if err != nil {
		return nil, err
	}
	g.remove()
	return cg, nil
}

// create makes the group of one run with its limits.
func (c *cgroups) create(l Limits) (*cgroup, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "run-" + hex.EncodeToString(b)
	g := &cgroup{version: c.version, memory: filepath.Join(c.memory, name), pids: filepath.Join(c.pids, name)}
	for _, dir := range g.dirs() {
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.remove()
			return nil, err
		}
	}
	type write struct {
		dir, file, value string
		optional         bool // absent without swap accounting
	}
	writes := []write{
		{g.memory, "memory.max", fmt.Sprint(l.Memory), false},
		{g.memory, "memory.swap.max", "0", true},
		{g.pids, "pids.max", fmt.Sprint(l.Procs), false},
	}
	if c.version == 1 {
		writes[0].file, writes[1].file, writes[1].value = "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", fmt.Sprint(l.Memory)
	}
	for _, w := range writes {
		err := os.WriteFile(filepath.Join(w.dir, w.file), []byte(w.value), 0)
		if err != nil && !(w.optional && errors.Is(err, os.ErrNotExist)) {
			g.remove()
			return nil, fmt.Errorf("write %s: %w", w.file, err)
		}
	}
	return g, nil
}

func (g *cgroup) dirs() []string {
	if g.memory == g.pids {
		return []string{g.memory}
	}
	return []string{g.memory, g.pids}
}

// add moves a process and its descendants into the group. A process
// forked before its parent moved stays behind, so the tree is walked again
// until a walk finds nothing new (the command is blocked, so the tree is
// small and finite).
func (g *cgroup) add(pid int) error {
	added := map[int]bool{}
	for {
		fresh := 0
		for _, p := range tree(pid) {
			if added[p] {
				continue
			}
			for _, dir := range g.dirs() {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
					return fmt.Errorf("add %d to %s: %w", p, dir, err)
				}
			}
			added[p] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}

// oomKilled reports whether the memory limit killed a process.
func (g *cgroup) oomKilled() bool {
	if g.version == 2 {
		return eventCount(filepath.Join(g.memory, "memory.events"), "oom_kill") > 0
	}
	return eventCount(filepath.Join(g.memory, "memory.oom_control"), "oom_kill") > 0
}

// memoryUsed is the memory the group is charged now (pages, tmpfs,
// kernel memory).
func (g *cgroup) memoryUsed() int64 {
	file := "memory.current"
	if g.version == 1 {
		file = "memory.usage_in_bytes"
	}
	raw, err := os.ReadFile(filepath.Join(g.memory, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return n
}

// residentSize is the resident memory of the processes pids together
// (shared pages counted in each), from /proc/<pid>/statm.
func residentSize(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(raw)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			total += pages * int64(os.Getpagesize())
		}
	}
	return total
}

// pidsRefused reports whether a fork was refused at the process limit.
func (g *cgroup) pidsRefused() bool {
	return eventCount(filepath.Join(g.pids, "pids.events"), "max") > 0
}

func eventCount(file, key string) int64 {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// kill ends every process in the group (nil-safe).
func (g *cgroup) kill() {
	if g == nil {
		return
	}
	if g.version == 2 {
		if os.WriteFile(filepath.Join(g.memory, "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	// v1 has no cgroup.kill: kill what is listed until nothing is left (a
	// process forking meanwhile is caught on the next round).
	for range 100 {
		raw, err := os.ReadFile(filepath.Join(g.pids, "cgroup.procs"))
		if err != nil || len(strings.TrimSpace(string(raw))) == 0 {
			return
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// remove deletes the group once its processes are gone (nil-safe).
func (g *cgroup) remove() {
	if g == nil {
		return
	}
	for _, dir := range g.dirs() {
		for range 50 {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(2 * time.Millisecond) // the last processes are being reaped
		}
	}
}

// tree lists pid and its descendants.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		for _, t := range tasks {
			raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			for _, f := range strings.Fields(string(raw)) {
				if child, err := strconv.Atoi(f); err == nil {
					out = append(out, child)
				}
			}
		}
	}
	return out
}

// rlimit is one resource limit a command starts under.
type rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
	Flag     string `json:"flag"` // prlimit(1)'s option
}

// rlimitsFor lists the resource limits of a run: the size of a file
// (RLIMIT_FSIZE, fsize bytes, 0 for none) and, without a cgroup, memory
// (RLIMIT_DATA), processes (RLIMIT_NPROC) and CPU time.
//
// RLIMIT_NPROC caps every task of the uid, not those of one run: the
// kernel refuses a fork when the uid as a whole is at the cap. With the
// cap at Procs, runs side by side shared 64 tasks, so one fork bomb (or
// only a busy machine) made every other run's bubblewrap fail with
// "Creating new namespace failed". The cap is therefore the tasks the
// uid has when the run starts (busy, see tasksOf) plus Procs: a run can
// add Procs tasks, a fork bomb cannot starve the runs that start after
// it, and in all the uid holds at most Procs a run more than before.
// (Runs that started earlier can still meet a later bomb's tasks: only a
// cgroup counts one run exactly.)
// They are set by the started process on itself (changing another
// process's limits needs CAP_SYS_RESOURCE, which a container's root often
// lacks), and inherited by everything it starts.
//
// With a cgroup only the file size: the cgroup caps memory and processes,
// the runner's kill caps time, and the server runs without core dumps (see
// Probe), which its children inherit.
func rlimitsFor(l Limits, caps bool, fsize int64, busy int) []rlimit {
	var out []rlimit
	if fsize > 0 {
		out = append(out, rlimit{unix.RLIMIT_FSIZE, uint64(fsize), "--fsize"})
	}
	if !caps {
		return out
	}
	out = append(out,
		rlimit{unix.RLIMIT_DATA, uint64(l.Memory), "--data"},
		rlimit{unix.RLIMIT_NPROC, uint64(busy + l.Procs), "--nproc"},
	)
	if l.CPU > 0 {
		out = append(out, cpuRlimit(l.CPU))
	}
	return out
}

// cpuRlimit caps CPU time at d, rounded up to a second.
func cpuRlimit(d time.Duration) rlimit {
	return rlimit{unix.RLIMIT_CPU, uint64((d + time.Second - 1) / time.Second), "--cpu"}
}

// setOwnRlimits applies limits to this process.
func setOwnRlimits(limits []rlimit) error {
	for _, r := range limits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Value, Max: r.Value}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.Resource, err)
		}
	}
	return nil
}

// tasksOf counts the tasks (processes and threads) whose real uid is uid,
// which is what RLIMIT_NPROC counts, from /proc/<pid>/status. A process
// that ends while it is read is not counted.
func tasksOf(uid int) int {
	dir, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	want := strconv.Itoa(uid)
	n := 0
	buf := make([]byte, 4096)
	for _, name := range names {
		if name[0] < '1' || name[0] > '9' {
			continue
		}
		// unix, not os: no poller registration for a procfs file.
		fd, err := unix.Open("/proc/"+name+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		k, _ := unix.Read(fd, buf)
		unix.Close(fd)
		if real, threads, ok := statusIDs(buf[:max(k, 0)]); ok && real == want {
			n += threads
		}
	}
	return n
}

// statusIDs reads the real uid (the first field of "Uid:") and the
// "Threads:" count from a /proc/<pid>/status text.
func statusIDs(status []byte) (uid string, threads int, ok bool) {
	seen := 0
	for line := range strings.Lines(string(status)) {
		key, val, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "Uid":
			uid = fields[0]
			seen++
		case "Threads":
			if threads, _ = strconv.Atoi(fields[0]); threads < 1 {
				threads = 1
			}
			seen++
		}
	}
	return uid, threads, seen == 2
}
