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

// byte 0xFF in every dword, 255 and 0 for clip8, and the shuffle that packs
// eight RGBx dwords into 24 RGB bytes (12 per 128-bit lane, then zeros)
DATA rgbShuf<>+0(SB)/8, $0x0908060504020100
DATA rgbShuf<>+8(SB)/8, $0x808080800E0D0C0A
DATA rgbShuf<>+16(SB)/8, $0x0908060504020100
DATA rgbShuf<>+24(SB)/8, $0x808080800E0D0C0A
GLOBL rgbShuf<>(SB), RODATA|NOPTR, $32

// func horizontalRGBAVX2(dst *uint8, groups int, src *uint8, off *int32, k *int32, kstride int, taps int)
//
// For each of groups×8 output pixels j: off[j] is the byte offset in src of
// its first tap, k[t*kstride/4 + j] its t-th weight; writes 24 bytes per
// group plus 4 scratch bytes after the last one. Gathers read 4 bytes at
// src+off[j]+3t, one beyond the last tap's pixel.
TEXT ·horizontalRGBAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ groups+8(FP), CX
	MOVQ src+16(FP), SI
	MOVQ off+24(FP), BX
	MOVQ k+32(FP), R8
	MOVQ kstride+40(FP), DX
	MOVQ taps+48(FP), R9
	MOVL $0x200000, AX // 1 << (precisionBits-1)
	MOVQ AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0xFF, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15 // 0xFF: mask and clip8's maximum
	VPXOR Y13, Y13, Y13   // 0
	VMOVDQU rgbShuf<>(SB), Y12
	TESTQ CX, CX
	JZ    hdone

hloop:
	VMOVDQU (BX), Y4
	VMOVDQA Y14, Y0
	VMOVDQA Y14, Y1
	VMOVDQA Y14, Y2
	MOVQ    SI, R12
	MOVQ    R8, R10
	MOVQ    R9, R11

htap:
	VPCMPEQD   Y3, Y3, Y3
	VPGATHERDD Y3, (R12)(Y4*1), Y5
	VMOVDQU    (R10), Y6
	VPAND      Y5, Y15, Y7
	VPMULLD    Y6, Y7, Y7
	VPADDD     Y7, Y0, Y0
	VPSRLD     $8, Y5, Y8
	VPAND      Y8, Y15, Y8
	VPMULLD    Y6, Y8, Y8
	VPADDD     Y8, Y1, Y1
	VPSRLD     $16, Y5, Y9
	VPAND      Y9, Y15, Y9
	VPMULLD    Y6, Y9, Y9
	VPADDD     Y9, Y2, Y2
	ADDQ       $3, R12
	ADDQ       DX, R10
	DECQ       R11
	JNZ        htap

	VPSRAD  $22, Y0, Y0
	VPSRAD  $22, Y1, Y1
	VPSRAD  $22, Y2, Y2
	VPMAXSD Y13, Y0, Y0
	VPMAXSD Y13, Y1, Y1
	VPMAXSD Y13, Y2, Y2
	VPMINSD Y15, Y0, Y0
	VPMINSD Y15, Y1, Y1
	VPMINSD Y15, Y2, Y2
	VPSLLD  $8, Y1, Y1
	VPSLLD  $16, Y2, Y2
	VPOR    Y1, Y0, Y0
	VPOR    Y2, Y0, Y0
	VPSHUFB Y12, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VMOVDQU X0, (DI)
	VMOVDQU X1, 12(DI)

	ADDQ $32, BX
	ADDQ $32, R8
	ADDQ $24, DI
	DECQ CX
	JNZ  hloop

hdone:
	VZEROUPPER
	RET
