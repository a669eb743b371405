package decode

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// refResize is the plain Pillow algorithm on the unpadded taps (horizontal
// pass into an 8-bit intermediate, then vertical, clip8 everywhere): the
// reference the padded, unclipped and AVX2 kernels must match byte for byte.
func refResize(src *Image, w, h int) *Image {
	const half = 1 << (precisionBits - 1)
	nc := src.C
	mid := src
	if w != src.W {
		c := newCoeffs(src.W, w)
		mid = &Image{}
		mid.Reset(w, src.H, nc)
		for y := 0; y < src.H; y++ {
			for xx := 0; xx < w; xx++ {
				xmin, xn := int(c.bounds[2*xx]), int(c.bounds[2*xx+1])
				for ch := 0; ch < nc; ch++ {
					s := int32(half)
					for i := 0; i < xn; i++ {
						s += int32(src.Pix[(y*src.W+xmin+i)*nc+ch]) * c.k[xx*c.ksize+i]
					}
					mid.Pix[(y*w+xx)*nc+ch] = clipFixed(s)
				}
			}
		}
	}
	if h == mid.H {
		return mid
	}
	c := newCoeffs(mid.H, h)
	out := &Image{}
	out.Reset(w, h, nc)
	for yy := 0; yy < h; yy++ {
		ymin, yn := int(c.bounds[2*yy]), int(c.bounds[2*yy+1])
		for i := 0; i < w*nc; i++ {
			s := int32(half)
			for j := 0; j < yn; j++ {
				s += int32(mid.Pix[(ymin+j)*w*nc+i]) * c.k[yy*c.ksize+j]
			}
			out.Pix[yy*w*nc+i] = clipFixed(s)
		}
	}
	return out
}

// TestResizeKernels checks every inner-loop variant (fixed tap counts 2–5
// and the generic one, clipped and unclipped, AVX2 and scalar) against the
// plain algorithm, on noise and on saturated images (the unclipped kernels'
// bound), at reductions from 1× to 6× and enlargements.
func TestResizeKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cases := []struct{ sw, sh, w, h int }{
		{500, 375, 341, 256}, // Resize(256) of ImageNet's 4:3
		{375, 500, 256, 341},
		{500, 375, 224, 168}, // 2.2×: 5 taps
		{640, 480, 128, 96},  // 5×: generic taps
		{333, 251, 200, 150},
		{100, 80, 160, 120}, // enlargement
		{9, 7, 4, 3},
		{5, 4, 2, 2},
		{3, 3, 7, 9},
		{2, 1, 1, 1},
	}
	for _, tc := range cases {
		for _, nc := range []int{1, 3, 4} {
			for _, fill := range []string{"noise", "white"} {
				name := fmt.Sprintf("%dx%dx%d-%dx%d-%s", tc.sw, tc.sh, nc, tc.w, tc.h, fill)
				src := &Image{}
				src.Reset(tc.sw, tc.sh, nc)
				for i := range src.Pix {
					if fill == "white" {
						src.Pix[i] = 255
					} else {
						src.Pix[i] = uint8(rng.IntN(256))
					}
				}
				want := refResize(src, tc.w, tc.h)
				for _, avx := range []bool{true, false} {
					var r Resizer
					var got Image
					var err error
					withAVX2(avx, func() { err = r.Resize(&got, src, tc.w, tc.h) })
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if string(got.Pix) != string(want.Pix) {
						t.Errorf("%s (avx2 %v): differs from the plain algorithm", name, avx)
					}
				}
			}
		}
	}
}
