package sink

import (
	"fmt"

	"github.com/psiflow/psiflow/tensor"
)

// pattern is the byte at offset j of sample i of a test batch.
func pattern(i, j int) byte { return byte((i*31 + j*7 + j/251) % 253) }

// testBatch is batch number k of n samples of shape (3, h, w) with known bytes;
// sample indices continue across batches (first is k*per).
func testBatch(first, n, h, w int) *tensor.Batch {
	per := 3 * h * w
	b := &tensor.Batch{Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: []int{n, 3, h, w}, U8: make([]byte, n*per)}}
	for i := range n {
		idx := first + i
		for j := range per {
			b.Tensor.U8[i*per+j] = pattern(idx, j)
		}
		b.Keys = append(b.Keys, fmt.Sprintf("class%d/img%05d.jpg", idx%3, idx))
		b.Labels = append(b.Labels, int64(idx%3))
	}
	return b
}

// checkSample reports the first byte of sample data that is not sample idx's.
func checkSample(idx int, data []byte) error {
	for j, v := range data {
		if v != pattern(idx, j) {
			return fmt.Errorf("sample %d byte %d: %d, want %d", idx, j, v, pattern(idx, j))
		}
	}
	return nil
}
