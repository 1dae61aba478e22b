package runners

import "testing"

// TestExpandURL fills URL templates: path placeholders escaped as one
// segment, query pairs left out when their argument is absent and repeated
// for arrays.
func TestExpandURL(t *testing.T) {
	cases := []struct {
		name, tmpl string
		args       map[string]any
		want       string
		wantErr    bool
	}{
		{"path segment", "https://a.example/p/{{id}}", map[string]any{"id": "x/../y"}, "https://a.example/p/x%2F..%2Fy", false},
		{"query value", "https://a.example/s?q={{q}}", map[string]any{"q": "a&b=c"}, "https://a.example/s?q=a%26b%3Dc", false},
		{"absent query pair left out", "https://a.example/s?q={{q}}&limit={{limit}}", map[string]any{"limit": float64(5)}, "https://a.example/s?limit=5", false},
		{"every query pair absent", "https://a.example/s?q={{q}}", map[string]any{}, "https://a.example/s", false},
		{"empty string still sent", "https://a.example/s?q={{q}}", map[string]any{"q": ""}, "https://a.example/s?q=", false},
		{"array repeated", "https://a.example/s?tag={{tags}}", map[string]any{"tags": []any{"a b", "c"}}, "https://a.example/s?tag=a+b&tag=c", false},
		{"fixed pair kept", "https://a.example/s?format=json&q={{q}}", map[string]any{}, "https://a.example/s?format=json", false},
		{"array of objects refused", "https://a.example/s?tag={{tags}}", map[string]any{"tags": []any{map[string]any{}}}, "", true},
		{"object in path refused", "https://a.example/p/{{id}}", map[string]any{"id": map[string]any{}}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandURL(tc.tmpl, tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
