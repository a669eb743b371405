package decode

import "fmt"

// Image is a packed 8-bit image: Pix holds H rows of W×C bytes, channels
// interleaved (HWC). Decoders write RGB (C = 3). An Image is reused across
// samples: its buffer grows when needed and is never shrunk.
type Image struct {
	Pix     []uint8
	W, H, C int
	// SrcW and SrcH are the size stored in the file, which differs from W×H
	// when the decoder used DCT scaling. Geometry that must follow the
	// original aspect ratio (torchvision's Resize) is computed from them.
	// Transforms set them to W×H.
	SrcW, SrcH int
}

// Reset sets the size to w×h×c and makes Pix exactly that long, growing the
// buffer only when its capacity is too small. Contents are unspecified.
func (m *Image) Reset(w, h, c int) {
	n := w * h * c
	if cap(m.Pix) < n {
		m.Pix = make([]uint8, n)
	}
	m.Pix = m.Pix[:n]
	m.W, m.H, m.C = w, h, c
	m.SrcW, m.SrcH = w, h
}

// Stride returns the number of bytes in one row.
func (m *Image) Stride() int { return m.W * m.C }

func (m *Image) check(op string) error {
	if m.W <= 0 || m.H <= 0 || m.C <= 0 || len(m.Pix) < m.W*m.H*m.C {
		return fmt.Errorf("%s: invalid image %d×%d×%d with %d bytes", op, m.W, m.H, m.C, len(m.Pix))
	}
	return nil
}

// Error is a decoding error naming the sample.
type Error struct {
	// Name is the file name or key of the sample.
	Name string
	// Format is "jpeg", "png", "raw" or "unknown".
	Format string
	// Err is the cause.
	Err error
}

// Error formats "decode NAME (FORMAT): CAUSE".
func (e *Error) Error() string {
	return fmt.Sprintf("decode %s (%s): %v", e.Name, e.Format, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
