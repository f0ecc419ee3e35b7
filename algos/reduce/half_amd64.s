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
// to float16, to nearest even, in X1.
#define F16SUM \
	VCVTPH2PS (SI), Y0 \
	VCVTPH2PS (DX), Y1 \
	VADDPS Y1, Y0, Y0 \
	VCVTPS2PH $0, Y0, X1

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

// BF16NARROW rounds the 8 float32 in Y0 to bfloat16 in X2: bits + 0x7fff + (bit 16),
// top half, round to nearest even; a NaN keeps its top half with the quiet bit set.
// Uses Y1-Y5 and BF16CONSTS's registers.
#define BF16NARROW \
	VPSRLD $16, Y0, Y1 \
	VPAND Y8, Y1, Y1 \
	VPADDD Y1, Y0, Y2 \
	VPADDD Y9, Y2, Y2 \
	VPSRLD $16, Y2, Y2 \
	VPAND Y10, Y0, Y3 \
	VPCMPGTD Y11, Y3, Y3 \
	VPSRLD $16, Y0, Y4 \
	VPOR Y12, Y4, Y4 \
	VPBLENDVB Y3, Y4, Y2, Y2 \
	VEXTRACTI128 $1, Y2, X5 \
	VPACKUSDW X5, X2, X2

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
	VMOVDQU   X1, (DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       af16

af16done:
	VZEROUPPER
	RET

// func addBF16AVX2(d, a, b *uint16, n int)
// addF16F16C for bfloat16: widen by a shift, add in float32, round as narrowBF16AVX2.
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
	BF16NARROW
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
	MOVQ d1+0(FP), DI
	MOVQ d2+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX

af16nt:
	CMPQ      CX, $8
	JB        af16ntdone
	F16SUM
	VMOVNTDQ  X1, (DI)
	VMOVNTDQ  X1, (R8)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, DI
	ADDQ      $16, R8
	SUBQ      $8, CX
	JMP       af16nt

af16ntdone:
	SFENCE
	VZEROUPPER
	RET

// func addBF16NT2AVX2(d1, d2, a, b *uint16, n int)
// addF16NT2F16C for bfloat16 (addBF16AVX2's arithmetic).
TEXT ·addBF16NT2AVX2(SB), NOSPLIT, $0-40
	MOVQ d1+0(FP), DI
	MOVQ d2+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX
	BF16CONSTS

abfnt:
	CMPQ      CX, $8
	JB        abfntdone
	BF16SUM
	BF16NARROW
	VMOVNTDQ  X2, (DI)
	VMOVNTDQ  X2, (R8)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, DI
	ADDQ      $16, R8
	SUBQ      $8, CX
	JMP       abfnt

abfntdone:
	SFENCE
	VZEROUPPER
	RET
