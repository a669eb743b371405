package tensorarrow

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/psiflow/psiflow/tensor"
)

// numeric is the set of Arrow primitive element types converted to float32.
type numeric interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// elemCount checks elem and returns its product.
func elemCount(elem []int) (int, error) {
	n := 1
	for _, d := range elem {
		if d <= 0 {
			return 0, fmt.Errorf("invalid element shape %v", elem)
		}
		n *= d
	}
	return n, nil
}

// Float32 copies a column of fixed-size numeric rows into t as float32 with
// shape [rows, elem...]. The column is a FixedSizeList, List or LargeList of
// any integer or floating-point type; every row must be non-null and hold
// exactly product(elem) values, else the error names the row.
func Float32(t *tensor.Tensor, col arrow.Array, elem []int) error {
	per, err := elemCount(elem)
	if err != nil {
		return fmt.Errorf("arrow column (%s): %w", col.DataType(), err)
	}
	ll, ok := col.(array.ListLike)
	if !ok {
		return fmt.Errorf("arrow column (%s): want a list of numbers", col.DataType())
	}
	rows := col.Len()
	out := t.ReuseF32(rows * per)
	t.Shape = append(append(t.Shape[:0], rows), elem...)
	var copyRow func(dst []float32, start, end int64)
	switch v := ll.ListValues().(type) {
	case *array.Float32:
		vals := v.Float32Values()
		copyRow = func(dst []float32, s, e int64) { copy(dst, vals[s:e]) }
	case *array.Float64:
		copyRow = convertRow(v.Float64Values())
	case *array.Int8:
		copyRow = convertRow(v.Int8Values())
	case *array.Int16:
		copyRow = convertRow(v.Int16Values())
	case *array.Int32:
		copyRow = convertRow(v.Int32Values())
	case *array.Int64:
		copyRow = convertRow(v.Int64Values())
	case *array.Uint8:
		copyRow = convertRow(v.Uint8Values())
	case *array.Uint16:
		copyRow = convertRow(v.Uint16Values())
	case *array.Uint32:
		copyRow = convertRow(v.Uint32Values())
	case *array.Uint64:
		copyRow = convertRow(v.Uint64Values())
	default:
		return fmt.Errorf("arrow column (%s): list values of type %s are not numbers", col.DataType(), v.DataType())
	}
	values := ll.ListValues()
	for i := 0; i < rows; i++ {
		if col.IsNull(i) {
			return fmt.Errorf("arrow column (%s): row %d is null", col.DataType(), i)
		}
		s, e := ll.ValueOffsets(i)
		if int(e-s) != per {
			return fmt.Errorf("arrow column (%s): row %d has %d values, shape %v needs %d", col.DataType(), i, e-s, elem, per)
		}
		if values.NullN() > 0 {
			for j := s; j < e; j++ {
				if values.IsNull(int(j)) {
					return fmt.Errorf("arrow column (%s): row %d has a null value at %d", col.DataType(), i, j-s)
				}
			}
		}
		copyRow(out[i*per:(i+1)*per], s, e)
	}
	return nil
}

func convertRow[T numeric](vals []T) func(dst []float32, s, e int64) {
	return func(dst []float32, s, e int64) {
		for j, v := range vals[s:e] {
			dst[j] = float32(v)
		}
	}
}

// Uint8 copies a column of fixed-size byte rows into t as uint8 with shape
// [rows, elem...]. The column is FixedSizeBinary, Binary, LargeBinary or
// BinaryView (e.g. raw pixels), or a FixedSizeList/List/LargeList of uint8 or
// int8; every row must be non-null and hold exactly product(elem) bytes, else
// the error names the row.
func Uint8(t *tensor.Tensor, col arrow.Array, elem []int) error {
	per, err := elemCount(elem)
	if err != nil {
		return fmt.Errorf("arrow column (%s): %w", col.DataType(), err)
	}
	rows := col.Len()
	var row func(i int) []byte
	switch c := col.(type) {
	case interface{ Value(int) []byte }:
		row = c.Value
	case array.ListLike:
		var vals []byte
		switch v := c.ListValues().(type) {
		case *array.Uint8:
			vals = v.Uint8Values()
		case *array.Int8:
			iv := v.Int8Values()
			vals = make([]byte, len(iv))
			for j, x := range iv {
				vals[j] = byte(x)
			}
		default:
			return fmt.Errorf("arrow column (%s): list values of type %s are not bytes", col.DataType(), v.DataType())
		}
		row = func(i int) []byte {
			s, e := c.ValueOffsets(i)
			return vals[s:e]
		}
	default:
		return fmt.Errorf("arrow column (%s): want binary or a list of bytes", col.DataType())
	}
	out := t.ReuseU8(rows * per)
	t.Shape = append(append(t.Shape[:0], rows), elem...)
	for i := 0; i < rows; i++ {
		if col.IsNull(i) {
			return fmt.Errorf("arrow column (%s): row %d is null", col.DataType(), i)
		}
		b := row(i)
		if len(b) != per {
			return fmt.Errorf("arrow column (%s): row %d has %d bytes, shape %v needs %d", col.DataType(), i, len(b), elem, per)
		}
		copy(out[i*per:], b)
	}
	return nil
}

// Column converts col into t with a shape inferred from its type: numbers
// and booleans become float32 [rows]; lists of numbers float32 [rows, n], n
// the length of row 0 (every row must have it); binary and fixed-size binary
// uint8 [rows, n], every row of one length. Null values are an error.
func Column(t *tensor.Tensor, col arrow.Array) error {
	rows := col.Len()
	if col.NullN() > 0 {
		return fmt.Errorf("arrow column (%s): %d null values", col.DataType(), col.NullN())
	}
	switch c := col.(type) {
	case *array.Binary, *array.LargeBinary, *array.BinaryView, *array.FixedSizeBinary:
		w := 0
		if rows > 0 {
			w = len(c.(interface{ Value(int) []byte }).Value(0))
		}
		if rows == 0 || w == 0 {
			t.ReuseU8(0)
			t.SetShape(rows, w)
			return nil
		}
		if err := Uint8(t, col, []int{w}); err != nil {
			return fmt.Errorf("%w (binary rows must have one length, row 0's)", err)
		}
		return nil
	case array.ListLike:
		if rows == 0 {
			t.ReuseF32(0)
			t.SetShape(0, 0)
			return nil
		}
		s, e := c.ValueOffsets(0)
		if e == s {
			t.ReuseF32(0)
			t.SetShape(rows, 0)
			for i := 1; i < rows; i++ {
				if s, e := c.ValueOffsets(i); e != s {
					return fmt.Errorf("arrow column (%s): row %d has %d values, row 0 none", col.DataType(), i, e-s)
				}
			}
			return nil
		}
		return Float32(t, col, []int{int(e - s)})
	}
	var get func(int) float64
	switch c := col.(type) {
	case *array.Int8:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Int16:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Int32:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Int64:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Uint8:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Uint16:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Uint32:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Uint64:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Float32:
		get = func(i int) float64 { return float64(c.Value(i)) }
	case *array.Float64:
		get = c.Value
	case *array.Boolean:
		get = func(i int) float64 {
			if c.Value(i) {
				return 1
			}
			return 0
		}
	default:
		return fmt.Errorf("arrow column (%s): this type cannot become a tensor (numbers, booleans, lists of numbers and binary can)", col.DataType())
	}
	out := t.ReuseF32(rows)
	t.SetShape(rows)
	for r := range out {
		out[r] = float32(get(r))
	}
	return nil
}

// Record converts the columns of rec called names (every column, in schema
// order, when names is empty) with [Column]. It returns the tensors and the
// names they came from; an error names the column.
func Record(rec arrow.RecordBatch, names []string) ([]tensor.Tensor, []string, error) {
	sch := rec.Schema()
	if len(names) == 0 {
		for _, f := range sch.Fields() {
			names = append(names, f.Name)
		}
	}
	out := make([]tensor.Tensor, len(names))
	for i, name := range names {
		idx := sch.FieldIndices(name)
		if len(idx) == 0 {
			return nil, nil, fmt.Errorf("no column %q", name)
		}
		if err := Column(&out[i], rec.Column(idx[0])); err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", name, err)
		}
	}
	return out, names, nil
}
