#include "textflag.h"

// func binaryScoresPOPCNT(signs *uint64, n, words int, planes *planeWord, out *uint16)
//
// The binary score of n tools, each words uint64s of signs, against the
// query's planes (one planeWord of 32 bytes per word): per word,
// agree = ^(code ^ sign), and the score adds popcount(agree & nonzero) +
// popcount(agree & b0) + 2 popcount(agree & b1) — queryPlanes.score, with
// the popcounts in registers (Go's bits.OnesCount64 checks the CPU at
// each call, which spills the sums to the stack). n and words > 0.
TEXT ·binaryScoresPOPCNT(SB), NOSPLIT, $0-40
	MOVQ signs+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ words+16(FP), R8
	MOVQ planes+24(FP), R9
	MOVQ out+32(FP), DI

// AX sums the popcounts of weight 1, R14 those of weight 2: two short
// chains of additions, not one long one.
tool:
	XORQ AX, AX
	XORQ R14, R14
	MOVQ R9, R10
	MOVQ R8, R11

word:
	MOVQ    (SI), BX
	XORQ    (R10), BX
	NOTQ    BX
	MOVQ    8(R10), DX
	ANDQ    BX, DX
	POPCNTQ DX, DX
	MOVQ    16(R10), R12
	ANDQ    BX, R12
	POPCNTQ R12, R12
	MOVQ    24(R10), R13
	ANDQ    BX, R13
	POPCNTQ R13, R13
	ADDQ    R12, DX
	ADDQ    DX, AX
	ADDQ    R13, R14
	ADDQ    $8, SI
	ADDQ    $32, R10
	DECQ    R11
	JNZ     word

	LEAQ (AX)(R14*2), AX
	MOVW AX, (DI)
	ADDQ $2, DI
	DECQ CX
	JNZ  tool
	RET
