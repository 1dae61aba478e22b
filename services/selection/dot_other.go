//go:build !amd64

package selection

const (
	haveAVX2   = false
	havePOPCNT = false
)

func dotAVX2(codes *int8, query *float32, n int) float32 { panic("dotAVX2 without AVX2") }

func binaryScoresPOPCNT(signs *uint64, n, words int, planes *planeWord, out *uint16) {
	panic("binaryScoresPOPCNT without POPCNT")
}
