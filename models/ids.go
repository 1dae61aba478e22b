package models

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewID returns a time-ordered id: 6 bytes of Unix milliseconds, then 6
// random bytes, in hex. Ids made later sort later, so history rows and
// their indexes grow at the end instead of touching random pages of the
// B-trees (which made each insert cost a page write), and ids still cannot
// be guessed.
func NewID() string {
	var b [12]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}
