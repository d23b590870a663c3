#include "textflag.h"

// The bytes a JSON string cannot hold as they are: below 0x20, '"', '\\',
// and (for the UTF-8 checks in Go) 0x80 and above. A signed compare does
// the first and the last at once: 0x20 > b as int8 holds exactly for
// 0x00..0x1f and 0x80..0xff.
DATA escConsts<>+0(SB)/8, $0x2020202020202020
DATA escConsts<>+8(SB)/8, $0x2020202020202020
DATA escConsts<>+16(SB)/8, $0x2222222222222222
DATA escConsts<>+24(SB)/8, $0x2222222222222222
DATA escConsts<>+32(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA escConsts<>+40(SB)/8, $0x5c5c5c5c5c5c5c5c
GLOBL escConsts<>(SB), RODATA|NOPTR, $48

// func plainRun(p []byte) int
//
// The length of the run of bytes at the start of p that need no escape.
// 32 bytes a step with AVX2 where the CPU has it (useAVX2), else 16 with
// SSE2 (every amd64 has it); the last few bytes one by one.
TEXT ·plainRun(SB), NOSPLIT, $0-32
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), BX
	XORQ DX, DX
	CMPB ·useAVX2(SB), $0
	JEQ sse2

	VPBROADCASTB escConsts<>+0(SB), Y1
	VPBROADCASTB escConsts<>+16(SB), Y2
	VPBROADCASTB escConsts<>+32(SB), Y3
	MOVQ BX, CX
	SUBQ $32, CX
	JB avxdone

avx32:
	CMPQ DX, CX
	JA avxdone
	VMOVDQU (SI)(DX*1), Y0
	VPCMPGTB Y0, Y1, Y4
	VPCMPEQB Y0, Y2, Y5
	VPCMPEQB Y0, Y3, Y6
	VPOR Y5, Y4, Y4
	VPOR Y6, Y4, Y4
	VPMOVMSKB Y4, AX
	TESTL AX, AX
	JNZ avxfound
	ADDQ $32, DX
	JMP avx32

avxfound:
	VZEROUPPER
	BSFL AX, AX
	ADDQ AX, DX
	MOVQ DX, ret+24(FP)
	RET

avxdone:
	VZEROUPPER

sse2:
	MOVOU escConsts<>+0(SB), X1
	MOVOU escConsts<>+16(SB), X2
	MOVOU escConsts<>+32(SB), X3
	MOVQ BX, CX
	SUBQ $16, CX
	JB tail

sse16:
	CMPQ DX, CX
	JA tail
	MOVOU (SI)(DX*1), X0
	MOVO X1, X4
	PCMPGTB X0, X4
	MOVO X0, X5
	PCMPEQB X2, X5
	PCMPEQB X3, X0
	POR X5, X4
	POR X0, X4
	PMOVMSKB X4, AX
	TESTL AX, AX
	JNZ ssefound
	ADDQ $16, DX
	JMP sse16

ssefound:
	BSFL AX, AX
	ADDQ AX, DX
	MOVQ DX, ret+24(FP)
	RET

tail:
	CMPQ DX, BX
	JAE done
	MOVBLZX (SI)(DX*1), AX
	CMPL AX, $0x20
	JB done
	CMPL AX, $0x22
	JEQ done
	CMPL AX, $0x5c
	JEQ done
	CMPL AX, $0x80
	JAE done
	INCQ DX
	JMP tail

done:
	MOVQ DX, ret+24(FP)
	RET
