#include "textflag.h"

// Max and min with Go's semantics, 8 float32 or 4 float64 lanes at a time. VMAXPS
// alone returns its second operand when either is NaN and when both are zeros, so:
//   r = a > b ? a : b          (VMAXPS; VMINPS for min with a < b)
//   r = (a == b) ? a&b : r     (max(-0, +0) = +0; min uses a|b, giving -0)
//   r = isNaN(a) ? a : r       (a NaN in b already came through)
// The loop needs n to be a multiple of the lane count.

#define MINMAX(MOV, OP, CMP, BITS, BLEND, STEP) \
	MOV   (SI), Y0      \
	MOV   (DX), Y1      \
	OP    Y1, Y0, Y2    \
	CMP   $0, Y1, Y0, Y3 \
	BITS  Y1, Y0, Y4    \
	BLEND Y3, Y4, Y2, Y2 \
	CMP   $3, Y0, Y0, Y5 \
	BLEND Y5, Y0, Y2, Y2 \
	MOV   Y2, (DI)      \
	ADDQ  $32, SI       \
	ADDQ  $32, DX       \
	ADDQ  $32, DI       \
	SUBQ  $STEP, CX

// func maxF32AVX2(dst, a, b *float32, n int)
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
maxf32:
	CMPQ CX, $8
	JB   maxf32done
	MINMAX(VMOVUPS, VMAXPS, VCMPPS, VANDPS, VBLENDVPS, 8)
	JMP  maxf32
maxf32done:
	VZEROUPPER
	RET

// func minF32AVX2(dst, a, b *float32, n int)
TEXT ·minF32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
minf32:
	CMPQ CX, $8
	JB   minf32done
	MINMAX(VMOVUPS, VMINPS, VCMPPS, VORPS, VBLENDVPS, 8)
	JMP  minf32
minf32done:
	VZEROUPPER
	RET

// func maxF64AVX2(dst, a, b *float64, n int)
TEXT ·maxF64AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
maxf64:
	CMPQ CX, $4
	JB   maxf64done
	MINMAX(VMOVUPD, VMAXPD, VCMPPD, VANDPD, VBLENDVPD, 4)
	JMP  maxf64
maxf64done:
	VZEROUPPER
	RET

// func minF64AVX2(dst, a, b *float64, n int)
TEXT ·minF64AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
minf64:
	CMPQ CX, $4
	JB   minf64done
	MINMAX(VMOVUPD, VMINPD, VCMPPD, VORPD, VBLENDVPD, 4)
	JMP  minf64
minf64done:
	VZEROUPPER
	RET
