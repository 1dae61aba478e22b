package dbtest

import (
	"os"
	"sync"
)

// procDirs are the directories ProcessDir made, by name.
var procDirs struct {
	mu   sync.Mutex
	dirs map[string]string
}

// ProcessDir is a directory of the test process's own under the
// temporary directory, one per name, made by the first call, for what the
// process's tests share (a migrated template database, files staged for
// the sandbox's user). Run removes them; a process killed before that
// leaves them to the next one's sweep. Its mode is 0700 unless mode says
// more (0755 for a directory other users must read).
func ProcessDir(name string, mode os.FileMode) (string, error) {
	procDirs.mu.Lock()
	defer procDirs.mu.Unlock()
	if dir, ok := procDirs.dirs[name]; ok {
		return dir, nil
	}
	dir, err := workDir("proc-"+name, nil)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, mode|0o700); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	if procDirs.dirs == nil {
		procDirs.dirs = map[string]string{}
	}
	procDirs.dirs[name] = dir
	return dir, nil
}

// removeProcessDirs removes what ProcessDir made.
func removeProcessDirs() {
	procDirs.mu.Lock()
	defer procDirs.mu.Unlock()
	for name, dir := range procDirs.dirs {
		_ = os.RemoveAll(dir)
		delete(procDirs.dirs, name)
	}
}
