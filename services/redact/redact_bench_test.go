package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkRedactJSON measures redaction of tool output as it arrives from
// the runners: a small result, and file_read results of a 16 KiB source
// file with and without a credential in it.
func BenchmarkRedactJSON(b *testing.B) {
	r, err := New([]string{"configured-secret-value"})
	if err != nil {
		b.Fatal(err)
	}
	benchRedactJSON(b, r)
}

func benchRedactJSON(b *testing.B, r *Redactor) {
	var src strings.Builder
	for i := 0; src.Len() < 16<<10; i++ {
		fmt.Fprintf(&src, "func handler%d(w http.ResponseWriter, req *http.Request) {\n\tlog.Printf(\"serving %%s\", req.URL.Path)\n\tw.WriteHeader(%d)\n}\n\n", i, 200+i%5)
	}
	file := func(content string) []byte {
		raw, _ := json.Marshal(map[string]any{"path": "main.go", "content": content, "size": len(content), "truncated": false})
		return raw
	}
	cases := []struct {
		name string
		raw  []byte
	}{
		{"small", []byte(`{"n":7,"note":"call number 7","items":["a","b","c"]}`)},
		{"file-16k-clean", file(src.String())},
		{"file-16k-secret", file(src.String() + "\nconst token = \"ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L\"\n")},
		// The same token base64-encoded and with \u escapes: each decoding
		// pass runs the rules again.
		{"file-16k-encoded", file(src.String() + "\nconst token = \"Z2hwXzRReDljVmI3TG0yTnA4UnQ2WXczWnM1S2ExRGYwR2g5SmsyTA==\"\nconst other = \"\\u0067hp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L\"\n")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.raw)))
			for b.Loop() {
				r.RedactJSON(tc.raw)
			}
		})
	}
}

// BenchmarkRedactOrdinary redacts the ordinary texts of testdata/ordinary
// (code, JSON, prose; some 630 KB in all) as file_read results: the cost
// per byte of output that holds no secret, the usual case.
func BenchmarkRedactOrdinary(b *testing.B) {
	r, err := New([]string{"configured-secret-value"})
	if err != nil {
		b.Fatal(err)
	}
	var docs [][]byte
	size := 0
	for _, text := range loadOrdinary(b) {
		raw, _ := json.Marshal(map[string]any{"path": "notes.txt", "content": text, "size": len(text)})
		docs = append(docs, raw)
		size += len(raw)
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		for _, raw := range docs {
			r.RedactJSON(raw)
		}
	}
}
