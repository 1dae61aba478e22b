//go:build !amd64

package selection

const haveAVX2 = false

func dotAVX2(codes *int8, query *float32, n int) float32 { panic("dotAVX2 without AVX2") }
