//go:build linux

package umaarrow_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/psiflow/psiflow/uma"
	"github.com/psiflow/psiflow/uma/umaarrow"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newPool(t *testing.T, size int64) (*uma.UMA, *uma.Pool) {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 1 << 20, MemoryLimit: func() (int64, string, error) { return 8 << 30, "test", nil }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := u.NewPool(t.Name(), size, uma.ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
		if err := u.Close(); err != nil {
			t.Errorf("uma close: %v", err)
		}
	})
	return u, p
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "pixels", Type: arrow.ListOf(arrow.PrimitiveTypes.Uint8)},
	{Name: "score", Type: arrow.PrimitiveTypes.Float32},
}, nil)

// buildRecord builds rows rows with every kind of buffer: fixed width,
// offsets, validity bitmaps and nested lists.
func buildRecord(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	labels := b.Field(1).(*array.StringBuilder)
	pix := b.Field(2).(*array.ListBuilder)
	pv := pix.ValueBuilder().(*array.Uint8Builder)
	score := b.Field(3).(*array.Float32Builder)
	for i := range rows {
		ids.Append(int64(i) * 7)
		if i%5 == 0 {
			labels.AppendNull()
		} else {
			labels.Append(fmt.Sprintf("img-%06d.jpg", i))
		}
		pix.Append(true)
		for k := range i % 17 {
			pv.Append(uint8(i + k))
		}
		score.Append(float32(i) / 3)
	}
	return b.NewRecordBatch()
}

func TestIPCRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rows int
		pool int64
	}{
		{"small", 10, 4 << 20},
		{"large", 50000, 32 << 20},
		{"pool too small falls back", 50000, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pool := newPool(t, tt.pool)
			ua := umaarrow.New(pool)
			mem := memory.NewCheckedAllocator(ua)
			defer mem.AssertSize(t, 0)

			rec := buildRecord(mem, tt.rows)
			defer rec.Release()
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if !r.Next() {
				t.Fatalf("no record read back: %v", r.Err())
			}
			got := r.RecordBatch()
			if !array.RecordEqual(rec, got) {
				t.Fatalf("IPC round trip changed the record")
			}
			if tt.pool > 1<<20 && pool.InUse() == 0 {
				t.Error("nothing was allocated from the pool")
			}
			if tt.pool == 1<<20 && ua.Fallbacks() == 0 {
				t.Error("a full pool did not fall back")
			}
		})
	}
}

func TestParquetRoundTrip(t *testing.T) {
	_, pool := newPool(t, 64<<20)
	ua := umaarrow.New(pool)
	mem := memory.NewCheckedAllocator(ua)
	defer mem.AssertSize(t, 0)

	rec := buildRecord(mem, 20000)
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy))
	if err := pqarrow.WriteTable(tbl, &buf, 4096, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem))); err != nil {
		t.Fatal(err)
	}
	got, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	// Parquet adds field-id metadata and renames the list element, so compare
	// the data column by column.
	if got.NumCols() != tbl.NumCols() || got.NumRows() != tbl.NumRows() {
		t.Fatalf("read %d×%d, wrote %d×%d", got.NumRows(), got.NumCols(), tbl.NumRows(), tbl.NumCols())
	}
	for i := range int(tbl.NumCols()) {
		if got.Schema().Field(i).Name != tbl.Schema().Field(i).Name || !array.ChunkedEqual(tbl.Column(i).Data(), got.Column(i).Data()) {
			t.Errorf("column %d (%s) changed in the Parquet round trip", i, tbl.Schema().Field(i).Name)
		}
	}
	if pool.InUse() == 0 {
		t.Error("nothing was allocated from the pool")
	}
}

func TestAllocatorFreesEverything(t *testing.T) {
	_, pool := newPool(t, 8<<20)
	ua := umaarrow.New(pool)
	rec := buildRecord(ua, 1000)
	if ua.Live() == 0 || pool.InUse() == 0 {
		t.Fatalf("live %d in use %d while a record is held", ua.Live(), pool.InUse())
	}
	rec.Release()
	if ua.Live() != 0 || pool.InUse() != 0 {
		t.Fatalf("after release: live %d, pool in use %d", ua.Live(), pool.InUse())
	}
}

func TestReallocate(t *testing.T) {
	_, pool := newPool(t, 4<<20)
	ua := umaarrow.New(pool)
	b := ua.Allocate(100)
	for i := range b {
		b[i] = byte(i)
	}
	b = ua.Reallocate(50, b) // shrink in place
	if len(b) != 50 || b[49] != 49 {
		t.Fatal("shrink lost data")
	}
	b = ua.Reallocate(100000, b)
	if len(b) != 100000 || b[49] != 49 || b[50] != 0 || b[99999] != 0 {
		t.Fatal("grow lost data or is not zeroed")
	}
	ua.Free(b)
	if ua.Live() != 0 || pool.InUse() != 0 {
		t.Fatalf("live %d in use %d", ua.Live(), pool.InUse())
	}
	if z := ua.Allocate(0); len(z) != 0 {
		t.Fatal("Allocate(0) not empty")
	}
}

func ExampleNew() {
	u, err := uma.New(uma.Config{ChunkSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()
	pool, _ := u.NewPool("arrow", 16<<20, uma.ArenaOptions{})
	defer pool.Close()

	mem := umaarrow.New(pool)
	b := array.NewInt64Builder(mem)
	b.AppendValues([]int64{1, 2, 3}, nil)
	arr := b.NewInt64Array()
	b.Release()
	fmt.Println(arr, pool.InUse() > 0)
	arr.Release()
	fmt.Println(pool.InUse())
	// Output:
	// [1 2 3] true
	// 0
}
