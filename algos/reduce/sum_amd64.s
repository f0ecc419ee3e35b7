#include "textflag.h"

// DIVLOOP is the loop of divF32AVX2 and divF64AVX2: d (DI) /= Y4 in place, 128 bytes
// (BLOCK elements) at a time, then 32 bytes (VEC elements); CX counts elements.
#define DIVLOOP(DIV, BLOCK, VEC) \
loop128: \
	CMPQ CX, $BLOCK \
	JB   loop32 \
	VMOVUPS (DI), Y0 \
	VMOVUPS 32(DI), Y1 \
	VMOVUPS 64(DI), Y2 \
	VMOVUPS 96(DI), Y3 \
	DIV Y4, Y0, Y0 \
	DIV Y4, Y1, Y1 \
	DIV Y4, Y2, Y2 \
	DIV Y4, Y3, Y3 \
	VMOVUPS Y0, (DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI) \
	ADDQ $128, DI \
	SUBQ $BLOCK, CX \
	JMP  loop128 \
loop32: \
	CMPQ CX, $VEC \
	JB   done \
	VMOVUPS (DI), Y0 \
	DIV Y4, Y0, Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ $32, DI \
	SUBQ $VEC, CX \
	JMP  loop32

// NT2LOOP is the loop of addF32NT2AVX2 and addF64NT2AVX2: per 128-byte block, load a,
// ADD b, MUL by the scale in Y4, and store to d1 (DI) and d2 (R8) with NT; CX counts
// elements, STEP of them per block. Jumps to done when fewer than STEP remain.
#define NT2LOOP(ADD, MUL, NT, STEP) \
loop: \
	CMPQ CX, $STEP \
	JB   done \
	VMOVUPS (SI), Y0 \
	VMOVUPS 32(SI), Y1 \
	VMOVUPS 64(SI), Y2 \
	VMOVUPS 96(SI), Y3 \
	ADD (DX), Y0, Y0 \
	ADD 32(DX), Y1, Y1 \
	ADD 64(DX), Y2, Y2 \
	ADD 96(DX), Y3, Y3 \
	MUL Y4, Y0, Y0 \
	MUL Y4, Y1, Y1 \
	MUL Y4, Y2, Y2 \
	MUL Y4, Y3, Y3 \
	NT Y0, (DI) \
	NT Y1, 32(DI) \
	NT Y2, 64(DI) \
	NT Y3, 96(DI) \
	NT Y0, (R8) \
	NT Y1, 32(R8) \
	NT Y2, 64(R8) \
	NT Y3, 96(R8) \
	ADDQ $128, SI \
	ADDQ $128, DX \
	ADDQ $128, DI \
	ADDQ $128, R8 \
	SUBQ $STEP, CX \
	JMP  loop


// func addF32AVX2(dst, a, b *float32, n int)
// dst[i] = a[i] + b[i] for i < n; n is a multiple of 8. Unaligned loads and stores;
// every load of a 128-byte block happens before its stores, so dst may equal a or b.
TEXT ·addF32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

loop32:
	CMPQ CX, $32
	JB   loop8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VADDPS  64(DX), Y2, Y2
	VADDPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     loop32

loop8:
	CMPQ CX, $8
	JB   done
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     loop8

done:
	VZEROUPPER
	RET

// func addF64AVX2(dst, a, b *float64, n int)
// dst[i] = a[i] + b[i] for i < n; n is a multiple of 4. Same aliasing rule as above.
TEXT ·addF64AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

loop16:
	CMPQ CX, $16
	JB   loop4
	VMOVUPD (SI), Y0
	VMOVUPD 32(SI), Y1
	VMOVUPD 64(SI), Y2
	VMOVUPD 96(SI), Y3
	VADDPD  (DX), Y0, Y0
	VADDPD  32(DX), Y1, Y1
	VADDPD  64(DX), Y2, Y2
	VADDPD  96(DX), Y3, Y3
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $16, CX
	JMP     loop16

loop4:
	CMPQ CX, $4
	JB   done64
	VMOVUPD (SI), Y0
	VADDPD  (DX), Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $4, CX
	JMP     loop4

done64:
	VZEROUPPER
	RET

// func addF32NTAVX2(dst, a, b *float32, n int)
// dst[i] = a[i] + b[i] for i < n with non-temporal stores: the result goes to memory
// without first reading dst's lines into the cache (no read-for-ownership), for an
// output nobody reads again soon. n is a multiple of 32, dst is 32-byte aligned; dst
// may equal a or b (each 128-byte block is loaded before it is stored) but not partly
// overlap them. Ends with SFENCE, so the stores are ordered before whatever publishes
// them.
TEXT ·addF32NTAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

ntloop:
	CMPQ     CX, $32
	JB       ntdone
	VMOVUPS  (SI), Y0
	VMOVUPS  32(SI), Y1
	VMOVUPS  64(SI), Y2
	VMOVUPS  96(SI), Y3
	VADDPS   (DX), Y0, Y0
	VADDPS   32(DX), Y1, Y1
	VADDPS   64(DX), Y2, Y2
	VADDPS   96(DX), Y3, Y3
	VMOVNTPS Y0, (DI)
	VMOVNTPS Y1, 32(DI)
	VMOVNTPS Y2, 64(DI)
	VMOVNTPS Y3, 96(DI)
	ADDQ     $128, SI
	ADDQ     $128, DX
	ADDQ     $128, DI
	SUBQ     $32, CX
	JMP      ntloop

ntdone:
	SFENCE
	VZEROUPPER
	RET

// func addF32NT2AVX2(d1, d2, a, b *float32, n int, s float32)
// d1[i] = d2[i] = (a[i] + b[i]) * s for i < n, both outputs with non-temporal stores
// (see addF32NTAVX2); s is 1 for a sum and 1/W for an average over a power-of-two W,
// where the product is the quotient's bits. n is a multiple of 32; d1 and d2 are
// 32-byte aligned; either may equal a or b. Ends with SFENCE.
TEXT ·addF32NT2AVX2(SB), NOSPLIT, $0-44
	MOVQ         d1+0(FP), DI
	MOVQ         d2+8(FP), R8
	MOVQ         a+16(FP), SI
	MOVQ         b+24(FP), DX
	MOVQ         n+32(FP), CX
	VBROADCASTSS s+40(FP), Y4

	NT2LOOP(VADDPS, VMULPS, VMOVNTPS, 32)

done:
	SFENCE
	VZEROUPPER
	RET

// func addF64NT2AVX2(d1, d2, a, b *float64, n int, s float64)
// addF32NT2AVX2 for float64: n is a multiple of 16; d1 and d2 are 32-byte aligned;
// either may equal a or b. Ends with SFENCE.
TEXT ·addF64NT2AVX2(SB), NOSPLIT, $0-48
	MOVQ         d1+0(FP), DI
	MOVQ         d2+8(FP), R8
	MOVQ         a+16(FP), SI
	MOVQ         b+24(FP), DX
	MOVQ         n+32(FP), CX
	VBROADCASTSD s+40(FP), Y4

	NT2LOOP(VADDPD, VMULPD, VMOVNTPD, 16)

done:
	SFENCE
	VZEROUPPER
	RET

// func divF32AVX2(d *float32, n int, w float32)
// d[i] /= w for i < n (Avg's Finish); n is a multiple of 8. VDIVPS rounds each quotient
// as Go's scalar division does, so the bits are the same, four times the elements per
// instruction.
TEXT ·divF32AVX2(SB), NOSPLIT, $0-20
	MOVQ         d+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS w+16(FP), Y4

	DIVLOOP(VDIVPS, 32, 8)

done:
	VZEROUPPER
	RET

// func divF64AVX2(d *float64, n int, w float64)
// divF32AVX2 for float64; n is a multiple of 4.
TEXT ·divF64AVX2(SB), NOSPLIT, $0-24
	MOVQ         d+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSD w+16(FP), Y4

	DIVLOOP(VDIVPD, 16, 4)

done:
	VZEROUPPER
	RET
