//go:build linux

#include "textflag.h"

// func fcallAddr() uintptr
TEXT ·fcallAddr(SB), NOSPLIT, $0-8
	LEAQ ·fcallTrampoline(SB), AX
	MOVQ AX, ret+0(FP)
	RET

// fcallTrampoline is a C-ABI function entered through runtime.asmcgocall on
// the system stack with the address of an fcall in DI: it calls fcall.fn
// with the nine words of fcall.args (six in registers, three on the stack)
// and stores the result in fcall.r.
TEXT ·fcallTrampoline(SB), NOSPLIT|NOFRAME, $0-0
	PUSHQ R12 // callee-saved; SP is now 16-byte aligned
	MOVQ DI, R12
	SUBQ $32, SP
	MOVQ 56(R12), AX
	MOVQ AX, 0(SP)
	MOVQ 64(R12), AX
	MOVQ AX, 8(SP)
	MOVQ 72(R12), AX
	MOVQ AX, 16(SP)
	MOVQ 8(R12), DI
	MOVQ 16(R12), SI
	MOVQ 24(R12), DX
	MOVQ 32(R12), CX
	MOVQ 40(R12), R8
	MOVQ 48(R12), R9
	MOVQ 0(R12), R10
	XORL AX, AX
	CALL R10
	MOVQ AX, 80(R12)
	ADDQ $32, SP
	POPQ R12
	RET
