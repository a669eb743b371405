package decode

import (
	"fmt"
)

type coeffKey struct{ in, out int }

// Resizer resizes RGB images with antialiasing, producing the same bytes as
// Pillow's Image.resize(..., BILINEAR) (horizontal pass, then vertical, with
// an 8-bit intermediate). It caches filter taps per (input, output) size and
// reuses its scratch buffer, so steady-state calls allocate nothing. A Resizer
// is not safe for concurrent use; keep one per goroutine.
type Resizer struct {
	cache  map[coeffKey]*coeffs
	sh, sv coeffs // scratch taps of a box that does not repeat
	tmp    Image
	acc    []int32
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
	return r.ResizeWindow(dst, src, w, h, 0, 0, w, h)
}

// ResizeWindow computes only the cw×ch window at (x0, y0) of src resized to
// w×h: the same bytes as Resize followed by Crop, for a fraction of the work
// (Resize(256) + CenterCrop(224) of a 4:3 image computes 57% of the pixels).
// dst must not share memory with src.
func (r *Resizer) ResizeWindow(dst, src *Image, w, h, x0, y0, cw, ch int) error {
	if err := src.check("resize"); err != nil {
		return err
	}
	reg := region{w: src.W, h: src.H, bx1: float64(src.W), by1: float64(src.H)}
	return r.resizeRegion(dst, src, reg, true, w, h, x0, y0, cw, ch)
}

// ResizedCrop crops the cw×ch region at (x, y) of src and resizes it to
// w×h, as torchvision's resized_crop does on a PIL image (crop, then
// Image.resize(BILINEAR)): the same bytes, without the copy of the crop.
// dst must not share memory with src.
func (r *Resizer) ResizedCrop(dst, src *Image, x, y, cw, ch, w, h int) error {
	if err := src.check("resized crop"); err != nil {
		return err
	}
	if cw <= 0 || ch <= 0 || x < 0 || y < 0 || x+cw > src.W || y+ch > src.H {
		return fmt.Errorf("resized crop: region %d×%d at (%d,%d) outside the %d×%d image", cw, ch, x, y, src.W, src.H)
	}
	reg := region{x: x, y: y, w: cw, h: ch, bx1: float64(cw), by1: float64(ch)}
	return r.resizeRegion(dst, src, reg, false, w, h, 0, 0, w, h)
}

// region is the part of a source image a resize reads: the w×h sub-image at
// (x, y), outside which no tap reaches (as if it were cropped out first),
// and within it the box [bx0, bx1) × [by0, by1) that maps onto the output,
// in pixels relative to the sub-image, possibly fractional (Pillow's resize
// box). The whole image is {0, 0, W, H, 0, 0, W, H}.
type region struct {
	x, y, w, h         int
	bx0, by0, bx1, by1 float64
}

// whole reports whether the box is the sub-image's full width (x) or
// height (!x) exactly.
func (g region) whole(x bool) bool {
	if x {
		return g.bx0 == 0 && g.bx1 == float64(g.w)
	}
	return g.by0 == 0 && g.by1 == float64(g.h)
}

// resizeRegion resamples reg of src to w×h and writes the cw×ch window at
// (x0, y0) of the result into dst. cache says whether the filter taps are
// kept for the next call (sizes that repeat from image to image) or
// computed into scratch (a random crop's box, different every time).
func (r *Resizer) resizeRegion(dst, src *Image, reg region, cache bool, w, h, x0, y0, cw, ch int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("resize: invalid target size %d×%d", w, h)
	}
	if cw <= 0 || ch <= 0 || x0 < 0 || y0 < 0 || x0+cw > w || y0+ch > h {
		return fmt.Errorf("resize: window %d×%d at (%d,%d) outside the %d×%d result", cw, ch, x0, y0, w, h)
	}
	if reg.w <= 0 || reg.h <= 0 || reg.x < 0 || reg.y < 0 || reg.x+reg.w > src.W || reg.y+reg.h > src.H ||
		!(reg.bx0 >= 0 && reg.bx0 < reg.bx1 && reg.bx1 <= float64(reg.w)) ||
		!(reg.by0 >= 0 && reg.by0 < reg.by1 && reg.by1 <= float64(reg.h)) {
		return fmt.Errorf("resize: box [%g,%g)×[%g,%g) of the %d×%d region at (%d,%d) is outside the %d×%d image",
			reg.bx0, reg.bx1, reg.by0, reg.by1, reg.w, reg.h, reg.x, reg.y, src.W, src.H)
	}
	nc := src.C
	// Pillow resamples an axis unless the size is unchanged and the box is
	// the whole axis.
	needH, needV := w != reg.w || !reg.whole(true), h != reg.h || !reg.whole(false)
	taps := func(scratch *coeffs, in int, b0, b1 float64, out int) *coeffs {
		if cache && b0 == 0 && b1 == float64(in) {
			return r.coeffs(in, out)
		}
		scratch.compute(in, b0, b1, out)
		return scratch
	}
	// rows of the sub-image the vertical pass reads
	ys0, ys1 := y0, y0+ch
	var cv *coeffs
	if needV {
		cv = taps(&r.sv, reg.h, reg.by0, reg.by1, h)
		ys0 = int(cv.bounds[2*y0])
		ys1 = int(cv.bounds[2*(y0+ch-1)] + cv.bounds[2*(y0+ch-1)+1])
	}
	// horizontal pass (or column copy) of rows [ys0, ys1) into mid
	mid := &r.tmp
	if !needV {
		mid = dst
	}
	mid.Reset(cw, ys1-ys0, nc)
	if needH {
		horizontal(mid.Pix, src, reg.x, taps(&r.sh, reg.w, reg.bx0, reg.bx1, w), x0, cw, reg.y+ys0, reg.y+ys1)
	} else {
		for y := ys0; y < ys1; y++ {
			copy(mid.Pix[(y-ys0)*cw*nc:(y-ys0+1)*cw*nc], src.Pix[((reg.y+y)*src.W+reg.x+x0)*nc:])
		}
	}
	if needV {
		dst.Reset(cw, ch, nc)
		r.vertical(dst.Pix, mid, cv, y0, ch, ys0)
	}
	return nil
}

// horizontal resamples rows [y0, y1) of src along x into out (rows packed),
// output columns [x0, x0+cw) only, reading the c.in columns from sx on.
func horizontal(out []uint8, src *Image, sx int, c *coeffs, x0, cw, y0, y1 int) {
	nc := src.C
	inStride := src.W * nc
	outStride := cw * nc
	const half = 1 << (precisionBits - 1)
	for y := y0; y < y1; y++ {
		start := y*inStride + sx*nc
		in := src.Pix[start : start+c.in*nc]
		o := out[(y-y0)*outStride : (y-y0+1)*outStride]
		switch {
		case nc == 3 && c.kt > 0 && haveAVX2:
			// Groups of 8 pixels: the kernel writes 4 bytes past each
			// group and its gathers read 1 byte past a pixel's last tap,
			// so it stops short of the row's end and, where the row ends
			// the source's buffer, of the buffer's end.
			groups := (3*cw - 4) / 24
			if avail := len(src.Pix) - start; 3*c.in >= avail {
				for groups > 0 && 3*(int(c.pmin[x0+8*groups-1])+c.kt) >= avail {
					groups--
				}
			}
			if groups > 0 {
				horizontalRGBAVX2(&o[0], groups, &in[0], &c.poff3[x0], &c.pkT[x0], 4*c.out, c.kt)
			}
			if g := 8 * groups; g < cw {
				horizontalRGBPadded(o[3*g:], in, c, x0+g, cw-g)
			}
		case nc == 3 && c.kt > 0:
			horizontalRGBPadded(o, in, c, x0, cw)
		case nc == 3:
			horizontalRGB(o, in, c, x0, cw)
		default:
			for xx := x0; xx < x0+cw; xx++ {
				xmin := int(c.bounds[2*xx])
				xn := int(c.bounds[2*xx+1])
				k := c.k[xx*c.ksize : xx*c.ksize+xn]
				for cc := 0; cc < nc; cc++ {
					s := int32(half)
					for i, kv := range k {
						s += int32(in[(xmin+i)*nc+cc]) * kv
					}
					o[(xx-x0)*nc+cc] = clipFixed(s)
				}
			}
		}
	}
}

// vertical resamples output rows [y0, y0+n) along y from mid into out;
// mid's row 0 is source row ys0.
func (r *Resizer) vertical(out []uint8, mid *Image, c *coeffs, y0, n, ys0 int) {
	stride := mid.W * mid.C
	if cap(r.acc) < stride {
		r.acc = make([]int32, stride)
	}
	acc := r.acc[:stride]
	const half = 1 << (precisionBits - 1)
	row := func(i int) []uint8 { return mid.Pix[i*stride : (i+1)*stride] }
	for yy := y0; yy < y0+n; yy++ {
		ymin := int(c.bounds[2*yy]) - ys0
		yn := int(c.bounds[2*yy+1])
		k := c.k[yy*c.ksize : yy*c.ksize+yn]
		o := out[(yy-y0)*stride : (yy-y0+1)*stride]
		if haveAVX2 && yn > 0 {
			// rows ymin..ymin+yn-1 of mid, all in bounds (checked by the
			// reslice), each at least len(o) bytes
			src := mid.Pix[ymin*stride : (ymin+yn-1)*stride+len(o)]
			n := len(o) &^ 7
			if n > 0 {
				verticalAVX2(&o[0], n, &src[0], stride, &k[0], yn)
			}
			for i := n; i < len(o); i++ {
				s := int32(half)
				for j, kv := range k {
					s += int32(src[j*stride+i]) * kv
				}
				o[i] = clipFixed(s)
			}
			continue
		}
		// The common tap counts in one pass over the output row; more taps
		// accumulate row by row. Integer sums: the order does not change the
		// result.
		switch yn {
		case 1:
			r0, k0 := row(ymin)[:len(o)], k[0]
			for i := range o {
				o[i] = clipFixed(half + int32(r0[i])*k0)
			}
		case 2:
			r0, r1 := row(ymin)[:len(o)], row(ymin + 1)[:len(o)]
			k0, k1 := k[0], k[1]
			for i := range o {
				o[i] = clipFixed(half + int32(r0[i])*k0 + int32(r1[i])*k1)
			}
		case 3:
			r0, r1, r2 := row(ymin)[:len(o)], row(ymin + 1)[:len(o)], row(ymin + 2)[:len(o)]
			k0, k1, k2 := k[0], k[1], k[2]
			for i := range o {
				o[i] = clipFixed(half + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2)
			}
		case 4:
			r0, r1, r2, r3 := row(ymin)[:len(o)], row(ymin + 1)[:len(o)], row(ymin + 2)[:len(o)], row(ymin + 3)[:len(o)]
			k0, k1, k2, k3 := k[0], k[1], k[2], k[3]
			for i := range o {
				o[i] = clipFixed(half + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3)
			}
		default:
			for i := range acc {
				acc[i] = half
			}
			for j, kv := range k {
				r := row(ymin + j)[:len(acc)]
				for i, v := range r {
					acc[i] += int32(v) * kv
				}
			}
			o = o[:len(acc)]
			for i, s := range acc {
				o[i] = clipFixed(s)
			}
		}
	}
}

// clipFixed converts a fixed-point sum to a byte, clamping to [0, 255]
// (branch-free: min and max compile to conditional moves).
func clipFixed(s int32) uint8 {
	return uint8(max(0, min(s>>precisionBits, 255)))
}

// horizontalRGB resamples one RGB row. The common tap counts are unrolled
// (one bounds check per output pixel instead of three per tap).
func horizontalRGB(o, in []uint8, c *coeffs, x0, cw int) {
	const half = 1 << (precisionBits - 1)
	ks := c.ksize
	for xx := x0; xx < x0+cw; xx++ {
		xmin := int(c.bounds[2*xx])
		xn := int(c.bounds[2*xx+1])
		k := c.k[xx*ks : xx*ks+xn]
		p := in[xmin*3:]
		var s0, s1, s2 int32
		switch xn {
		case 2:
			q, kk := (*[6]uint8)(p), (*[2]int32)(k)
			s0 = half + int32(q[0])*kk[0] + int32(q[3])*kk[1]
			s1 = half + int32(q[1])*kk[0] + int32(q[4])*kk[1]
			s2 = half + int32(q[2])*kk[0] + int32(q[5])*kk[1]
		case 3:
			q, kk := (*[9]uint8)(p), (*[3]int32)(k)
			s0 = half + int32(q[0])*kk[0] + int32(q[3])*kk[1] + int32(q[6])*kk[2]
			s1 = half + int32(q[1])*kk[0] + int32(q[4])*kk[1] + int32(q[7])*kk[2]
			s2 = half + int32(q[2])*kk[0] + int32(q[5])*kk[1] + int32(q[8])*kk[2]
		case 4:
			q, kk := (*[12]uint8)(p), (*[4]int32)(k)
			s0 = half + int32(q[0])*kk[0] + int32(q[3])*kk[1] + int32(q[6])*kk[2] + int32(q[9])*kk[3]
			s1 = half + int32(q[1])*kk[0] + int32(q[4])*kk[1] + int32(q[7])*kk[2] + int32(q[10])*kk[3]
			s2 = half + int32(q[2])*kk[0] + int32(q[5])*kk[1] + int32(q[8])*kk[2] + int32(q[11])*kk[3]
		case 5:
			q, kk := (*[15]uint8)(p), (*[5]int32)(k)
			s0 = half + int32(q[0])*kk[0] + int32(q[3])*kk[1] + int32(q[6])*kk[2] + int32(q[9])*kk[3] + int32(q[12])*kk[4]
			s1 = half + int32(q[1])*kk[0] + int32(q[4])*kk[1] + int32(q[7])*kk[2] + int32(q[10])*kk[3] + int32(q[13])*kk[4]
			s2 = half + int32(q[2])*kk[0] + int32(q[5])*kk[1] + int32(q[8])*kk[2] + int32(q[11])*kk[3] + int32(q[14])*kk[4]
		default:
			s0, s1, s2 = half, half, half
			p = p[:3*xn]
			for i, kv := range k {
				q := (*[3]uint8)(p[3*i:])
				s0 += int32(q[0]) * kv
				s1 += int32(q[1]) * kv
				s2 += int32(q[2]) * kv
			}
		}
		d := (*[3]uint8)(o[3*(xx-x0):])
		d[0], d[1], d[2] = clipFixed(s0), clipFixed(s1), clipFixed(s2)
	}
}

// store3 writes three fixed-point sums as bytes, clipping unless the taps
// cannot leave the byte range.
func store3(d *[3]uint8, s0, s1, s2 int32, noClip bool) {
	if noClip {
		d[0], d[1], d[2] = uint8(s0>>precisionBits), uint8(s1>>precisionBits), uint8(s2>>precisionBits)
		return
	}
	d[0], d[1], d[2] = clipFixed(s0), clipFixed(s1), clipFixed(s2)
}

// horizontalRGBPadded resamples one RGB row with the padded taps: a fixed
// tap count per output pixel, so the loop has no data-dependent branch.
func horizontalRGBPadded(o, in []uint8, c *coeffs, x0, cw int) {
	const half = 1 << (precisionBits - 1)
	kt, nc := c.kt, c.noClip
	pmin := c.pmin[x0 : x0+cw]
	o = o[:3*cw]
	switch kt {
	case 2:
		pk := c.pk[x0*2 : (x0+cw)*2]
		for j, m := range pmin {
			q, kk := (*[6]uint8)(in[3*int(m):]), (*[2]int32)(pk[2*j:])
			k0, k1 := kk[0], kk[1]
			store3((*[3]uint8)(o[3*j:]),
				half+int32(q[0])*k0+int32(q[3])*k1,
				half+int32(q[1])*k0+int32(q[4])*k1,
				half+int32(q[2])*k0+int32(q[5])*k1, nc)
		}
	case 3:
		pk := c.pk[x0*3 : (x0+cw)*3]
		for j, m := range pmin {
			q, kk := (*[9]uint8)(in[3*int(m):]), (*[3]int32)(pk[3*j:])
			k0, k1, k2 := kk[0], kk[1], kk[2]
			store3((*[3]uint8)(o[3*j:]),
				half+int32(q[0])*k0+int32(q[3])*k1+int32(q[6])*k2,
				half+int32(q[1])*k0+int32(q[4])*k1+int32(q[7])*k2,
				half+int32(q[2])*k0+int32(q[5])*k1+int32(q[8])*k2, nc)
		}
	case 4:
		pk := c.pk[x0*4 : (x0+cw)*4]
		for j, m := range pmin {
			q, kk := (*[12]uint8)(in[3*int(m):]), (*[4]int32)(pk[4*j:])
			k0, k1, k2, k3 := kk[0], kk[1], kk[2], kk[3]
			store3((*[3]uint8)(o[3*j:]),
				half+int32(q[0])*k0+int32(q[3])*k1+int32(q[6])*k2+int32(q[9])*k3,
				half+int32(q[1])*k0+int32(q[4])*k1+int32(q[7])*k2+int32(q[10])*k3,
				half+int32(q[2])*k0+int32(q[5])*k1+int32(q[8])*k2+int32(q[11])*k3, nc)
		}
	case 5:
		pk := c.pk[x0*5 : (x0+cw)*5]
		for j, m := range pmin {
			q, kk := (*[15]uint8)(in[3*int(m):]), (*[5]int32)(pk[5*j:])
			k0, k1, k2, k3, k4 := kk[0], kk[1], kk[2], kk[3], kk[4]
			store3((*[3]uint8)(o[3*j:]),
				half+int32(q[0])*k0+int32(q[3])*k1+int32(q[6])*k2+int32(q[9])*k3+int32(q[12])*k4,
				half+int32(q[1])*k0+int32(q[4])*k1+int32(q[7])*k2+int32(q[10])*k3+int32(q[13])*k4,
				half+int32(q[2])*k0+int32(q[5])*k1+int32(q[8])*k2+int32(q[11])*k3+int32(q[14])*k4, nc)
		}
	default:
		for j, m := range pmin {
			k := c.pk[(x0+j)*kt : (x0+j+1)*kt]
			p := in[3*int(m) : 3*(int(m)+kt)]
			var s0, s1, s2 int32 = half, half, half
			for i, kv := range k {
				q := (*[3]uint8)(p[3*i:])
				s0 += int32(q[0]) * kv
				s1 += int32(q[1]) * kv
				s2 += int32(q[2]) * kv
			}
			store3((*[3]uint8)(o[3*j:]), s0, s1, s2, nc)
		}
	}
}
