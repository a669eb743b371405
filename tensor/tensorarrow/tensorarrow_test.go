package tensorarrow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/psiflow/psiflow/tensor"
)

func TestFloat32(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	fsl := array.NewFixedSizeListBuilder(mem, 4, arrow.PrimitiveTypes.Float32)
	defer fsl.Release()
	fv := fsl.ValueBuilder().(*array.Float32Builder)
	for r := 0; r < 3; r++ {
		fsl.Append(true)
		for j := 0; j < 4; j++ {
			fv.Append(float32(r*10 + j))
		}
	}
	good := fsl.NewArray()
	defer good.Release()

	lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int16)
	defer lb.Release()
	iv := lb.ValueBuilder().(*array.Int16Builder)
	for r, n := range []int{4, 4, 3} {
		lb.Append(true)
		for j := 0; j < n; j++ {
			iv.Append(int16(-r*10 - j))
		}
	}
	short := lb.NewArray()
	defer short.Release()

	lb2 := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float64)
	defer lb2.Release()
	dv := lb2.ValueBuilder().(*array.Float64Builder)
	lb2.Append(true)
	dv.AppendValues([]float64{1.5, 2.5, 3.5, 4.5}, nil)
	lb2.AppendNull()
	withNull := lb2.NewArray()
	defer withNull.Release()

	strs := array.NewStringBuilder(mem)
	defer strs.Release()
	strs.Append("x")
	notList := strs.NewArray()
	defer notList.Release()

	cases := []struct {
		name    string
		col     arrow.Array
		elem    []int
		wantErr string
		want    []float32
	}{
		{"fixed-size-list", good, []int{2, 2}, "", []float32{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}},
		{"wrong-shape", good, []int{3}, "row 0 has 4 values", nil},
		{"short-row", short, []int{4}, "row 2 has 3 values", nil},
		{"null-row", withNull, []int{4}, "row 1 is null", nil},
		{"not-a-list", notList, []int{1}, "want a list", nil},
		{"bad-shape", good, []int{0}, "invalid element shape", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tt tensor.Tensor
			err := Float32(&tt, c.col, c.elem)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.DType != tensor.Float32 || len(tt.Shape) != 1+len(c.elem) || tt.Shape[0] != c.col.Len() {
				t.Fatalf("dtype %v shape %v", tt.DType, tt.Shape)
			}
			for i, v := range c.want {
				if tt.F32[i] != v {
					t.Fatalf("element %d = %v, want %v", i, tt.F32[i], v)
				}
			}
		})
	}
	// a sliced column keeps its row numbering relative to the slice
	sl := array.NewSlice(good, 1, 3)
	defer sl.Release()
	var tt tensor.Tensor
	if err := Float32(&tt, sl, []int{4}); err != nil || tt.F32[0] != 10 || tt.Shape[0] != 2 {
		t.Fatalf("slice: %v, first %v, shape %v", err, tt.F32, tt.Shape)
	}
}

func TestUint8(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	fb := array.NewFixedSizeBinaryBuilder(mem, &arrow.FixedSizeBinaryType{ByteWidth: 6})
	defer fb.Release()
	fb.Append([]byte{1, 2, 3, 4, 5, 6})
	fb.Append([]byte{7, 8, 9, 10, 11, 12})
	fixed := fb.NewArray()
	defer fixed.Release()

	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer bb.Release()
	bb.Append([]byte{1, 2, 3, 4, 5, 6})
	bb.Append([]byte{1, 2})
	bin := bb.NewArray()
	defer bin.Release()

	lb := array.NewFixedSizeListBuilder(mem, 3, arrow.PrimitiveTypes.Uint8)
	defer lb.Release()
	uv := lb.ValueBuilder().(*array.Uint8Builder)
	lb.Append(true)
	uv.AppendValues([]uint8{9, 8, 7}, nil)
	lst := lb.NewArray()
	defer lst.Release()

	cases := []struct {
		name    string
		col     arrow.Array
		elem    []int
		wantErr string
		want    []uint8
	}{
		{"fixed-size-binary", fixed, []int{2, 3}, "", []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"binary-short-row", bin, []int{6}, "row 1 has 2 bytes", nil},
		{"list-uint8", lst, []int{3}, "", []uint8{9, 8, 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tt tensor.Tensor
			err := Uint8(&tt, c.col, c.elem)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(tt.U8) != string(c.want) || tt.Shape[0] != c.col.Len() {
				t.Fatalf("got %v shape %v, want %v", tt.U8, tt.Shape, c.want)
			}
		})
	}
}

// Column infers the tensor from the column type, as the to_tensors kind uses it.
func TestColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	build := func(f func(b array.Builder), b array.Builder) arrow.Array {
		defer b.Release()
		f(b)
		return b.NewArray()
	}
	ints := build(func(b array.Builder) { b.(*array.Int64Builder).AppendValues([]int64{3, -1}, nil) }, array.NewInt64Builder(mem))
	bools := build(func(b array.Builder) { b.(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil) }, array.NewBooleanBuilder(mem))
	fixed := build(func(b array.Builder) {
		b.(*array.FixedSizeBinaryBuilder).AppendValues([][]byte{{1, 2, 3}, {4, 5, 6}}, nil)
	}, array.NewFixedSizeBinaryBuilder(mem, &arrow.FixedSizeBinaryType{ByteWidth: 3}))
	nulls := build(func(b array.Builder) { b.(*array.Int64Builder).AppendValues([]int64{1, 2}, []bool{true, false}) }, array.NewInt64Builder(mem))
	strs := build(func(b array.Builder) { b.(*array.StringBuilder).Append("x") }, array.NewStringBuilder(mem))
	empty := build(func(array.Builder) {}, array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary))
	for _, c := range []arrow.Array{ints, bools, fixed, nulls, strs, empty} {
		defer c.Release()
	}
	for _, tc := range []struct {
		name  string
		col   arrow.Array
		dtype tensor.DType
		shape []int
		f32   []float32
		u8    []uint8
		err   string
	}{
		{name: "int64", col: ints, dtype: tensor.Float32, shape: []int{2}, f32: []float32{3, -1}},
		{name: "bool", col: bools, dtype: tensor.Float32, shape: []int{2}, f32: []float32{1, 0}},
		{name: "fixed binary", col: fixed, dtype: tensor.Uint8, shape: []int{2, 3}, u8: []uint8{1, 2, 3, 4, 5, 6}},
		{name: "empty binary", col: empty, dtype: tensor.Uint8, shape: []int{0, 0}},
		{name: "nulls", col: nulls, err: "1 null values"},
		{name: "string", col: strs, err: "cannot become a tensor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got tensor.Tensor
			err := Column(&got, tc.col)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != tc.dtype || fmt.Sprint(got.Shape) != fmt.Sprint(tc.shape) ||
				fmt.Sprint(got.F32) != fmt.Sprint(tc.f32) && tc.f32 != nil || string(got.U8) != string(tc.u8) {
				t.Fatalf("got %v %v %v %v", got.DType, got.Shape, got.F32, got.U8)
			}
		})
	}
}
