#include "textflag.h"

// func addI8AVX2(d, a, b *byte, n int), and every kernel of this file
// d = a op b for n bytes (a multiple of 32), in 32-byte vectors; the same aliasing rule
// as addF32AVX2 (d may be a or b, nothing else overlaps). One loop, VBINOP, with the
// op's vector instruction: integer sums wrap, signed or unsigned alike (two's
// complement adds both the same way), and so do VPMULLD's low 32 bits of a product;
// VPMAX/VPMIN come signed (S) and unsigned (U); VMULPS/VMULPD round as Go's * does.
// The ops with no single AVX2 instruction run VLOOP with a body: 64-bit max and min
// (MAX64, MIN64: compare, signed or through a flipped sign bit, and blend), and 64- and
// 8-bit products (MUL64, MUL8). Labels are local to each TEXT.
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

// VLOOP(BODY) is the loop of the ops that take several instructions: Y0 = a's and Y1 =
// b's next 32 bytes, BODY leaves d's in Y2, 32 bytes at a time.
#define VLOOP(BODY) \
	MOVQ d+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
loop32: \
	CMPQ CX, $32 \
	JB   done \
	VMOVDQU (SI), Y0 \
	VMOVDQU (DX), Y1 \
	BODY \
	VMOVDQU Y2, (DI) \
	ADDQ $32, SI \
	ADDQ $32, DX \
	ADDQ $32, DI \
	SUBQ $32, CX \
	JMP  loop32 \
done: \
	VZEROUPPER \
	RET

// MAX64 and MIN64: Y4 and Y5 are a's and b's keys (the values xor Y7: 0 for signed
// order, the sign bit for unsigned), and d = a where a's key is the greater (the
// smaller), else b; ties take b, which equals a.
#define MAX64 \
	VPXOR Y7, Y0, Y4 \
	VPXOR Y7, Y1, Y5 \
	VPCMPGTQ Y5, Y4, Y3 \
	VPBLENDVB Y3, Y0, Y1, Y2

#define MIN64 \
	VPXOR Y7, Y0, Y4 \
	VPXOR Y7, Y1, Y5 \
	VPCMPGTQ Y4, Y5, Y3 \
	VPBLENDVB Y3, Y0, Y1, Y2

// MUL64 is the low 64 bits of a 64x64-bit product, signed or unsigned alike (AVX2 has
// no VPMULLQ): aL bL + ((aH bL + aL bH) << 32), with VPMULUDQ's 32x32 -> 64-bit
// products of the lanes' low halves.
#define MUL64 \
	VPMULUDQ Y1, Y0, Y2 \
	VPSRLQ $32, Y0, Y3 \
	VPMULUDQ Y1, Y3, Y3 \
	VPSRLQ $32, Y1, Y4 \
	VPMULUDQ Y4, Y0, Y4 \
	VPADDQ Y4, Y3, Y3 \
	VPSLLQ $32, Y3, Y3 \
	VPADDQ Y3, Y2, Y2

// MUL8 is the low 8 bits of byte products (AVX2 has no byte multiply): VPMULLW's low
// 16 bits of each word's product hold the even byte's, and the odd bytes, shifted down,
// multiply the same way; Y7 = 0x00ff in every word.
#define MUL8 \
	VPMULLW Y1, Y0, Y2 \
	VPAND Y7, Y2, Y2 \
	VPSRLW $8, Y0, Y3 \
	VPSRLW $8, Y1, Y4 \
	VPMULLW Y4, Y3, Y3 \
	VPSLLW $8, Y3, Y3 \
	VPOR Y3, Y2, Y2

// SIGNBITS sets Y7 to the sign bit of every 64-bit lane (unsigned order through a
// signed compare); VPXOR Y7, Y7, Y7 is the signed case.
#define SIGNBITS \
	MOVQ $0x8000000000000000, AX \
	MOVQ AX, X7 \
	VPBROADCASTQ X7, Y7

// LOWBYTES sets Y7 to 0x00ff in every 16-bit lane (MUL8's mask).
#define LOWBYTES \
	MOVL $0x00ff00ff, AX \
	VMOVD AX, X7 \
	VPBROADCASTD X7, Y7

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
	VLOOP(MAX64)

TEXT ·minI64AVX2(SB), NOSPLIT, $0-32
	VPXOR Y7, Y7, Y7
	VLOOP(MIN64)

TEXT ·maxU64AVX2(SB), NOSPLIT, $0-32
	SIGNBITS
	VLOOP(MAX64)

TEXT ·minU64AVX2(SB), NOSPLIT, $0-32
	SIGNBITS
	VLOOP(MIN64)

TEXT ·mulI64AVX2(SB), NOSPLIT, $0-32
	VLOOP(MUL64)

TEXT ·mulI8AVX2(SB), NOSPLIT, $0-32
	LOWBYTES
	VLOOP(MUL8)
