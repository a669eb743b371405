package decode

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// CenterOffset returns the top-left corner torchvision's CenterCrop uses to
// cut w×h out of an image of iw×ih: round((iw-w)/2), round((ih-h)/2) with
// Python's round-half-to-even.
func CenterOffset(iw, ih, w, h int) (x, y int) {
	return int(math.RoundToEven(float64(iw-w) / 2)), int(math.RoundToEven(float64(ih-h) / 2))
}

// CenterCrop cuts the central w×h region of src into dst, as torchvision's
// CenterCrop does: when the crop is larger than the image, the image is first
// padded with zeros ((w-iw)/2 on the left, the rest on the right; the same
// vertically).
func CenterCrop(dst, src *Image, w, h int) error {
	if err := src.check("center crop"); err != nil {
		return err
	}
	if w <= 0 || h <= 0 {
		return fmt.Errorf("center crop: invalid size %d×%d", w, h)
	}
	if w <= src.W && h <= src.H {
		x, y := CenterOffset(src.W, src.H, w, h)
		return Crop(dst, src, x, y, w, h)
	}
	// pad, then crop: the source lands at (px, py) in the output
	px, py := 0, 0
	iw, ih := src.W, src.H
	if w > iw {
		px = (w - iw) / 2
		iw = w
	}
	if h > ih {
		py = (h - ih) / 2
		ih = h
	}
	// offsets of the crop within the padded image
	ox, oy := CenterOffset(iw, ih, w, h)
	dst.Reset(w, h, src.C)
	clear(dst.Pix)
	// source region visible in the crop
	ch := src.C
	for y := 0; y < h; y++ {
		sy := y + oy - py
		if sy < 0 || sy >= src.H {
			continue
		}
		x0 := max(0, px-ox)       // first destination column covered by the source
		sx0 := x0 + ox - px       // its source column
		n := min(w-x0, src.W-sx0) // columns copied
		if n <= 0 {
			continue
		}
		copy(dst.Pix[(y*w+x0)*ch:(y*w+x0+n)*ch], src.Pix[(sy*src.W+sx0)*ch:])
	}
	return nil
}

// Crop copies the w×h region of src whose top-left corner is (x, y) into dst.
func Crop(dst, src *Image, x, y, w, h int) error {
	if err := src.check("crop"); err != nil {
		return err
	}
	if w <= 0 || h <= 0 || x < 0 || y < 0 || x+w > src.W || y+h > src.H {
		return fmt.Errorf("crop: region %d×%d at (%d,%d) outside the %d×%d image", w, h, x, y, src.W, src.H)
	}
	ch := src.C
	dst.Reset(w, h, ch)
	for r := 0; r < h; r++ {
		copy(dst.Pix[r*w*ch:(r+1)*w*ch], src.Pix[((y+r)*src.W+x)*ch:])
	}
	return nil
}

// RandomCrop cuts a w×h region at a position drawn from rng, uniformly over
// all positions, like torchvision's RandomCrop without padding. A crop larger
// than the image is an error.
func RandomCrop(dst, src *Image, w, h int, rng *rand.Rand) error {
	if err := src.check("random crop"); err != nil {
		return err
	}
	if w <= 0 || h <= 0 || w > src.W || h > src.H {
		return fmt.Errorf("random crop: size %d×%d does not fit the %d×%d image", w, h, src.W, src.H)
	}
	y := rng.IntN(src.H - h + 1)
	x := rng.IntN(src.W - w + 1)
	return Crop(dst, src, x, y, w, h)
}

// HFlip mirrors m left to right in place.
func HFlip(m *Image) {
	ch := m.C
	stride := m.W * ch
	for y := 0; y < m.H; y++ {
		row := m.Pix[y*stride : (y+1)*stride]
		switch ch {
		case 3:
			for i, j := 0, (m.W-1)*3; i < j; i, j = i+3, j-3 {
				row[i], row[j] = row[j], row[i]
				row[i+1], row[j+1] = row[j+1], row[i+1]
				row[i+2], row[j+2] = row[j+2], row[i+2]
			}
		default:
			for i, j := 0, (m.W-1)*ch; i < j; i, j = i+ch, j-ch {
				for c := 0; c < ch; c++ {
					row[i+c], row[j+c] = row[j+c], row[i+c]
				}
			}
		}
	}
}
