#include "textflag.h"

// func addI8AVX2(d, a, b *byte, n int), and every kernel of this file
// d = a op b for n bytes (a multiple of 32), in 32-byte vectors; the same aliasing rule
// as addF32AVX2 (d may be a or b, nothing else overlaps). One loop, VBINOP, with the
// op's vector instruction: integer sums wrap, signed or unsigned alike (two's
// complement adds both the same way), and so do VPMULLD's low 32 bits of a product;
// VPMAX/VPMIN come signed (S) and unsigned (U); VMULPS/VMULPD round as Go's * does.
// 64-bit integers have no VPMAXQ before AVX-512: MINMAX64 compares (signed, or
// unsigned through a flipped sign bit, Y7) and blends. Labels are local to each TEXT.
#define VBINOP(OP) \
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
	OP (DX), Y0, Y0 \
	OP 32(DX), Y1, Y1 \
	OP 64(DX), Y2, Y2 \
	OP 96(DX), Y3, Y3 \
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
	OP (DX), Y0, Y0 \
	VMOVDQU Y0, (DI) \
	ADDQ $32, SI \
	ADDQ $32, DX \
	ADDQ $32, DI \
	SUBQ $32, CX \
	JMP  loop32 \
done: \
	VZEROUPPER \
	RET

// MINMAX64(HI, LO): d = HI > LO ? a : b, where Y4 and Y5 are a's and b's keys (the
// values xor Y7: 0 for signed, the sign bit for unsigned order), so (Y4, Y5) is max and
// (Y5, Y4) is min; ties take b, which equals a.
#define MINMAX64(HI, LO) \
	MOVQ d+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
loop32: \
	CMPQ CX, $32 \
	JB   done \
	VMOVDQU (SI), Y0 \
	VMOVDQU (DX), Y1 \
	VPXOR Y7, Y0, Y4 \
	VPXOR Y7, Y1, Y5 \
	VPCMPGTQ LO, HI, Y2 \
	VPBLENDVB Y2, Y0, Y1, Y3 \
	VMOVDQU Y3, (DI) \
	ADDQ $32, SI \
	ADDQ $32, DX \
	ADDQ $32, DI \
	SUBQ $32, CX \
	JMP  loop32 \
done: \
	VZEROUPPER \
	RET

// SIGNBITS sets Y7 to the sign bit of every 64-bit lane (unsigned order through a
// signed compare); VPXOR Y7, Y7, Y7 is the signed case.
#define SIGNBITS \
	MOVQ $0x8000000000000000, AX \
	MOVQ AX, X7 \
	VPBROADCASTQ X7, Y7

TEXT ·addI8AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPADDB)

TEXT ·addI32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPADDD)

TEXT ·addI64AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPADDQ)

TEXT ·mulI32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMULLD)

TEXT ·mulF32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VMULPS)

TEXT ·mulF64AVX2(SB), NOSPLIT, $0-32
	VBINOP(VMULPD)

TEXT ·maxI8AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMAXSB)

TEXT ·minI8AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMINSB)

TEXT ·maxU8AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMAXUB)

TEXT ·minU8AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMINUB)

TEXT ·maxI32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMAXSD)

TEXT ·minI32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMINSD)

TEXT ·maxU32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMAXUD)

TEXT ·minU32AVX2(SB), NOSPLIT, $0-32
	VBINOP(VPMINUD)

TEXT ·maxI64AVX2(SB), NOSPLIT, $0-32
	VPXOR Y7, Y7, Y7
	MINMAX64(Y4, Y5)

TEXT ·minI64AVX2(SB), NOSPLIT, $0-32
	VPXOR Y7, Y7, Y7
	MINMAX64(Y5, Y4)

TEXT ·maxU64AVX2(SB), NOSPLIT, $0-32
	SIGNBITS
	MINMAX64(Y4, Y5)

TEXT ·minU64AVX2(SB), NOSPLIT, $0-32
	SIGNBITS
	MINMAX64(Y5, Y4)
