//go:build !amd64

package selection

const (
	haveAVX2         = false
	havePOPCNT       = false
	haveAVX512POPCNT = false
)

func dotAVX2(codes *int8, query *float32, n int) float32 { panic("dotAVX2 without AVX2") }

func binaryScoresPOPCNT(signs *uint64, n, words int, planes *planeWord, out *uint16) {
	panic("binaryScoresPOPCNT without POPCNT")
}

func binaryScoresAVX512(signs *uint64, n, words int, chunks *uint64, out *uint16) {
	panic("binaryScoresAVX512 without AVX-512")
}
