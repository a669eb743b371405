package tensor

import (
	"strconv"
	"unsafe"
)

// Layout is the order of an image tensor's dimensions.
type Layout uint8

const (
	// HWC is height, width, channels (packed pixels).
	HWC Layout = iota
	// CHW is channels, height, width (what PyTorch models take).
	CHW
)

// String names the layout.
func (l Layout) String() string {
	switch l {
	case HWC:
		return "HWC"
	case CHW:
		return "CHW"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// DType is a tensor element type.
type DType uint8

const (
	// Uint8 elements live in [Tensor.U8].
	Uint8 DType = iota
	// Float32 elements live in [Tensor.F32].
	Float32
)

// String names the element type as NumPy and PyTorch do ("uint8", "float32").
func (d DType) String() string {
	if d == Float32 {
		return "float32"
	}
	return "uint8"
}

// Size is the bytes of one element.
func (d DType) Size() int {
	if d == Float32 {
		return 4
	}
	return 1
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

// NBytes is the size of the element memory in use, in bytes.
func (t *Tensor) NBytes() int64 {
	if t.DType == Float32 {
		return 4 * int64(len(t.F32))
	}
	return int64(len(t.U8))
}

// Bytes returns the element memory as bytes, without a copy (float32
// elements in the machine's byte order, little-endian on every platform Go
// and PyTorch share). The slice aliases the tensor's buffer.
func (t *Tensor) Bytes() []byte {
	if t.DType == Float32 {
		if len(t.F32) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.F32))), 4*len(t.F32))
	}
	return t.U8
}

// SetShape sets the shape, reusing the shape's memory.
func (t *Tensor) SetShape(dims ...int) {
	t.Shape = append(t.Shape[:0], dims...)
}

// ReuseU8 makes t a uint8 tensor of n elements and returns its buffer,
// reusing U8's memory when it is large enough (the contents are not
// cleared). The shape is the caller's to set.
func (t *Tensor) ReuseU8(n int) []uint8 {
	t.DType = Uint8
	if cap(t.U8) < n {
		t.U8 = make([]uint8, n)
	}
	t.U8 = t.U8[:n]
	return t.U8
}

// ReuseF32 makes t a float32 tensor of n elements and returns its buffer,
// reusing F32's memory when it is large enough (the contents are not
// cleared). The shape is the caller's to set.
func (t *Tensor) ReuseF32(n int) []float32 {
	t.DType = Float32
	if cap(t.F32) < n {
		t.F32 = make([]float32, n)
	}
	t.F32 = t.F32[:n]
	return t.F32
}
