package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// onlyValueSeeds are bodies whose first value decodes, followed by
// nothing, white space of every kind JSON knows or not, or more.
var onlyValueSeeds = []string{
	`{}`, `{} `, "{}\n", "{}\r\n\t ", `{}{}`, `{} {}`, `{}x`, `{} ]`, `{}}`, `{},`,
	"{}\f", "{}\v", "{}\u00a0", "{}\u0085", `{}"`, `{} null`, `{}0`, `1 2`, `1`, `"a" `, `[1] [`,
	`{"tool":"file_read","arguments":{"path":"a"}}` + "\n\n", `{"a":1}/`, "{}\x00",
}

// tokenSaysOnlyValue is what bindJSON asked before onlyValue: does
// dec.Token find io.EOF after the value?
func tokenSaysOnlyValue(dec *json.Decoder) bool {
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

func checkOnlyValue(t *testing.T, body string) {
	t.Helper()
	raw := []byte(body)
	var a, b any
	dec, ref := json.NewDecoder(bytes.NewReader(raw)), json.NewDecoder(bytes.NewReader(raw))
	if dec.Decode(&a) != nil || ref.Decode(&b) != nil {
		return // bindJSON answers the decoding error first
	}
	if got, want := onlyValue(dec, raw), tokenSaysOnlyValue(ref); got != want {
		t.Errorf("onlyValue(%q) = %v, dec.Token says %v", body, got, want)
	}
}

// TestOnlyValueAsToken checks onlyValue answers as the dec.Token check it
// replaced, for the seeds.
func TestOnlyValueAsToken(t *testing.T) {
	for _, body := range onlyValueSeeds {
		checkOnlyValue(t, body)
	}
}

// FuzzOnlyValueAsToken compares onlyValue with the dec.Token check on any
// body.
func FuzzOnlyValueAsToken(f *testing.F) {
	for _, body := range onlyValueSeeds {
		f.Add(body)
	}
	f.Fuzz(checkOnlyValue)
}
