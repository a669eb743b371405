package decode

import "math"

// precisionBits is Pillow's fixed-point precision for 8-bit resampling
// (32 - 8 - 2).
const precisionBits = 22

// coeffs are the precomputed fixed-point filter taps for one axis, as
// Pillow's precompute_coeffs + normalize_coeffs_8bpc compute them.
type coeffs struct {
	in, out int
	ksize   int
	bounds  []int32 // per output: first input index, number of taps
	k       []int32 // out × ksize taps
	// The same taps padded to a fixed count kt (the largest tap count) with
	// zero weights, the window shifted left where it would run past the
	// input's end: inner loops then run a fixed number of taps without a
	// per-pixel branch, and every read stays in bounds. Zero weights add
	// nothing to the integer sum, so results are unchanged. kt is 0 when the
	// input is shorter than the window (tiny images use bounds/k).
	kt   int
	pmin []int32 // per output: first input index of the padded window
	pk   []int32 // out × kt taps
	// For the AVX2 RGB kernel: 3·pmin (the window's first byte), and the
	// padded taps transposed (kt × out: tap t of output x at t·out + x).
	poff3 []int32
	pkT   []int32
	// noClip is true when no sum can leave [0, 255<<precisionBits]: all
	// weights are non-negative and each output's weights times 255 plus the
	// rounding half stay below 256<<precisionBits. Then clip8 is the
	// identity and the inner loops skip it.
	noClip bool
	pre    []float64 // scratch of compute
}

// bilinear is Pillow's triangle filter (support 1).
func bilinear(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// newCoeffs computes the taps for resampling inSize samples to outSize with
// Pillow's bilinear filter with support scaled by the reduction factor
// (antialiasing), exactly as Pillow 9 does in double precision.
func newCoeffs(inSize, outSize int) *coeffs {
	c := &coeffs{}
	c.compute(inSize, 0, float64(inSize), outSize)
	return c
}

// compute fills c with the taps for resampling the box [in0, in1) of inSize
// samples to outSize (Pillow's precompute_coeffs with a resize box; the
// whole axis is in0 = 0, in1 = inSize), reusing c's slices.
func (c *coeffs) compute(inSize int, in0, in1 float64, outSize int) {
	scale := (in1 - in0) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := 1.0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c.in, c.out, c.ksize = inSize, outSize, ksize
	c.bounds = grow32(c.bounds, 2*outSize)
	c.k = grow32(c.k, outSize*ksize)
	if cap(c.pre) < ksize {
		c.pre = make([]float64, ksize)
	}
	pre := c.pre[:ksize]
	ss := 1.0 / filterscale
	for xx := 0; xx < outSize; xx++ {
		center := in0 + float64(float64(xx)+0.5)*scale
		xmin := int(center - support + 0.5)
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := bilinear(float64(float64(x+xmin)-center+0.5) * ss)
			pre[x] = w
			ww += w
		}
		for x := 0; x < xmax; x++ {
			if ww != 0 {
				pre[x] /= ww
			}
		}
		k := c.k[xx*ksize : (xx+1)*ksize]
		for x := 0; x < ksize; x++ {
			v := 0.0
			if x < xmax {
				v = pre[x]
			}
			if v < 0 {
				k[x] = int32(-0.5 + float64(v*(1<<precisionBits)))
			} else {
				k[x] = int32(0.5 + float64(v*(1<<precisionBits)))
			}
		}
		c.bounds[2*xx] = int32(xmin)
		c.bounds[2*xx+1] = int32(max(xmax, 0))
	}
	c.pad()
}

// grow32 returns s with length n, reusing its array when large enough.
func grow32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// pad fills kt, pmin, pk and noClip from bounds and k.
func (c *coeffs) pad() {
	kt := 0
	for xx := 0; xx < c.out; xx++ {
		kt = max(kt, int(c.bounds[2*xx+1]))
	}
	c.noClip = true
	for xx := 0; xx < c.out; xx++ {
		var sum int64
		for _, kv := range c.k[xx*c.ksize : (xx+1)*c.ksize] {
			if kv < 0 {
				c.noClip = false
			}
			sum += int64(kv)
		}
		if sum*255+1<<(precisionBits-1) >= 256<<precisionBits {
			c.noClip = false
		}
	}
	c.kt = 0
	if kt == 0 || kt > c.in {
		return
	}
	c.kt = kt
	c.pmin = grow32(c.pmin, c.out)
	c.pk = grow32(c.pk, c.out*kt)
	clear(c.pk)
	for xx := 0; xx < c.out; xx++ {
		xmin, xn := int(c.bounds[2*xx]), int(c.bounds[2*xx+1])
		pmin := min(xmin, c.in-kt)
		c.pmin[xx] = int32(pmin)
		copy(c.pk[xx*kt+xmin-pmin:], c.k[xx*c.ksize:xx*c.ksize+xn])
	}
	c.poff3 = grow32(c.poff3, c.out)
	c.pkT = grow32(c.pkT, kt*c.out)
	for xx := 0; xx < c.out; xx++ {
		c.poff3[xx] = 3 * c.pmin[xx]
		for t := 0; t < kt; t++ {
			c.pkT[t*c.out+xx] = c.pk[xx*kt+t]
		}
	}
}
