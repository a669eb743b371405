package tensorarrow_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/tensor/tensorarrow"
)

// A list column becomes a float32 tensor [rows, n]; a binary column a uint8
// tensor [rows, bytes].
func ExampleColumn() {
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	defer lb.Release()
	vals := lb.ValueBuilder().(*array.Int32Builder)
	for r := range 2 {
		lb.Append(true)
		vals.AppendValues([]int32{int32(r), int32(r + 1), int32(r + 2)}, nil)
	}
	col := lb.NewArray()
	defer col.Release()
	var t tensor.Tensor
	if err := tensorarrow.Column(&t, col); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.DType, t.Shape, t.F32)

	bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer bb.Release()
	bb.AppendValues([][]byte{{1, 2}, {3, 4}, {5}}, nil)
	bin := bb.NewArray()
	defer bin.Release()
	fmt.Println(tensorarrow.Column(&t, bin))
	// Output:
	// float32 [2 3] [0 1 2 1 2 3]
	// arrow column (binary): row 2 has 1 bytes, shape [2] needs 2 (binary rows must have one length, row 0's)
}
