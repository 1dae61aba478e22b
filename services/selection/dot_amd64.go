package selection

import "golang.org/x/sys/cpu"

// haveAVX2 says dotAVX2 may run: AVX2 and FMA, which x86-64 CPUs since
// 2013 (Haswell, Zen) have.
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// havePOPCNT says binaryScoresPOPCNT may run: x86-64 CPUs since 2008
// (Nehalem, Barcelona) have it.
var havePOPCNT = cpu.X86.HasPOPCNT

// haveAVX512POPCNT says binaryScoresAVX512 may run: AVX-512 with
// VPOPCNTQ, which Intel's server CPUs since Ice Lake (2021) and AMD's
// since Zen 4 (2022) have.
var haveAVX512POPCNT = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPOPCNTDQ

// dotAVX2 is the dot product of n int8 codes with n float32s, n a
// multiple of 8 (dot_amd64.s).
//
//go:noescape
func dotAVX2(codes *int8, query *float32, n int) float32

// binaryScoresPOPCNT writes to out the binary scores of n tools whose
// codes, words uint64s each, start at signs (binary_amd64.s); n and words
// are positive.
//
//go:noescape
func binaryScoresPOPCNT(signs *uint64, n, words int, planes *planeWord, out *uint16)

// binaryScoresAVX512 is binaryScoresPOPCNT eight words a step, the
// query's planes laid out as queryPlanes.chunks (binary_amd64.s).
//
//go:noescape
func binaryScoresAVX512(signs *uint64, n, words int, chunks *uint64, out *uint16)
