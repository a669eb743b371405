package sink

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/psiflow/psiflow/tensor"
)

// Column names and schema metadata keys of the tables [Arrow] and [Parquet]
// write: one row per sample, its tensor bytes in a fixed-size binary column
// (little-endian float32 for float32 tensors), the sample shape and element
// type in the schema's metadata.
const (
	ColumnKey   = "key"
	ColumnLabel = "label"
	ColumnData  = "data"
	MetaShape   = "psiflow.shape" // sample shape, comma separated: "3,224,224"
	MetaDType   = "psiflow.dtype" // "uint8" or "float32"
)

// tableLayout is what the first batch fixes: every later batch must match it.
type tableLayout struct {
	dtype  tensor.DType
	shape  []int // per sample
	width  int   // bytes per sample
	schema *arrow.Schema
}

func layoutOf(b *tensor.Batch) (*tableLayout, error) {
	if len(b.Tensor.Shape) < 1 {
		return nil, fmt.Errorf("batch tensor has no shape")
	}
	l := &tableLayout{dtype: b.Tensor.DType, shape: slices.Clone(b.Tensor.Shape[1:])}
	l.width = 1
	for _, d := range l.shape {
		l.width *= d
	}
	if l.dtype == tensor.Float32 {
		l.width *= 4
	}
	if l.width <= 0 {
		return nil, fmt.Errorf("batch tensor shape %v: a sample has no bytes", b.Tensor.Shape)
	}
	dims := make([]string, len(l.shape))
	for i, d := range l.shape {
		dims[i] = strconv.Itoa(d)
	}
	md := arrow.NewMetadata([]string{MetaShape, MetaDType}, []string{strings.Join(dims, ","), l.dtype.String()})
	l.schema = arrow.NewSchema([]arrow.Field{
		{Name: ColumnKey, Type: arrow.BinaryTypes.String},
		{Name: ColumnLabel, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColumnData, Type: &arrow.FixedSizeBinaryType{ByteWidth: l.width}},
	}, &md)
	return l, nil
}

// record wraps b as a record batch. The data column points at b's tensor
// memory (no copy), so the record is valid only until b is released; the key
// and label columns are copied.
func (l *tableLayout) record(b *tensor.Batch) (arrow.RecordBatch, error) {
	n := 0
	if len(b.Tensor.Shape) > 0 {
		n = b.Tensor.Shape[0]
	}
	if b.Tensor.DType != l.dtype || !slices.Equal(b.Tensor.Shape[1:], l.shape) {
		return nil, fmt.Errorf("batch of %v %v does not match the table's %v samples of shape %v", b.Tensor.DType, b.Tensor.Shape, l.dtype, l.shape)
	}
	if len(b.Keys) != n || len(b.Labels) != n {
		return nil, fmt.Errorf("batch of %d samples has %d keys and %d labels", n, len(b.Keys), len(b.Labels))
	}
	raw := b.Tensor.Bytes()
	if len(raw) != n*l.width {
		return nil, fmt.Errorf("batch tensor holds %d bytes, its shape %v needs %d", len(raw), b.Tensor.Shape, n*l.width)
	}
	mem := memory.DefaultAllocator
	kb := array.NewStringBuilder(mem)
	defer kb.Release()
	kb.AppendValues(b.Keys, nil)
	keys := kb.NewArray()
	defer keys.Release()
	lb := array.NewInt64Builder(mem)
	defer lb.Release()
	lb.AppendValues(b.Labels, nil)
	labels := lb.NewArray()
	defer labels.Release()
	d := array.NewData(l.schema.Field(2).Type, n, []*memory.Buffer{nil, memory.NewBufferBytes(raw)}, nil, 0, 0)
	defer d.Release()
	data := array.NewFixedSizeBinaryData(d)
	defer data.Release()
	return array.NewRecordBatch(l.schema, []arrow.Array{keys, labels, data}, int64(n)), nil
}
