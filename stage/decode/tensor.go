package decode

import (
	"fmt"

	"github.com/psiflow/psiflow/tensor"
)

// Normalizer maps uint8 channel values v to (v/255 - mean)/std as float32,
// torchvision's ToTensor followed by Normalize, through a precomputed table.
type Normalizer struct {
	lut [][256]float32
}

// NewNormalizer builds the table for the given per-channel mean and std (the
// same length, one entry per channel; std entries must be non-zero).
func NewNormalizer(mean, std []float32) (*Normalizer, error) {
	if len(mean) == 0 || len(mean) != len(std) {
		return nil, fmt.Errorf("normalize: mean has %d entries and std %d", len(mean), len(std))
	}
	n := &Normalizer{lut: make([][256]float32, len(mean))}
	for c := range mean {
		if std[c] == 0 {
			return nil, fmt.Errorf("normalize: std[%d] is zero", c)
		}
		for v := 0; v < 256; v++ {
			n.lut[c][v] = (float32(v)/255 - mean[c]) / std[c]
		}
	}
	return n, nil
}

// ImageNet returns the Normalizer torchvision's ImageNet recipes use.
func ImageNet() *Normalizer {
	n, _ := NewNormalizer([]float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225})
	return n
}

// ToTensor writes m into t in the given layout: uint8 when norm is nil, else
// float32 through norm (whose channel count must match m's).
func ToTensor(t *tensor.Tensor, m *Image, layout tensor.Layout, norm *Normalizer) error {
	if err := m.check("to tensor"); err != nil {
		return err
	}
	ch, hw := m.C, m.W*m.H
	if layout == tensor.CHW {
		t.SetShape(ch, m.H, m.W)
	} else {
		t.SetShape(m.H, m.W, ch)
	}
	src := m.Pix[:hw*ch]
	if norm == nil {
		out := t.ReuseU8(hw * ch)
		if layout == tensor.HWC {
			copy(out, src)
			return nil
		}
		if ch == 3 {
			r, g, b := out[:hw], out[hw:2*hw], out[2*hw:3*hw]
			for i := 0; i < hw; i++ {
				p := src[3*i : 3*i+3 : 3*i+3]
				r[i], g[i], b[i] = p[0], p[1], p[2]
			}
			return nil
		}
		for i := 0; i < hw; i++ {
			for c := 0; c < ch; c++ {
				out[c*hw+i] = src[i*ch+c]
			}
		}
		return nil
	}
	if len(norm.lut) != ch {
		return fmt.Errorf("to tensor: normalizer has %d channels, image %d", len(norm.lut), ch)
	}
	out := t.ReuseF32(hw * ch)
	if layout == tensor.HWC {
		for i := 0; i < hw; i++ {
			for c := 0; c < ch; c++ {
				out[i*ch+c] = norm.lut[c][src[i*ch+c]]
			}
		}
		return nil
	}
	if ch == 3 {
		l0, l1, l2 := &norm.lut[0], &norm.lut[1], &norm.lut[2]
		r, g, b := out[:hw], out[hw:2*hw], out[2*hw:3*hw]
		for i := 0; i < hw; i++ {
			p := src[3*i : 3*i+3 : 3*i+3]
			r[i], g[i], b[i] = l0[p[0]], l1[p[1]], l2[p[2]]
		}
		return nil
	}
	for c := 0; c < ch; c++ {
		l := &norm.lut[c]
		o := out[c*hw : (c+1)*hw]
		for i := range o {
			o[i] = l[src[i*ch+c]]
		}
	}
	return nil
}

// toTensor is [ToTensor] of m mirrored left to right when flip is set, the mirror
// read while writing the tensor (3-channel CHW, the layout training uses) rather than
// made in place first; other layouts are mirrored with [HFlip] first.
func toTensor(t *tensor.Tensor, m *Image, layout tensor.Layout, norm *Normalizer, flip bool) error {
	if flip && (layout != tensor.CHW || m.C != 3) {
		if err := m.check("to tensor"); err != nil {
			return err
		}
		HFlip(m)
		flip = false
	}
	if !flip {
		return ToTensor(t, m, layout, norm)
	}
	if err := m.check("to tensor"); err != nil {
		return err
	}
	w, h := m.W, m.H
	hw := w * h
	t.SetShape(3, h, w)
	src := m.Pix[:hw*3]
	if norm == nil {
		out := t.ReuseU8(hw * 3)
		r, g, b := out[:hw], out[hw:2*hw], out[2*hw:3*hw]
		for y := range h {
			row, o := src[y*w*3:(y+1)*w*3], y*w
			for x := range w {
				i := (w - 1 - x) * 3
				p := row[i : i+3 : i+3]
				r[o+x], g[o+x], b[o+x] = p[0], p[1], p[2]
			}
		}
		return nil
	}
	if len(norm.lut) != 3 {
		return fmt.Errorf("to tensor: normalizer has %d channels, image 3", len(norm.lut))
	}
	out := t.ReuseF32(hw * 3)
	l0, l1, l2 := &norm.lut[0], &norm.lut[1], &norm.lut[2]
	r, g, b := out[:hw], out[hw:2*hw], out[2*hw:3*hw]
	for y := range h {
		row, o := src[y*w*3:(y+1)*w*3], y*w
		for x := range w {
			i := (w - 1 - x) * 3
			p := row[i : i+3 : i+3]
			r[o+x], g[o+x], b[o+x] = l0[p[0]], l1[p[1]], l2[p[2]]
		}
	}
	return nil
}
