package invoke

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeArgsSeeds are arguments as sent: objects, other values, numbers
// of every shape, and bodies with more after the value.
var decodeArgsSeeds = []string{
	`{}`, `{"path":"hello.txt"}`, `{"n":1, "f":1.50, "e":-2e10, "big":123456789012345678901234567890}`,
	`{"a":[1,{"b":null}],"c":true}`, `[]`, `null`, `"x"`, `1`, `{} `, "{}\n\t\r ", `{}{}`, `{} x`, `{}]`,
	"{}\f", "{}\u00a0", `{`, ``, ` `, `{"a":1,}`, `{"a":"\u00e9\ud83d\ude00"}`, `1 2`, `{"$ref":"call:x#/data"}`,
}

func checkDecodeArgs(t *testing.T, raw string) {
	t.Helper()
	got, gotErr := decodeArgs([]byte(raw))
	want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(raw)))
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("decodeArgs(%q) error %v, jsonschema.UnmarshalJSON %v", raw, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeArgs(%q) = %#v, jsonschema.UnmarshalJSON %#v", raw, got, want)
	}
}

// TestDecodeArgsAsJSONSchema checks decodeArgs decodes as
// jsonschema.UnmarshalJSON, which it replaced, for the seeds.
func TestDecodeArgsAsJSONSchema(t *testing.T) {
	for _, raw := range decodeArgsSeeds {
		checkDecodeArgs(t, raw)
	}
}

// FuzzDecodeArgsAsJSONSchema compares decodeArgs with
// jsonschema.UnmarshalJSON on any input.
func FuzzDecodeArgsAsJSONSchema(f *testing.F) {
	for _, raw := range decodeArgsSeeds {
		f.Add(raw)
	}
	f.Fuzz(checkDecodeArgs)
}
