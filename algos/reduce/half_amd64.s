#include "textflag.h"

// BF16SUM widens the 8 bfloat16 at (SI) and at (DX) and leaves their float32 sum in
// Y0 (Y1 scratch).
#define BF16SUM \
	VPMOVZXWD (SI), Y0 \
	VPSLLD $16, Y0, Y0 \
	VPMOVZXWD (DX), Y1 \
	VPSLLD $16, Y1, Y1 \
	VADDPS Y1, Y0, Y0

// F16SUM adds the 8 float16 at (SI) and at (DX) in float32 and leaves the sum rounded
// to float16, to nearest even, in X2.
#define F16SUM \
	VCVTPH2PS (SI), Y0 \
	VCVTPH2PS (DX), Y1 \
	VADDPS Y1, Y0, Y0 \
	VCVTPS2PH $0, Y0, X2

// BF16CONSTS loads narrowBF16's constants: Y8 = 1, Y9 = 0x7fff, Y10 the abs mask, Y11
// +Inf, Y12 the quiet bit (0x40 in the top half).
#define BF16CONSTS \
	MOVL $1, AX \
	VMOVD AX, X8 \
	VPBROADCASTD X8, Y8 \
	MOVL $0x7fff, AX \
	VMOVD AX, X9 \
	VPBROADCASTD X9, Y9 \
	MOVL $0x7fffffff, AX \
	VMOVD AX, X10 \
	VPBROADCASTD X10, Y10 \
	MOVL $0x7f800000, AX \
	VMOVD AX, X11 \
	VPBROADCASTD X11, Y11 \
	MOVL $0x40, AX \
	VMOVD AX, X12 \
	VPBROADCASTD X12, Y12

// BF16RNE rounds the 8 float32 in Y0 to bfloat16, one per 32-bit lane of Y2: bits +
// 0x7fff + (bit 16), top half, round to nearest even (Y1 scratch). It serves every
// float32 whose NaNs have 16 zero low bits, where the bias cannot carry into a NaN's
// top half: a sum or product of widened bfloat16 values (widening leaves those bits
// zero, and x86 returns an operand's NaN, quieted, or the default NaN 0xffc00000,
// whose quiet bit the scalar path would have set), and such a value times 1/W. BF16ROUND
// adds the case of any NaN, which keeps its top half with the quiet bit set (Y3-Y4).
// BF16PACK packs the lanes into X2 (Y5); BF16NARROW is BF16ROUND and BF16PACK. They use
// BF16CONSTS's registers.
#define BF16RNE \
	VPSRLD $16, Y0, Y1 \
	VPAND Y8, Y1, Y1 \
	VPADDD Y1, Y0, Y2 \
	VPADDD Y9, Y2, Y2 \
	VPSRLD $16, Y2, Y2

#define BF16ROUND \
	BF16RNE \
	VPAND Y10, Y0, Y3 \
	VPCMPGTD Y11, Y3, Y3 \
	VPSRLD $16, Y0, Y4 \
	VPOR Y12, Y4, Y4 \
	VPBLENDVB Y3, Y4, Y2, Y2

#define BF16PACK \
	VEXTRACTI128 $1, Y2, X5 \
	VPACKUSDW X5, X2, X2

#define BF16NARROW \
	BF16ROUND \
	BF16PACK

// F16SCALE and BF16SCALE finish an average in registers: the sum, already rounded to
// the 16-bit type (X2 for float16; for bfloat16 Y2's lanes, before BF16PACK), widens
// again exactly, multiplies by Y6 (1/W for a power-of-two W, which gives the
// quotient's bits) and rounds again: the two roundings of Apply3 followed by Finish.
// Both roundings of bfloat16 are BF16RNE's.
#define F16SCALE \
	VCVTPH2PS X2, Y0 \
	VMULPS Y6, Y0, Y0 \
	VCVTPS2PH $0, Y0, X2

#define BF16SCALE \
	VPSLLD $16, Y2, Y0 \
	VMULPS Y6, Y0, Y0 \
	BF16RNE


// NT2(BODY) is the two-output loop: BODY leaves the next 8 results in X2 (a sum, and
// for an average its scaled sum), which go to d1 (DI) and d2 (R8) past the caches. The
// bodies: F16SUM, BF16SUMNT, and the averages F16AVG and BF16AVG (the sum, then its
// SCALE).
#define NT2(BODY) \
	MOVQ d1+0(FP), DI \
	MOVQ d2+8(FP), R8 \
	MOVQ a+16(FP), SI \
	MOVQ b+24(FP), DX \
	MOVQ n+32(FP), CX \
loop: \
	CMPQ      CX, $8 \
	JB        done \
	BODY \
	VMOVNTDQ  X2, (DI) \
	VMOVNTDQ  X2, (R8) \
	ADDQ      $16, SI \
	ADDQ      $16, DX \
	ADDQ      $16, DI \
	ADDQ      $16, R8 \
	SUBQ      $8, CX \
	JMP       loop \
done: \
	SFENCE \
	VZEROUPPER \
	RET

#define F16AVG \
	F16SUM \
	F16SCALE

#define BF16SUMNT \
	BF16SUM \
	BF16RNE \
	BF16PACK

#define BF16AVG \
	BF16SUM \
	BF16RNE \
	BF16SCALE \
	BF16PACK

// func widenF16F16C(dst *float32, src *uint16, n int)
// dst[i] = float32(src[i]) for i < n (n a multiple of 8), exact (VCVTPH2PS).
TEXT ·widenF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

wf16:
	CMPQ      CX, $8
	JB        wf16done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       wf16

wf16done:
	VZEROUPPER
	RET

// func narrowF16F16C(dst *uint16, src *float32, n int)
// dst[i] = float16(src[i]), round to nearest even (imm 0), for i < n (a multiple of 8).
TEXT ·narrowF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

nf16:
	CMPQ      CX, $8
	JB        nf16done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       nf16

nf16done:
	VZEROUPPER
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
// dst[i] = float32 with src[i] as its top half, for i < n (a multiple of 8).
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

wbf:
	CMPQ      CX, $8
	JB        wbfdone
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       wbf

wbfdone:
	VZEROUPPER
	RET

// func narrowBF16AVX2(dst *uint16, src *float32, n int)
// dst[i] = bfloat16(src[i]) for i < n (a multiple of 8): bits + 0x7fff + (bit 16), top
// half, round to nearest even; a NaN keeps its top half with the quiet bit (0x40) set.
// The same arithmetic as Float32ToBFloat16, eight lanes at a time.
TEXT ·narrowBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	BF16CONSTS

nbf:
	CMPQ         CX, $8
	JB           nbfdone
	VMOVDQU      (SI), Y0
	BF16NARROW
	VMOVDQU      X2, (DI)
	ADDQ         $32, SI
	ADDQ         $16, DI
	SUBQ         $8, CX
	JMP          nbf

nbfdone:
	VZEROUPPER
	RET

// func addF16F16C(d, a, b *uint16, n int)
// d[i] = float16(float32(a[i]) + float32(b[i])) for i < n (a multiple of 8): the widen,
// the float32 add and the rounding of halfKernel's three passes, in registers. Each
// 8-element load happens before its store, so d may equal a or b.
TEXT ·addF16F16C(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

af16:
	CMPQ      CX, $8
	JB        af16done
	F16SUM
	VMOVDQU   X2, (DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       af16

af16done:
	VZEROUPPER
	RET

// func addBF16AVX2(d, a, b *uint16, n int)
// addF16F16C for bfloat16: widen by a shift, add in float32, round as narrowBF16AVX2
// does (BF16RNE: a sum of widened bfloat16 needs no NaN case).
TEXT ·addBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ         d+0(FP), DI
	MOVQ         a+8(FP), SI
	MOVQ         b+16(FP), DX
	MOVQ         n+24(FP), CX
	BF16CONSTS

abf:
	CMPQ         CX, $8
	JB           abfdone
	BF16SUM
	BF16RNE
	BF16PACK
	VMOVDQU      X2, (DI)
	ADDQ         $16, SI
	ADDQ         $16, DX
	ADDQ         $16, DI
	SUBQ         $8, CX
	JMP          abf

abfdone:
	VZEROUPPER
	RET

// func addF16NT2F16C(d1, d2, a, b *uint16, n int)
// addF16F16C with both outputs written by non-temporal stores (see addF32NTAVX2): the
// two-rank ring's fused step for float16 sums. n is a multiple of 8; d1 and d2 are
// 16-byte aligned; either may equal a or b. Ends with SFENCE.
TEXT ·addF16NT2F16C(SB), NOSPLIT, $0-40
	NT2(F16SUM)

// func addBF16NT2AVX2(d1, d2, a, b *uint16, n int)
// addF16NT2F16C for bfloat16 (addBF16AVX2's arithmetic).
TEXT ·addBF16NT2AVX2(SB), NOSPLIT, $0-40
	BF16CONSTS
	NT2(BF16SUMNT)

// func avgF16NT2F16C(d1, d2, a, b *uint16, n int, s float32)
// addF16NT2F16C for an average: the rounded sum times s (F16SCALE).
TEXT ·avgF16NT2F16C(SB), NOSPLIT, $0-44
	VBROADCASTSS s+40(FP), Y6
	NT2(F16AVG)

// func avgBF16NT2AVX2(d1, d2, a, b *uint16, n int, s float32)
// addBF16NT2AVX2 for an average (BF16SCALE).
TEXT ·avgBF16NT2AVX2(SB), NOSPLIT, $0-44
	VBROADCASTSS s+40(FP), Y6
	BF16CONSTS
	NT2(BF16AVG)
