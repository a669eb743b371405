#include "textflag.h"

// func verticalAVX2(dst *uint8, n int, src *uint8, stride int, k *int32, taps int)
TEXT ·verticalAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ src+16(FP), SI
	MOVQ stride+24(FP), DX
	MOVQ k+32(FP), R8
	MOVQ taps+40(FP), R9
	MOVL $0x200000, AX // 1 << (precisionBits-1)
	MOVQ AX, X7
	VPBROADCASTD X7, Y7
	SHRQ $3, CX
	JZ   done

loop:
	VMOVDQA Y7, Y0
	MOVQ    SI, R10
	MOVQ    R8, R11
	MOVQ    R9, R12

tap:
	VPMOVZXBD    (R10), Y1
	VPBROADCASTD (R11), Y2
	VPMULLD      Y2, Y1, Y1
	VPADDD       Y1, Y0, Y0
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         R12
	JNZ          tap

	VPSRAD       $22, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKSSDW    X1, X0, X0
	VPACKUSWB    X0, X0, X0
	MOVQ         X0, (DI)
	ADDQ         $8, SI
	ADDQ         $8, DI
	DECQ         CX
	JNZ          loop

done:
	VZEROUPPER
	RET
