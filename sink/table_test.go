package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/tensor"
)

// batchSizes is what every table test writes: two full batches and a short last one.
var batchSizes = []int{5, 5, 3}

func writeAll(t *testing.T, s Sink) int {
	t.Helper()
	first := 0
	for _, n := range batchSizes {
		if err := s.Consume(context.Background(), testBatch(first, n, 4, 6)); err != nil {
			t.Fatal(err)
		}
		first += n
	}
	if err := s.Close(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(nil); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	return first
}

// checkRecords checks that recs hold samples 0..total-1 in order with their bytes.
func checkRecords(t *testing.T, recs []arrow.RecordBatch, total int, meta bool) {
	t.Helper()
	idx := 0
	for _, rec := range recs {
		if meta {
			checkMeta(t, rec.Schema().Metadata())
		}
		keys := rec.Column(0).(*array.String)
		labels := rec.Column(1).(*array.Int64)
		data := rec.Column(2).(*array.FixedSizeBinary)
		for r := range int(rec.NumRows()) {
			if want := fmt.Sprintf("class%d/img%05d.jpg", idx%3, idx); keys.Value(r) != want {
				t.Fatalf("row %d key %q, want %q", idx, keys.Value(r), want)
			}
			if labels.Value(r) != int64(idx%3) {
				t.Fatalf("row %d label %d", idx, labels.Value(r))
			}
			if err := checkSample(idx, data.Value(r)); err != nil {
				t.Fatal(err)
			}
			idx++
		}
	}
	if idx != total {
		t.Fatalf("read %d rows, wrote %d", idx, total)
	}
}

func checkMeta(t *testing.T, md arrow.Metadata) {
	t.Helper()
	if v, _ := md.GetValue(MetaShape); v != "3,4,6" {
		t.Errorf("shape metadata %q, want 3,4,6", v)
	}
	if v, _ := md.GetValue(MetaDType); v != "uint8" {
		t.Errorf("dtype metadata %q, want uint8", v)
	}
}

func readTables(t *testing.T, d *source.Tables) []arrow.RecordBatch {
	t.Helper()
	it, err := d.Batches(source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var recs []arrow.RecordBatch
	for {
		b, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Record.Retain()
		recs = append(recs, b.Record)
		b.Release()
		t.Cleanup(b.Record.Release)
	}
	return recs
}

func TestNullCounts(t *testing.T) {
	n := NewNull()
	total := writeAll(t, n)
	b, s, by := n.Counts()
	if b != int64(len(batchSizes)) || s != int64(total) || by != int64(total*3*4*6) {
		t.Fatalf("counts %d batches %d samples %d bytes", b, s, by)
	}
}

func TestArrowFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.arrow")
	a, err := NewArrow(ArrowConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	total := writeAll(t, a)
	recs := readTables(t, source.NewArrowIPC([]string{path}))
	if len(recs) != len(batchSizes) {
		t.Errorf("%d record batches, want one per batch (%d)", len(recs), len(batchSizes))
	}
	checkRecords(t, recs, total, true)
}

func TestArrowSocketStream(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	a, err := NewArrow(ArrowConfig{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		recs []arrow.RecordBatch
		err  error
	}
	got := make(chan result, 1)
	go func() {
		c, err := net.Dial("unix", sock)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		r, err := ipc.NewReader(c)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer r.Release()
		var recs []arrow.RecordBatch
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		got <- result{recs, r.Err()}
	}()
	total := writeAll(t, a)
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, r := range res.recs {
		t.Cleanup(r.Release)
	}
	checkRecords(t, res.recs, total, true)
}

func TestParquetRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pq")
	p, err := NewParquet(ParquetConfig{Dir: dir, RowsPerFile: 8})
	if err != nil {
		t.Fatal(err)
	}
	total := writeAll(t, p)
	files := p.Files()
	if len(files) != 2 { // 5+5 rows fill the first file past 8, the last 3 go to a second
		t.Fatalf("files %v, want 2", files)
	}
	checkRecords(t, readTables(t, source.NewParquet(files)), total, false)
	for _, name := range files { // package source's Parquet records do not carry the metadata: the footer does
		f, err := file.OpenParquetFile(name, false)
		if err != nil {
			t.Fatal(err)
		}
		kv := f.MetaData().KeyValueMetadata()
		keys, vals := kv.Keys(), kv.Values()
		md := arrow.NewMetadata(keys, vals)
		checkMeta(t, md)
		f.Close()
	}
}

func TestTableErrors(t *testing.T) {
	if _, err := NewArrow(ArrowConfig{}); err == nil {
		t.Error("NewArrow with neither a path nor a socket: no error")
	}
	if _, err := NewParquet(ParquetConfig{}); err == nil {
		t.Error("NewParquet without a folder: no error")
	}
	p, err := NewParquet(ParquetConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(nil)
	if err := p.Consume(context.Background(), testBatch(0, 2, 4, 6)); err != nil {
		t.Fatal(err)
	}
	err = p.Consume(context.Background(), testBatch(0, 2, 4, 7))
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("batch of another shape: %v, want a mismatch error", err)
	}
	bad := testBatch(0, 2, 4, 6)
	bad.Labels = bad.Labels[:1]
	if err := p.Consume(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "labels") {
		t.Errorf("batch with a missing label: %v", err)
	}
	f32 := &tensor.Batch{Keys: []string{"a"}, Labels: []int64{0}, Tensor: tensor.Tensor{DType: tensor.Float32, Shape: []int{1, 2}, F32: []float32{1, 2}}}
	if err := p.Consume(context.Background(), f32); err == nil {
		t.Error("float32 batch into a uint8 table: no error")
	}
}
