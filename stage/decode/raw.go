package decode

import (
	"fmt"

	"github.com/psiflow/psiflow/tensor"
)

// RawToTensor interprets data as a packed uint8 tensor of the given shape
// (a raw-bytes sample named name) and copies it into t.
func RawToTensor(t *tensor.Tensor, data []byte, shape []int, name string) error {
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return &Error{Name: name, Format: "raw", Err: fmt.Errorf("invalid element shape %v", shape)}
		}
		n *= d
	}
	if len(data) != n {
		return &Error{Name: name, Format: "raw", Err: fmt.Errorf("%d bytes, shape %v needs %d", len(data), shape, n)}
	}
	copy(t.ReuseU8(n), data)
	t.SetShape(shape...)
	return nil
}
