package browser

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// profilePrefs are the preferences Chromium starts with. They are read by
// the profile and fall through to the browser contexts each call creates,
// which keep their own writes in memory.
//
//   - webrtc.ip_handling_policy: WebRTC may use no UDP that does not go
//     through the proxy, which carries none; so no STUN or media over UDP
//     goes anywhere. The switch --force-webrtc-ip-handling-policy is only
//     read by content_shell and the old headless shell, not by Chromium
//     itself.
//   - net.network_prediction_options 2: no preconnects or DNS prefetching.
var profilePrefs = map[string]any{
	"webrtc": map[string]any{"ip_handling_policy": "disable_non_proxied_udp"},
	"net":    map[string]any{"network_prediction_options": 2},
}

// prepareProfile is the ModifyCmdFunc of the allocator: it writes
// profilePrefs into the user data directory that chromedp created (and will
// remove), and keeps chromedp's default of killing Chromium when the server
// dies.
func prepareProfile(cmd *exec.Cmd) {
	setDeathSignal(cmd)
	for _, arg := range cmd.Args {
		dir, ok := strings.CutPrefix(arg, "--user-data-dir=")
		if !ok {
			continue
		}
		data, _ := json.Marshal(profilePrefs)
		if err := os.MkdirAll(filepath.Join(dir, "Default"), 0o700); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "Default", "Preferences"), data, 0o600)
		}
	}
}
