//go:build linux

#include "textflag.h"

// The libjpeg calls of region.go run through regionCall: a C-ABI function,
// entered through purego.SyscallN on the system stack with the address of a
// frame (off-heap memory) in DI. It saves the callee-saved registers and
// the stack pointer in the frame, calls the C function in the frame with
// its four arguments (or, in read mode, calls jpeg_read_scanlines until the
// target scanline), and returns 0. regionErrorExit, installed as libjpeg's
// error_exit, finds the frame through the word that follows the
// jpeg_error_mgr, restores the saved registers and stack pointer and
// returns 1 from regionCall: what setjmp and longjmp do in C callers of
// libjpeg. Only libjpeg's C frames are unwound; no Go code runs between.
//
// Frame layout (bytes): 0 fn, 8..32 four arguments, 40 result, 48 SP,
// 56 BX, 64 BP, 72 R12, 80 R13, 88 R14, 96 R15, 104 mode (0 call,
// 1 read loop), 112 row-pointer array of scanline a2, 120 first scanline,
// 128 target scanline.

#define SAVE \
	MOVQ SP, 48(DI) \
	MOVQ BX, 56(DI) \
	MOVQ BP, 64(DI) \
	MOVQ R12, 72(DI) \
	MOVQ R13, 80(DI) \
	MOVQ R14, 88(DI) \
	MOVQ R15, 96(DI)

#define RESTORE \
	MOVQ 56(DI), BX \
	MOVQ 64(DI), BP \
	MOVQ 72(DI), R12 \
	MOVQ 80(DI), R13 \
	MOVQ 88(DI), R14 \
	MOVQ 96(DI), R15

// output_scanline's offset in jpeg_decompress_struct (libjpeg 6.2 ABI, LP64).
#define OUTPUT_SCANLINE 168

TEXT ·regionCall(SB), NOSPLIT|NOFRAME, $0-0
	SAVE
	MOVQ DI, R12
	SUBQ $8, SP // 16-byte alignment at the call
	CMPQ 104(R12), $1
	JEQ  read
	MOVQ 8(R12), DI
	MOVQ 16(R12), SI
	MOVQ 24(R12), DX
	MOVQ 32(R12), CX
	MOVQ 0(R12), AX
	CALL AX
	MOVQ AX, 40(R12)
	JMP  done

read:
	MOVQ 8(R12), R13 // cinfo
loop:
	MOVL OUTPUT_SCANLINE(R13), AX
	MOVQ 128(R12), CX
	CMPQ AX, CX
	JAE  done
	SUBQ AX, CX              // rows left
	MOVQ AX, R14
	SUBQ 120(R12), R14       // row index in the array
	SHLQ $3, R14
	ADDQ 112(R12), R14
	MOVQ R13, DI
	MOVQ R14, SI
	MOVQ CX, DX
	MOVQ 0(R12), AX
	CALL AX
	MOVQ AX, 40(R12)
	TESTL AX, AX
	JNE  loop                // 0 rows would be a suspension: stop

done:
	ADDQ $8, SP
	MOVQ R12, DI
	RESTORE
	XORL AX, AX
	RET

// regionErrorExit is libjpeg's error_exit(j_common_ptr cinfo).
TEXT ·regionErrorExit(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ 0(DI), AX   // cinfo->err
	MOVQ 168(AX), DI // the frame, stored after the jpeg_error_mgr
	MOVQ 48(DI), SP
	RESTORE
	MOVL $1, AX
	RET

// regionEmitMessage is libjpeg's emit_message(j_common_ptr, int level): a
// warning (level < 0, e.g. corrupt or truncated data) is an error, as
// TurboJPEG's TJFLAG_STOPONWARNING makes it; trace messages are ignored.
TEXT ·regionEmitMessage(SB), NOSPLIT|NOFRAME, $0-0
	TESTL SI, SI
	JS    warning
	RET
warning:
	JMP ·regionErrorExit(SB)

// regionOutputMessage is libjpeg's output_message: nothing is printed.
TEXT ·regionOutputMessage(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func regionAddrs() (call, errorExit, emitMessage, outputMessage uintptr)
TEXT ·regionAddrs(SB), NOSPLIT, $0-32
	LEAQ ·regionCall(SB), AX
	MOVQ AX, call+0(FP)
	LEAQ ·regionErrorExit(SB), AX
	MOVQ AX, errorExit+8(FP)
	LEAQ ·regionEmitMessage(SB), AX
	MOVQ AX, emitMessage+16(FP)
	LEAQ ·regionOutputMessage(SB), AX
	MOVQ AX, outputMessage+24(FP)
	RET
