package browser

import (
	"encoding/json"
	"errors"
	"fmt"
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
// dies. When it cannot write them, Chromium does not start: it sets cmd.Err,
// which Start returns.
func prepareProfile(cmd *exec.Cmd) {
	setDeathSignal(cmd)
	dir := ""
	for _, arg := range cmd.Args {
		if d, ok := strings.CutPrefix(arg, "--user-data-dir="); ok {
			dir = d
		}
	}
	if dir == "" {
		cmd.Err = errors.New("write chromium preferences: no --user-data-dir")
		return
	}
	data, err := json.Marshal(profilePrefs)
	if err == nil {
		err = os.MkdirAll(filepath.Join(dir, "Default"), 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "Default", "Preferences"), data, 0o600)
	}
	if err != nil {
		cmd.Err = fmt.Errorf("write chromium preferences: %w", err)
	}
}
