package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// checkMagic reads the first bytes of the table file at p and refuses, by name, a
// file of the other table format (or an Arrow IPC stream where the random-access
// file format is read): its footer would otherwise give a message about sizes.
func checkMagic(f io.ReaderAt, p string, format TableFormat) error {
	var head [8]byte
	n, _ := f.ReadAt(head[:], 0)
	b := head[:n]
	var what string
	switch {
	case bytes.HasPrefix(b, []byte("ARROW1")):
		what = "an Arrow IPC file (it starts with ARROW1)"
	case bytes.HasPrefix(b, []byte("PAR1")):
		what = "a Parquet file (it starts with PAR1)"
	case bytes.HasPrefix(b, []byte{0xff, 0xff, 0xff, 0xff}):
		what = "an Arrow IPC stream (it starts with the stream's continuation marker), not the random-access file format"
	default:
		return nil // not recognised: the reader says what is wrong
	}
	switch {
	case format == Parquet && !strings.HasPrefix(what, "a Parquet"):
		return &ReadError{Op: "read parquet file", Path: p, Off: 0, Err: fmt.Errorf("this is %s, not Parquet: read it as Arrow IPC (format: arrow, source.NewArrowIPC) or name it .arrow", what)}
	case format == ArrowIPC && !strings.HasPrefix(what, "an Arrow IPC file"):
		fix := "read it as Parquet (format: parquet, source.NewParquet) or name it .parquet"
		if strings.HasPrefix(what, "an Arrow IPC stream") {
			fix = "write it with the IPC file writer (pyarrow.ipc.new_file, arrow-go ipc.NewFileWriter)"
		}
		return &ReadError{Op: "read arrow file", Path: p, Off: 0, Err: fmt.Errorf("this is %s, not an Arrow IPC file: %s", what, fix)}
	}
	return nil
}

// validateParquet checks what a Parquet footer declares before anything is
// allocated from it: every column chunk of every row group lies inside the
// file (offsets and compressed sizes), sizes and row counts are not negative,
// and no column chunk declares more than maxChunk bytes uncompressed.
func validateParquet(r *file.Reader, fileSize, maxChunk int64) error {
	md := r.MetaData()
	if md.NumRows < 0 {
		return fmt.Errorf("corrupt footer: %d rows", md.NumRows)
	}
	for i := range r.NumRowGroups() {
		rg := md.RowGroup(i)
		if rg.NumRows() < 0 {
			return fmt.Errorf("corrupt footer: row group %d has %d rows", i, rg.NumRows())
		}
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column %d: %w", i, c, err)
			}
			off := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
				off = cc.DictionaryPageOffset()
			}
			size, raw := cc.TotalCompressedSize(), cc.TotalUncompressedSize()
			switch {
			case off < 0 || size < 0 || raw < 0:
				return fmt.Errorf("corrupt footer: row group %d column %d: offset %d, size %d, uncompressed %d", i, c, off, size, raw)
			case off > fileSize || size > fileSize-off:
				return fmt.Errorf("corrupt footer: row group %d column %d: %d bytes at offset %d run past the end of the file (%d bytes)", i, c, size, off, fileSize)
			case raw > maxChunk:
				return fmt.Errorf("row group %d column %d declares %d bytes uncompressed, over the limit of %d (Options.MaxMember)", i, c, raw, maxChunk)
			}
		}
	}
	return nil
}

// readerAt gives arrow-go io.ReaderAt, io.Reader and io.Seeker over a File,
// reading synchronously through a Reader.
type readerAt struct {
	mu  sync.Mutex
	r   Reader
	f   *File
	pos int64
}

func (a *readerAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off >= a.f.Size {
		return 0, io.EOF
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.r.Submit(Request{File: a.f, Off: off, Buf: p}); err != nil {
		return 0, err
	}
	var c [1]Completion
	if _, err := a.r.Reap(context.Background(), c[:], 1); err != nil {
		return 0, err
	}
	if c[0].Err != nil {
		return c[0].N, c[0].Err
	}
	if c[0].N < len(p) {
		return c[0].N, io.EOF
	}
	return c[0].N, nil
}

func (a *readerAt) Read(p []byte) (int, error) {
	n, err := a.ReadAt(p, a.pos)
	a.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (a *readerAt) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += a.pos
	case io.SeekEnd:
		off += a.f.Size
	default:
		return a.pos, fmt.Errorf("seek %s: bad whence %d", a.f.Path, whence)
	}
	if off < 0 {
		return a.pos, fmt.Errorf("seek %s: negative offset %d", a.f.Path, off)
	}
	a.pos = off
	return off, nil
}

func (a *readerAt) Close() error { return a.f.Close() }
