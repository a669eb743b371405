package decode

import (
	"fmt"
	"math"
)

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
	scale := float64(inSize) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := 1.0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := &coeffs{in: inSize, out: outSize, ksize: ksize,
		bounds: make([]int32, 2*outSize), k: make([]int32, outSize*ksize)}
	pre := make([]float64, ksize)
	ss := 1.0 / filterscale
	for xx := 0; xx < outSize; xx++ {
		center := float64(float64(xx)+0.5) * scale
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
		c.bounds[2*xx+1] = int32(xmax)
	}
	return c
}

type coeffKey struct{ in, out int }

// Resizer resizes RGB images with antialiasing, producing the same bytes as
// Pillow's Image.resize(..., BILINEAR) (horizontal pass, then vertical, with
// an 8-bit intermediate). It caches filter taps per (input, output) size and
// reuses its scratch buffer, so steady-state calls allocate nothing. A Resizer
// is not safe for concurrent use; keep one per goroutine.
type Resizer struct {
	cache map[coeffKey]*coeffs
	tmp   Image
	acc   []int32
}

const maxCachedCoeffs = 256

func (r *Resizer) coeffs(in, out int) *coeffs {
	if r.cache == nil {
		r.cache = make(map[coeffKey]*coeffs)
	}
	key := coeffKey{in, out}
	if c, ok := r.cache[key]; ok {
		return c
	}
	if len(r.cache) >= maxCachedCoeffs {
		clear(r.cache)
	}
	c := newCoeffs(in, out)
	r.cache[key] = c
	return c
}

// ShorterSide returns the size torchvision's Resize(n) gives an image of
// w×h: the shorter side becomes n and the longer int(n × long / short).
func ShorterSide(w, h, n int) (int, int) {
	if w <= h {
		return n, int(float64(n) * float64(h) / float64(w))
	}
	return int(float64(n) * float64(w) / float64(h)), n
}

// ResizeShorter resizes src so that its shorter side is n (torchvision's
// Resize(n) on a PIL image) into dst.
func (r *Resizer) ResizeShorter(dst, src *Image, n int) error {
	if err := src.check("resize"); err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("resize: invalid target size %d", n)
	}
	w, h := ShorterSide(src.W, src.H, n)
	return r.Resize(dst, src, w, h)
}

// Resize resizes src to w×h into dst (which must not share memory with src).
func (r *Resizer) Resize(dst, src *Image, w, h int) error {
	if err := src.check("resize"); err != nil {
		return err
	}
	if w <= 0 || h <= 0 {
		return fmt.Errorf("resize: invalid target size %d×%d", w, h)
	}
	ch := src.C
	needH := w != src.W
	needV := h != src.H
	if !needH && !needV {
		dst.Reset(w, h, ch)
		copy(dst.Pix, src.Pix)
		return nil
	}
	var cv *coeffs
	y0, y1 := 0, src.H // rows the vertical pass reads
	if needV {
		cv = r.coeffs(src.H, h)
		y0 = int(cv.bounds[0])
		y1 = int(cv.bounds[2*(h-1)] + cv.bounds[2*(h-1)+1])
	}
	if !needV {
		dst.Reset(w, h, ch)
		horizontal(dst.Pix, src, r.coeffs(src.W, w), 0, h)
		return nil
	}
	mid := src
	if needH {
		r.tmp.Reset(w, y1-y0, ch)
		horizontal(r.tmp.Pix, src, r.coeffs(src.W, w), y0, y1)
		mid = &r.tmp
	} else {
		y0 = 0
	}
	dst.Reset(w, h, ch)
	r.vertical(dst.Pix, mid, cv, y0)
	return nil
}

// horizontal resamples rows [y0, y1) of src along x into out (rows packed).
func horizontal(out []uint8, src *Image, c *coeffs, y0, y1 int) {
	ch := src.C
	inStride := src.W * ch
	outStride := c.out * ch
	const half = 1 << (precisionBits - 1)
	for y := y0; y < y1; y++ {
		in := src.Pix[y*inStride : (y+1)*inStride]
		o := out[(y-y0)*outStride : (y-y0+1)*outStride]
		switch ch {
		case 3:
			for xx := 0; xx < c.out; xx++ {
				xmin := int(c.bounds[2*xx])
				xn := int(c.bounds[2*xx+1])
				k := c.k[xx*c.ksize : xx*c.ksize+xn]
				p := in[xmin*3 : (xmin+xn)*3]
				s0, s1, s2 := int32(half), int32(half), int32(half)
				for i, kv := range k {
					q := p[3*i : 3*i+3 : 3*i+3]
					s0 += int32(q[0]) * kv
					s1 += int32(q[1]) * kv
					s2 += int32(q[2]) * kv
				}
				o[3*xx] = clipFixed(s0)
				o[3*xx+1] = clipFixed(s1)
				o[3*xx+2] = clipFixed(s2)
			}
		default:
			for xx := 0; xx < c.out; xx++ {
				xmin := int(c.bounds[2*xx])
				xn := int(c.bounds[2*xx+1])
				k := c.k[xx*c.ksize : xx*c.ksize+xn]
				for cc := 0; cc < ch; cc++ {
					s := int32(half)
					for i, kv := range k {
						s += int32(in[(xmin+i)*ch+cc]) * kv
					}
					o[xx*ch+cc] = clipFixed(s)
				}
			}
		}
	}
}

// vertical resamples mid along y into out; mid's row 0 is source row y0.
func (r *Resizer) vertical(out []uint8, mid *Image, c *coeffs, y0 int) {
	stride := mid.W * mid.C
	if cap(r.acc) < stride {
		r.acc = make([]int32, stride)
	}
	acc := r.acc[:stride]
	const half = 1 << (precisionBits - 1)
	for yy := 0; yy < c.out; yy++ {
		ymin := int(c.bounds[2*yy]) - y0
		yn := int(c.bounds[2*yy+1])
		k := c.k[yy*c.ksize : yy*c.ksize+yn]
		for i := range acc {
			acc[i] = half
		}
		for j, kv := range k {
			row := mid.Pix[(ymin+j)*stride : (ymin+j+1)*stride]
			row = row[:len(acc)]
			for i, v := range row {
				acc[i] += int32(v) * kv
			}
		}
		o := out[yy*stride : (yy+1)*stride]
		o = o[:len(acc)]
		for i, s := range acc {
			o[i] = clipFixed(s)
		}
	}
}

func clipFixed(s int32) uint8 {
	v := s >> precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}
