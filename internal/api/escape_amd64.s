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
DATA escConsts<>+48(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA escConsts<>+56(SB)/8, $0x0a0a0a0a0a0a0a0a
GLOBL escConsts<>(SB), RODATA|NOPTR, $64

// AVX2_CONSTS loads the three comparands into Y1 (0x20), Y2 ('"') and Y3
// ('\\'); AVX2_SPECIALS sets in AX a bit for each byte of Y0 to escape or
// of 0x80 and above (Y4-Y6 are scratch).
#define AVX2_CONSTS \
	VPBROADCASTB escConsts<>+0(SB), Y1; \
	VPBROADCASTB escConsts<>+16(SB), Y2; \
	VPBROADCASTB escConsts<>+32(SB), Y3

#define AVX2_SPECIALS \
	VPCMPGTB Y0, Y1, Y4; \
	VPCMPEQB Y0, Y2, Y5; \
	VPCMPEQB Y0, Y3, Y6; \
	VPOR Y5, Y4, Y4; \
	VPOR Y6, Y4, Y4; \
	VPMOVMSKB Y4, AX

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

	AVX2_CONSTS
	MOVQ BX, CX
	SUBQ $32, CX
	JB avxdone

avx32:
	CMPQ DX, CX
	JA avxdone
	VMOVDQU (SI)(DX*1), Y0
	AVX2_SPECIALS
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

// func escapeRun(dst, src []byte) (nd, ns int)
//
// Copies the start of src into dst as it goes into a JSON string, as long
// as it is plain bytes and newlines (each written as the two bytes \n):
// ns bytes of src became nd bytes of dst. It stops before any other byte
// to escape and any byte of 0x80 or above (the caller's to handle), when
// fewer than 32 bytes of src are left, or fewer than 64 of dst: the 32
// bytes a step are stored whole, the plain ones among them kept. AVX2
// only: without it, nothing is copied and the caller's scan does it all.
TEXT ·escapeRun(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), R8
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), BX
	XORQ DX, DX
	XORQ CX, CX
	CMPB ·useAVX2(SB), $0
	JEQ none

	AVX2_CONSTS
	SUBQ $32, BX
	JB out
	SUBQ $64, R8
	JB out

step:
	CMPQ DX, BX
	JA out
	CMPQ CX, R8
	JA out
	VMOVDQU (SI)(DX*1), Y0
	AVX2_SPECIALS
	VMOVDQU Y0, (DI)(CX*1)
	TESTL AX, AX
	JNZ special
	ADDQ $32, DX
	ADDQ $32, CX
	JMP step

special:
	BSFL AX, AX
	ADDQ AX, DX
	ADDQ AX, CX
	CMPB (SI)(DX*1), $0x0a
	JNE out
	MOVB $0x5c, (DI)(CX*1)
	MOVB $0x6e, 1(DI)(CX*1)
	ADDQ $2, CX
	INCQ DX
	JMP step

out:
	VZEROUPPER

none:
	MOVQ CX, nd+48(FP)
	MOVQ DX, ns+56(FP)
	RET
