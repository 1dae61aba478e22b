//go:build !linux

package browser

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal.
func setDeathSignal(*exec.Cmd) {}
