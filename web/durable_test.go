package web_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A call is answered only once its record survives a crash: in the journal
// or in the database; a selection once its record is in the database; a
// call read back by id once it is in the database. Another connection reads
// them right after the answer.
func TestAnswersWaitForCommit(t *testing.T) {
	app := newTestApp(t)
	other := app.openOther(t)
	ctx := context.Background()
	for i := range 20 {
		code, res := app.call(t, "admin", map[string]any{"tool": "file_list", "session_id": "d", "arguments": map[string]any{}})
		if code != 200 {
			t.Fatalf("call: %d %v", code, res)
		}
		// A call that ran answers at once; reading it back waits until it
		// is committed.
		if r := app.do(t, "admin", "GET", "/api/v1/calls/"+res["call_id"].(string), nil); r.Status != 200 {
			t.Fatalf("read back: %d %s", r.Status, r.Body)
		}
		if rec, err := other.CallByID(ctx, res["call_id"].(string)); err != nil || rec.Status != "succeeded" {
			t.Fatalf("call %d read back but not committed: %v %+v", i, err, rec)
		}

		r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "file_list", "session_id": "d", "async": true, "arguments": map[string]any{}})
		if r.Status != 202 {
			t.Fatalf("async: %d %s", r.Status, r.Body)
		}
		if id := r.JSON(t)["call_id"].(string); !journaled(t, app, id) {
			if _, err := other.CallByID(ctx, id); err != nil {
				t.Fatalf("async call %d accepted but neither journaled nor committed: %v", i, err)
			}
		}

		s := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "list files", "session_id": "d"})
		if s.Status != 200 {
			t.Fatalf("select: %d %s", s.Status, s.Body)
		}
		if _, err := other.SelectionByID(ctx, s.JSON(t)["selection_id"].(string)); err != nil {
			t.Fatalf("selection %d answered but not committed: %v", i, err)
		}
	}
}

// journaled reports whether the app's call journal holds a record of id.
func journaled(t *testing.T, app *testApp, id string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(app.dbPath), "journal", "*.jsonl"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if bytes.Contains(raw, []byte(`"id":"`+id+`"`)) {
			return true
		}
	}
	return false
}
