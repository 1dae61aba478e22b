#include "textflag.h"

// func dotAVX2(codes *int8, query *float32, n int) float32
//
// The dot product of n int8 codes with n float32s, n a multiple of 8:
// each 8 codes are sign-extended to int32, converted to float32 and
// multiplied into one of four accumulators (FMA), summed at the end.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ codes+0(FP), SI
	MOVQ query+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

by32:
	CMPQ CX, $32
	JLT  by8
	VPMOVSXBD (SI), Y4
	VPMOVSXBD 8(SI), Y5
	VPMOVSXBD 16(SI), Y6
	VPMOVSXBD 24(SI), Y7
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $32, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  by32

by8:
	CMPQ CX, $8
	JLT  sum
	VPMOVSXBD (SI), Y4
	VCVTDQ2PS Y4, Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  by8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
