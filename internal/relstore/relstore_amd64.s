//go:build !race

#include "textflag.h"

// func Uint32(addr *uint32, v uint32)
TEXT ·Uint32(SB),NOSPLIT,$0-12
	MOVQ addr+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET

// func Uint64(addr *uint64, v uint64)
TEXT ·Uint64(SB),NOSPLIT,$0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
