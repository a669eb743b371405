//go:build !amd64

package decode

const haveAVX2 = false

func verticalAVX2(dst *uint8, n int, src *uint8, stride int, k *int32, taps int) {
	panic("decode: verticalAVX2 without AVX2")
}

func horizontalRGBAVX2(dst *uint8, groups int, src *uint8, off *int32, k *int32, kstride int, taps int) {
	panic("decode: horizontalRGBAVX2 without AVX2")
}
