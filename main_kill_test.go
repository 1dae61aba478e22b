package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

// TestKilledSyncCallsWaitingAreNotInterrupted kills the binary with
// SIGKILL while four synchronous calls of a sandboxed tool run and two
// more wait for a slot of the code category's queue, with a synchronous
// composite whose one step waits there too. After the restart the four
// whose tool began (their tag is in runs.log on the host) are
// interrupted; the others, the composite included, are not recorded as
// interrupted, nor as anything else: their tools never began, and they
// were never answered.
func TestKilledSyncCallsWaitingAreNotInterrupted(t *testing.T) {
	bin := buildBinary(t)
	data := filepath.Join(sandboxTraversable(t), "data")
	s := start(t, bin, data)
	if code, body := s.post(t, "/api/v1/tools", s.key, faultTool("tally_kill", "60", false, 0)); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, body)
	}
	combo := map[string]any{
		"name": "combo_kill", "version": "1.0.0", "category": "api",
		"description": "Record one run of a tagged job through a step. Input: tag. Output: the step's.",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"tag": map[string]any{"type": "string"}}, "required": []any{"tag"}},
		"security":    map[string]any{"level": "safe"},
		"execution":   map[string]any{"timeout": 60000},
		"runner": map[string]any{"kind": "composite", "steps": []any{
			map[string]any{"tool": "tally_kill", "arguments": map[string]any{"tag": map[string]any{"$ref": "#/input/tag"}}}}},
	}
	if code, body := s.post(t, "/api/v1/tools", s.key, combo); code != http.StatusCreated {
		t.Fatalf("register the composite: %d %v", code, body)
	}
	base, key := s.base, s.key // s is the restarted server later
	call := func(tool, tag string) {
		go func() {
			raw, _ := json.Marshal(map[string]any{"tool": tool, "session_id": "kill", "arguments": map[string]any{"tag": tag}})
			req, _ := http.NewRequest("POST", base+"/api/v1/calls", strings.NewReader(string(raw)))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil { // cut by the kill
				resp.Body.Close()
			}
		}()
	}
	for i := range 6 { // the code category runs 4 at once
		call("tally_kill", fmt.Sprintf("k%d", i))
	}
	begun := func() []string {
		logs, _ := filepath.Glob(filepath.Join(data, "sessions", "*", "kill", "runs.log"))
		var tags []string
		for _, l := range logs {
			raw, _ := os.ReadFile(l)
			tags = append(tags, strings.Fields(string(raw))...)
		}
		return tags
	}
	waitFor := func(running int, waiting float64) {
		t.Helper()
		poll.Until(t, 30*time.Second, "the calls running and waiting", func() (bool, string) {
			got, w := len(begun()), codeWaiting(s)
			return got == running && w == waiting, fmt.Sprintf("want %d running and %v waiting: begun %d, waiting %v\n%s", running, waiting, got, w, s.output())
		})
	}
	waitFor(4, 2)
	call("combo_kill", "kc")
	waitFor(4, 3)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-s.exited
	s.exited <- err // for the cleanup

	s = start(t, bin, data) // the key is printed at the first start only
	code, body := s.get(t, "/api/v1/calls?limit=100", key)
	if code != 200 {
		t.Fatalf("list calls: %d %v", code, body)
	}
	statuses := map[string]int{}
	list, _ := body["calls"].([]any)
	for _, c := range list {
		rec := c.(map[string]any)
		statuses[fmt.Sprint(rec["tool"], " ", rec["status"])]++
	}
	if tags := begun(); len(tags) != 4 || statuses["tally_kill interrupted"] != 4 || len(statuses) != 1 {
		t.Errorf("after the kill: tools begun %v, calls recorded %v; want 4 begun and 4 interrupted, nothing else", tags, statuses)
	}
}

// codeWaiting is the server's toolbelt_queue_waiting of the code
// category, or -1.
func codeWaiting(s *server) float64 {
	fams, err := scrape(s)
	if err != nil || fams["toolbelt_queue_waiting"] == nil {
		return -1
	}
	for _, m := range fams["toolbelt_queue_waiting"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "category" && l.GetValue() == "code" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
