package decode

import "golang.org/x/sys/cpu"

// haveAVX2 selects the AVX2 kernels. They compute the same integer sums as
// the scalar code (32-bit products, Pillow's rounding and clip8 through
// saturating packs), so the bytes are identical.
var haveAVX2 = cpu.X86.HasAVX2

// verticalAVX2 writes n&^7 bytes of dst: for each byte i, clip8((half +
// Σ_t src[t*stride+i]·k[t]) >> precisionBits) over taps ≥ 1 rows of src.
//
//go:noescape
func verticalAVX2(dst *uint8, n int, src *uint8, stride int, k *int32, taps int)

// horizontalRGBAVX2 resamples groups×8 RGB output pixels of one row with the
// padded taps, eight pixels per step (one gather per tap brings R, G and B):
// off holds each pixel's first source byte, k the weights tap-major with
// kstride bytes between taps. It writes 24 bytes per group and 4 scratch
// bytes after them, and reads one byte past each pixel's last tap.
//
//go:noescape
func horizontalRGBAVX2(dst *uint8, groups int, src *uint8, off *int32, k *int32, kstride int, taps int)
