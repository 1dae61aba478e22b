package connect

import "testing"

// BenchmarkToken is what a call of an OAuth upstream pays, per request to
// the server, for reading the person's token: the connection's row read
// and its sealed tokens opened (no refresh: the token is fresh).
func BenchmarkToken(b *testing.B) {
	f, _, u, alice := aliceConnected(b)
	c := call(alice)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.svc.Token(b.Context(), u, c); err != nil {
			b.Fatal(err)
		}
	}
}
