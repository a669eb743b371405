package decode

import "fmt"

// Layout is the order of a tensor's image dimensions.
type Layout uint8

const (
	// HWC is height, width, channels (the packed [Image] order).
	HWC Layout = iota
	// CHW is channels, height, width (what PyTorch models take).
	CHW
)

// String names the layout.
func (l Layout) String() string {
	if l == CHW {
		return "CHW"
	}
	return "HWC"
}

// DType is a tensor element type.
type DType uint8

const (
	// Uint8 elements live in [Tensor.U8].
	Uint8 DType = iota
	// Float32 elements live in [Tensor.F32].
	Float32
)

// String names the element type.
func (d DType) String() string {
	if d == Float32 {
		return "float32"
	}
	return "uint8"
}

// Tensor is a dense tensor with either uint8 or float32 elements. Its
// buffers are reused: writing a new value grows them only when too small, so
// a caller can hand in memory it owns (for example a UMA lease).
type Tensor struct {
	DType DType
	// Shape lists the dimensions, outermost first.
	Shape []int
	// U8 holds the elements when DType is Uint8.
	U8 []uint8
	// F32 holds the elements when DType is Float32.
	F32 []float32
}

// Len returns the number of elements the shape describes.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func (t *Tensor) setShape(dims ...int) {
	t.Shape = append(t.Shape[:0], dims...)
}

func (t *Tensor) resetU8(n int) []uint8 {
	t.DType = Uint8
	if cap(t.U8) < n {
		t.U8 = make([]uint8, n)
	}
	t.U8 = t.U8[:n]
	return t.U8
}

func (t *Tensor) resetF32(n int) []float32 {
	t.DType = Float32
	if cap(t.F32) < n {
		t.F32 = make([]float32, n)
	}
	t.F32 = t.F32[:n]
	return t.F32
}

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
func ToTensor(t *Tensor, m *Image, layout Layout, norm *Normalizer) error {
	if err := m.check("to tensor"); err != nil {
		return err
	}
	ch, hw := m.C, m.W*m.H
	if layout == CHW {
		t.setShape(ch, m.H, m.W)
	} else {
		t.setShape(m.H, m.W, ch)
	}
	src := m.Pix[:hw*ch]
	if norm == nil {
		out := t.resetU8(hw * ch)
		if layout == HWC {
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
	out := t.resetF32(hw * ch)
	if layout == HWC {
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
