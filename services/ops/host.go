package ops

import "os/exec"

// HostCaps says what this host can run, so selection never offers a tool
// that would fail for want of it.
type HostCaps struct {
	Chromium bool `json:"chromium"`
	Python   bool `json:"python3"`
	Node     bool `json:"node"`
	Sandbox  bool `json:"sandbox"`
}

// DetectHost looks for the programs tools depend on.
func DetectHost() HostCaps {
	has := func(names ...string) bool {
		for _, n := range names {
			if _, err := exec.LookPath(n); err == nil {
				return true
			}
		}
		return false
	}
	return HostCaps{
		Chromium: has("chromium", "chromium-browser", "google-chrome", "headless_shell"),
		Python:   has("python3"),
		Node:     has("node", "nodejs"),
		Sandbox:  has("bwrap"),
	}
}
