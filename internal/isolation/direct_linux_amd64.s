#include "textflag.h"

// func vforkSyscall(trap, a1, a2 uintptr) (r1, errno uintptr)
//
// A clone that shares our memory and suspends this thread until the child
// calls execve or exits (CLONE_VM|CLONE_VFORK): the child returns from the
// system call first, on this very stack. Its RET would pop the return
// address and its next call would write over that slot, so the address is
// taken off the stack into a register (each task has its own registers)
// before the call, and put back by each of the two after it. Arguments are
// read before the POPQ and results written after the PUSHQ, where the
// assembler's FP offsets hold.
TEXT ·vforkSyscall(SB),NOSPLIT|NOFRAME,$0-40
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	XORQ	R9, R9
	MOVQ	trap+0(FP), AX
	POPQ	R12
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+24(FP)
	NEGQ	AX
	MOVQ	AX, errno+32(FP)
	RET
ok:
	MOVQ	AX, r1+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
