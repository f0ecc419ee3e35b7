#include "textflag.h"

// func addI8AVX2(d, a, b *byte, n int), addI32AVX2, addI64AVX2
// d = a + b, wrapping, for n bytes (a multiple of 32) of 1-, 4- or 8-byte integers,
// signed or unsigned alike (two's complement adds both the same way). Same aliasing
// rule as addF32AVX2. One loop, INTSUM, with the width's add instruction; labels are
// local to each TEXT.
#define INTSUM(ADD) \
	MOVQ d+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
loop128: \
	CMPQ CX, $128 \
	JB   loop32 \
	VMOVDQU (SI), Y0 \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU 64(SI), Y2 \
	VMOVDQU 96(SI), Y3 \
	ADD (DX), Y0, Y0 \
	ADD 32(DX), Y1, Y1 \
	ADD 64(DX), Y2, Y2 \
	ADD 96(DX), Y3, Y3 \
	VMOVDQU Y0, (DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DX \
	ADDQ $128, DI \
	SUBQ $128, CX \
	JMP  loop128 \
loop32: \
	CMPQ CX, $32 \
	JB   done \
	VMOVDQU (SI), Y0 \
	ADD (DX), Y0, Y0 \
	VMOVDQU Y0, (DI) \
	ADDQ $32, SI \
	ADDQ $32, DX \
	ADDQ $32, DI \
	SUBQ $32, CX \
	JMP  loop32 \
done: \
	VZEROUPPER \
	RET

TEXT ·addI8AVX2(SB), NOSPLIT, $0-32
	INTSUM(VPADDB)

TEXT ·addI32AVX2(SB), NOSPLIT, $0-32
	INTSUM(VPADDD)

TEXT ·addI64AVX2(SB), NOSPLIT, $0-32
	INTSUM(VPADDQ)
