package static

import "testing"

// TestAcceptsGzip: gzip is sent when listed with a quality above 0.
func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "br, gzip;q=0.8": true, "gzip;q=0": false, "gzip; q=0.000": false,
		"gzip;q=0.001": true, "deflate, br": false, "x-gzip": false, "gzip;q=nope": false, "identity, gzip ; q=1": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}
