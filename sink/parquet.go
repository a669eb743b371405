package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/psiflow/psiflow/tensor"
)

// ParquetConfig names the folder a [Parquet] sink writes and how it splits it.
type ParquetConfig struct {
	// Dir is created if missing; files are named part-00000.parquet, part-00001...
	Dir string
	// RowsPerFile starts a new file once a file holds at least this many rows
	// (samples); 0 means 8192. Each batch is one row group.
	RowsPerFile int64
}

// Parquet writes batches into a folder of Parquet files, one row per sample
// (see [ColumnKey], [ColumnLabel], [ColumnData]), one row group per batch,
// uncompressed and without dictionaries or statistics on the tensor column.
// The sample shape and dtype ([MetaShape], [MetaDType]) are also written as the
// file's key-value metadata.
type Parquet struct {
	cfg    ParquetConfig
	layout *tableLayout
	f      *os.File
	w      *pqarrow.FileWriter
	rows   int64
	files  []string
	once   sync.Once
	cerr   error
}

// NewParquet checks cfg and creates the folder.
func NewParquet(cfg ParquetConfig) (*Parquet, error) {
	if cfg.Dir == "" {
		return nil, errors.New("sink parquet: no folder given")
	}
	if cfg.RowsPerFile < 0 {
		return nil, fmt.Errorf("sink parquet: rows per file %d: must be 0 (default) or more", cfg.RowsPerFile)
	}
	if cfg.RowsPerFile == 0 {
		cfg.RowsPerFile = 8192
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sink parquet: %w", err)
	}
	return &Parquet{cfg: cfg}, nil
}

// Files returns the files written so far.
func (p *Parquet) Files() []string { return append([]string(nil), p.files...) }

// Consume writes b as one row group, starting a new file when the current one is full.
func (p *Parquet) Consume(_ context.Context, b *tensor.Batch) error {
	if p.layout == nil {
		l, err := layoutOf(b)
		if err != nil {
			return fmt.Errorf("sink parquet: %w", err)
		}
		p.layout = l
	}
	rec, err := p.layout.record(b)
	if err != nil {
		return fmt.Errorf("sink parquet: %w", err)
	}
	defer rec.Release()
	if p.w != nil && p.rows >= p.cfg.RowsPerFile {
		if err := p.finish(); err != nil {
			return err
		}
	}
	if p.w == nil {
		name := filepath.Join(p.cfg.Dir, fmt.Sprintf("part-%05d.parquet", len(p.files)))
		f, err := os.Create(name)
		if err != nil {
			return fmt.Errorf("sink parquet: %w", err)
		}
		props := parquet.NewWriterProperties(
			parquet.WithDictionaryDefault(false),
			parquet.WithStatsFor(ColumnData, false),
			parquet.WithMaxRowGroupLength(1<<20),
		)
		w, err := pqarrow.NewFileWriter(p.layout.schema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			f.Close()
			return fmt.Errorf("sink parquet: %s: %w", name, err)
		}
		md := p.layout.schema.Metadata()
		for i, k := range md.Keys() {
			if err := w.AppendKeyValueMetadata(k, md.Values()[i]); err != nil {
				w.Close()
				return fmt.Errorf("sink parquet: %s: %w", name, err)
			}
		}
		p.f, p.w, p.rows = f, w, 0
		p.files = append(p.files, name)
	}
	if err := p.w.Write(rec); err != nil {
		return fmt.Errorf("sink parquet: %s: %w", p.files[len(p.files)-1], err)
	}
	p.rows += rec.NumRows()
	return nil
}

// finish closes the current file (pqarrow's Close also closes the file).
func (p *Parquet) finish() error {
	name := p.files[len(p.files)-1]
	err := p.w.Close()
	p.w, p.f = nil, nil
	if err != nil {
		return fmt.Errorf("sink parquet: %s: %w", name, err)
	}
	return nil
}

// Close finishes the last file.
func (p *Parquet) Close(error) error {
	p.once.Do(func() {
		if p.w != nil {
			p.cerr = p.finish()
		}
	})
	return p.cerr
}
