package decode

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// ArrowToFloat32 copies a column of fixed-size numeric rows into t as
// float32 with shape [rows, elem...]. The column is a FixedSizeList, List or
// LargeList of any integer or floating-point type; every row must be non-null
// and hold exactly product(elem) values, else the error names the row.
func ArrowToFloat32(t *Tensor, col arrow.Array, elem []int) error {
	per, err := elemCount(elem)
	if err != nil {
		return fmt.Errorf("arrow column (%s): %w", col.DataType(), err)
	}
	ll, ok := col.(array.ListLike)
	if !ok {
		return fmt.Errorf("arrow column (%s): want a list of numbers", col.DataType())
	}
	rows := col.Len()
	out := t.resetF32(rows * per)
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

// ArrowToUint8 copies a column of fixed-size byte rows into t as uint8 with
// shape [rows, elem...]. The column is FixedSizeBinary, Binary, LargeBinary
// or BinaryView (e.g. raw pixels), or a FixedSizeList/List/LargeList of uint8
// or int8; every row must be non-null and hold exactly product(elem) bytes,
// else the error names the row.
func ArrowToUint8(t *Tensor, col arrow.Array, elem []int) error {
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
	out := t.resetU8(rows * per)
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

// RawToTensor interprets data as a packed uint8 tensor of the given shape
// (a raw-bytes sample named name) and copies it into t.
func RawToTensor(t *Tensor, data []byte, shape []int, name string) error {
	n, err := elemCount(shape)
	if err != nil {
		return &Error{Name: name, Format: "raw", Err: err}
	}
	if len(data) != n {
		return &Error{Name: name, Format: "raw", Err: fmt.Errorf("%d bytes, shape %v needs %d", len(data), shape, n)}
	}
	copy(t.resetU8(n), data)
	t.setShape(shape...)
	return nil
}
