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

// func binaryScoresAVX512(signs *uint64, n, words int, chunks *uint64, out *uint16)
//
// binaryScoresPOPCNT with AVX-512: eight words a step, whose popcounts
// VPOPCNTQ takes at once. chunks holds the query's planes eight words at
// a time, each step's 256 bytes the sign bits, nonzero, b0 and b1 (zero
// past the last word). The tail of a tool's code is loaded under a mask,
// so no byte past the last tool is read. n and words > 0.
TEXT ·binaryScoresAVX512(SB), NOSPLIT, $0-40
	MOVQ words+16(FP), R8

	// K1 selects the words of the last step: words mod 8 of them, or
	// all eight.
	MOVQ R8, CX
	ANDQ $7, CX
	MOVQ $0xff, AX
	JZ   full
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX

full:
	KMOVW AX, K1
	MOVQ  signs+0(FP), SI
	MOVQ  n+8(FP), CX
	MOVQ  chunks+24(FP), R9
	MOVQ  out+32(FP), DI

tool:
	VPXORQ Z0, Z0, Z0
	MOVQ   R9, R10
	MOVQ   R8, R11

step:
	CMPQ R11, $8
	JLE  last
	VMOVDQU64 (SI), Z1
	VPXORQ    (R10), Z1, Z1
	VPANDNQ   64(R10), Z1, Z2
	VPANDNQ   128(R10), Z1, Z3
	VPANDNQ   192(R10), Z1, Z4
	VPOPCNTQ  Z2, Z2
	VPOPCNTQ  Z3, Z3
	VPOPCNTQ  Z4, Z4
	VPADDQ    Z3, Z2, Z2
	VPADDQ    Z4, Z4, Z4
	VPADDQ    Z2, Z0, Z0
	VPADDQ    Z4, Z0, Z0
	ADDQ      $64, SI
	ADDQ      $256, R10
	SUBQ      $8, R11
	JMP       step

last:
	VMOVDQU64.Z (SI), K1, Z1
	VPXORQ      (R10), Z1, Z1
	VPANDNQ     64(R10), Z1, Z2
	VPANDNQ     128(R10), Z1, Z3
	VPANDNQ     192(R10), Z1, Z4
	VPOPCNTQ    Z2, Z2
	VPOPCNTQ    Z3, Z3
	VPOPCNTQ    Z4, Z4
	VPADDQ      Z3, Z2, Z2
	VPADDQ      Z4, Z4, Z4
	VPADDQ      Z2, Z0, Z0
	VPADDQ      Z4, Z0, Z0
	LEAQ        (SI)(R11*8), SI

	// The eight sums' total.
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDQ        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDQ        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDQ        X1, X0, X0
	VMOVQ         X0, AX
	MOVW          AX, (DI)
	ADDQ          $2, DI
	DECQ          CX
	JNZ           tool
	VZEROUPPER
	RET
