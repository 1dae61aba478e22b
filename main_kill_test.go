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
)

// TestKilledSyncCallsWaitingAreNotInterrupted kills the binary with
// SIGKILL while four synchronous calls of a sandboxed tool run and two
// more wait for a slot of the code category's queue. After the restart
// the four whose tool began (their tag is in runs.log on the host) are
// interrupted; the two whose tool never began are not recorded as
// interrupted, nor as anything else: they never ran and were never
// answered.
func TestKilledSyncCallsWaitingAreNotInterrupted(t *testing.T) {
	bin := buildBinary(t)
	data := filepath.Join(sandboxTraversable(t), "data")
	s := start(t, bin, data)
	if code, body := s.post(t, "/api/v1/tools", s.key, faultTool("tally_kill", "60", false, 0)); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, body)
	}
	for i := range 6 { // the code category runs 4 at once
		go func() {
			raw, _ := json.Marshal(map[string]any{"tool": "tally_kill", "session_id": "kill", "arguments": map[string]any{"tag": fmt.Sprintf("k%d", i)}})
			req, _ := http.NewRequest("POST", s.base+"/api/v1/calls", strings.NewReader(string(raw)))
			req.Header.Set("Authorization", "Bearer "+s.key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil { // cut by the kill
				resp.Body.Close()
			}
		}()
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams, err := scrape(s)
		waiting := -1.0
		if err == nil && fams["toolbelt_queue_waiting"] != nil {
			for _, m := range fams["toolbelt_queue_waiting"].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "category" && l.GetValue() == "code" {
						waiting = m.GetGauge().GetValue()
					}
				}
			}
		}
		if len(begun()) == 4 && waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not four running and two waiting: begun %v, waiting %v\n%s", begun(), waiting, s.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-s.exited
	s.exited <- err // for the cleanup

	key := s.key // printed at the first start only
	s = start(t, bin, data)
	code, body := s.get(t, "/api/v1/calls?limit=100", key)
	if code != 200 {
		t.Fatalf("list calls: %d %v", code, body)
	}
	statuses := map[string]int{}
	list, _ := body["calls"].([]any)
	for _, c := range list {
		rec := c.(map[string]any)
		if rec["tool"] == "tally_kill" {
			statuses[fmt.Sprint(rec["status"])]++
		}
	}
	if tags := begun(); len(tags) != 4 || statuses["interrupted"] != 4 || len(statuses) != 1 {
		t.Errorf("after the kill: tools begun %v, calls recorded %v; want 4 begun and 4 interrupted, nothing else", tags, statuses)
	}
}
