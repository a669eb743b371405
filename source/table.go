package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TableFormat is the file format of a [Tables] dataset.
type TableFormat int

// The table formats.
const (
	Parquet TableFormat = iota
	ArrowIPC
)

func (f TableFormat) String() string {
	if f == ArrowIPC {
		return "arrow"
	}
	return "parquet"
}

// Tables is a dataset of Parquet or Arrow IPC files read as record batches:
// one batch per Parquet row group or per IPC record batch. Columns projects
// the batches onto the named top-level columns (all when empty).
type Tables struct {
	format  TableFormat
	paths   []string
	columns []string
	// Allocator allocates the batches' memory (default memory.DefaultAllocator).
	Allocator memory.Allocator
}

// NewParquet returns a dataset of Parquet files projected onto columns.
func NewParquet(paths []string, columns ...string) *Tables {
	return &Tables{format: Parquet, paths: slices.Clone(paths), columns: columns}
}

// NewArrowIPC returns a dataset of Arrow IPC (file format) files projected onto columns.
func NewArrowIPC(paths []string, columns ...string) *Tables {
	return &Tables{format: ArrowIPC, paths: slices.Clone(paths), columns: columns}
}

// Batch is one record batch of a table dataset. Release it when done.
type Batch struct {
	// Record holds the projected columns.
	Record arrow.RecordBatch
	// File is the file it came from; Index the row group (Parquet) or record
	// batch (IPC) number in that file; Off its byte offset when known (Parquet).
	File  string
	Index int
	Off   int64

	bytes   int64
	budget  Budget
	release sync.Once
}

// Len returns the bytes held by the batch's buffers.
func (b *Batch) Len() int64 { return b.bytes }

// Release releases the record and returns the batch's budget.
func (b *Batch) Release() {
	b.release.Do(func() {
		b.Record.Release()
		if b.budget != nil && b.bytes > 0 {
			b.budget.Release(b.bytes)
		}
	})
}

type tableRef struct{ file, index int }

// Batches starts an epoch over the dataset's batches for one rank. The
// footers of all files are read first to list the batches; rank r of w gets
// every w-th batch of the epoch's batch order (shuffled per epoch when
// Shuffle is set, then through the bounded ShuffleBuffer). Each batch is
// charged to the Budget when Next returns it. The files are read by
// arrow-go through os.File (pread), not through the io_uring Reader.
func (d *Tables) Batches(opts Options) (Iterator[*Batch], error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	reader, err := NewReader(r.Reader)
	if err != nil {
		return nil, err
	}
	it := &tableIter{d: d, r: r, reader: reader, open: map[int]tableFile{}, skip: newSkipper(r)}
	if it.mem = d.Allocator; it.mem == nil {
		it.mem = memory.DefaultAllocator
	}
	var refs []tableRef
	for i := range d.paths {
		tf, err := it.openFile(i)
		if err != nil {
			if serr := it.skip.handle(err, Skipped{Path: d.paths[i], What: "the file", Off: -1, Lost: -1}); serr != nil {
				it.Close()
				return nil, serr
			}
			continue
		}
		for j := range tf.batches() {
			refs = append(refs, tableRef{i, j})
		}
	}
	order, err := r.rankShards(len(refs))
	if err != nil {
		it.Close()
		return nil, err
	}
	order = shuffleRefs(order, r.ShuffleBuffer, r.sampleRNG())
	it.order = make([]tableRef, len(order))
	for k, i := range order {
		it.order[k] = refs[i]
	}
	if r.Resume != nil {
		it.next = int(min(max(r.Resume.Next, 0), int64(len(it.order))))
	}
	return it, nil
}

type tableFile struct {
	f   *readerAt
	ipc *ipc.FileReader
	pq  *pqarrow.FileReader
	pqf *file.Reader
	// cols are the projected column indices (Parquet leaves or IPC fields).
	cols []int
}

func (t tableFile) batches() int {
	if t.ipc != nil {
		return t.ipc.NumRecords()
	}
	return t.pqf.NumRowGroups()
}

func (t tableFile) close() {
	if t.ipc != nil {
		t.ipc.Close()
	}
	if t.pqf != nil {
		t.pqf.Close()
	} else if t.f != nil {
		t.f.Close()
	}
}

type tableIter struct {
	d      *Tables
	r      resolved
	reader Reader
	mem    memory.Allocator
	order  []tableRef
	next   int
	open   map[int]tableFile
	recent []int
	skip   skipper
	err    error
	closed bool
}

const maxOpenTables = 16

func (it *tableIter) openFile(i int) (tf tableFile, err error) {
	if tf, ok := it.open[i]; ok {
		return tf, nil
	}
	p := it.d.paths[i]
	fh, err := it.reader.Open(p)
	if err != nil {
		return tf, err
	}
	f := &readerAt{r: it.reader, f: fh}
	footer := max(fh.Size-8, 0)
	defer func() {
		if r := recover(); r != nil { // arrow-go can panic on corrupt input
			f.Close()
			err = &ReadError{Op: "read " + it.d.format.String() + " footer of", Path: p, Off: footer, Err: fmt.Errorf("corrupt file: %v", r)}
		}
	}()
	tf.f = f
	if err := checkMagic(f, p, it.d.format); err != nil {
		f.Close()
		return tf, err
	}
	switch it.d.format {
	case ArrowIPC:
		tf.ipc, err = ipc.NewFileReader(f, ipc.WithAllocator(it.mem), ipc.WithBodySizeLimit(it.r.MaxMember))
		if err != nil {
			f.Close()
			return tf, &ReadError{Op: "read arrow footer of", Path: p, Off: footer, Err: err}
		}
		for _, c := range it.d.columns {
			idx := tf.ipc.Schema().FieldIndices(c)
			if len(idx) == 0 {
				tf.close()
				return tf, fmt.Errorf("source: %s has no column %q", p, c)
			}
			tf.cols = append(tf.cols, idx[0])
		}
	default:
		tf.pqf, err = file.NewParquetReader(f)
		if err != nil {
			f.Close()
			return tf, &ReadError{Op: "read parquet footer of", Path: p, Off: footer, Err: err}
		}
		if err := validateParquet(tf.pqf, fh.Size, it.r.MaxMember); err != nil {
			tf.close()
			return tf, &ReadError{Op: "read parquet footer of", Path: p, Off: footer, Err: err}
		}
		tf.pq, err = pqarrow.NewFileReader(tf.pqf, pqarrow.ArrowReadProperties{BatchSize: 1 << 30}, it.mem)
		if err != nil {
			tf.close()
			return tf, &ReadError{Op: "read parquet schema of", Path: p, Off: footer, Err: err}
		}
		schema := tf.pqf.MetaData().Schema
		for _, c := range it.d.columns {
			idx := schema.ColumnIndexByName(c)
			if idx < 0 {
				tf.close()
				return tf, fmt.Errorf("source: %s has no column %q", p, c)
			}
			tf.cols = append(tf.cols, idx)
		}
	}
	it.open[i] = tf
	it.recent = append(it.recent, i)
	if len(it.recent) > maxOpenTables {
		old := it.recent[0]
		it.recent = it.recent[1:]
		it.open[old].close()
		delete(it.open, old)
	}
	return tf, nil
}

func (it *tableIter) Next(ctx context.Context) (*Batch, error) {
	for {
		if it.closed {
			return nil, ErrClosed
		}
		if it.err != nil {
			return nil, it.err
		}
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if it.next >= len(it.order) {
			return nil, io.EOF
		}
		ref := it.order[it.next]
		b, err := it.read(ctx, ref)
		it.next++
		if err != nil {
			what := fmt.Sprintf("record batch %d", ref.index)
			if it.d.format == Parquet {
				what = fmt.Sprintf("row group %d", ref.index)
			}
			if serr := it.skip.handle(err, Skipped{Path: it.d.paths[ref.file], What: what, Off: -1, Lost: -1}); serr != nil {
				it.err = serr
				return nil, serr
			}
			continue
		}
		if it.r.Budget != nil && b.bytes > 0 {
			if err := it.r.Budget.Acquire(ctx, b.bytes); err != nil {
				b.Release()
				it.next--
				return nil, err
			}
			b.budget = it.r.Budget
		}
		return b, nil
	}
}

func (it *tableIter) read(ctx context.Context, ref tableRef) (b *Batch, err error) {
	p := it.d.paths[ref.file]
	tf, err := it.openFile(ref.file)
	if err != nil {
		return nil, err
	}
	b = &Batch{File: p, Index: ref.index, Off: -1}
	defer func() {
		if r := recover(); r != nil {
			err = &ReadError{Op: fmt.Sprintf("read batch %d of", ref.index), Path: p, Off: b.Off, Err: fmt.Errorf("corrupt file: %v", r)}
		}
	}()
	var rec arrow.RecordBatch
	if tf.ipc != nil {
		full, err := tf.ipc.RecordBatch(ref.index)
		if err != nil {
			return nil, &ReadError{Op: fmt.Sprintf("read record batch %d of", ref.index), Path: p, Off: -1, Err: err}
		}
		rec = project(full, tf.cols) // RecordBatch(i) records are owned by the reader: retain what we keep
	} else {
		rg := tf.pqf.MetaData().RowGroup(ref.index)
		b.Off = rg.FileOffset()
		if cc, err := rg.ColumnChunk(0); err == nil && b.Off == 0 {
			b.Off = cc.DataPageOffset()
		}
		cols := tf.cols
		if len(cols) == 0 {
			cols = nil
		}
		rr, err := tf.pq.GetRecordReader(ctx, cols, []int{ref.index})
		if err != nil {
			return nil, &ReadError{Op: fmt.Sprintf("read row group %d of", ref.index), Path: p, Off: b.Off, Err: err}
		}
		defer rr.Release()
		var parts []arrow.RecordBatch
		for rr.Next() {
			r := rr.RecordBatch()
			r.Retain()
			parts = append(parts, r)
		}
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			for _, r := range parts {
				r.Release()
			}
			return nil, &ReadError{Op: fmt.Sprintf("read row group %d of", ref.index), Path: p, Off: b.Off, Err: err}
		}
		rec = concat(rr.Schema(), parts, it.mem)
	}
	b.Record = rec
	b.bytes = recordBytes(rec)
	return b, nil
}

// project returns a retained record with the columns cols of rec (all when empty).
func project(rec arrow.RecordBatch, cols []int) arrow.RecordBatch {
	if len(cols) == 0 {
		rec.Retain()
		return rec
	}
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		arrs[i] = rec.Column(c)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), arrs, rec.NumRows())
}

// concat joins parts (normally one) into one record and releases the parts.
func concat(schema *arrow.Schema, parts []arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	if len(parts) == 1 {
		return parts[0]
	}
	if len(parts) == 0 {
		return array.NewRecordBatch(schema, emptyColumns(schema, mem), 0)
	}
	cols := make([]arrow.Array, schema.NumFields())
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	for c := range cols {
		chunks := make([]arrow.Array, len(parts))
		for i, p := range parts {
			chunks[i] = p.Column(c)
		}
		a, err := array.Concatenate(chunks, mem)
		if err != nil { // same schema by construction
			a = chunks[0]
			a.Retain()
		}
		cols[c] = a
	}
	for _, p := range parts {
		p.Release()
	}
	rec := array.NewRecordBatch(schema, cols, rows)
	for _, a := range cols {
		a.Release()
	}
	return rec
}

func emptyColumns(schema *arrow.Schema, mem memory.Allocator) []arrow.Array {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		b := array.NewBuilder(mem, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return cols
}

func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += arrayBytes(c.Data())
	}
	return n
}

func arrayBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}

func (it *tableIter) Position() Position {
	p := it.r.position()
	p.Next = int64(it.next)
	return p
}

func (it *tableIter) Skipped() int64 { return it.skip.skipped }

func (it *tableIter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	for _, tf := range it.open {
		tf.close()
	}
	it.open = nil
	return it.reader.Close()
}
