package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/psiflow/psiflow/tensor"
)

// ParquetConfig names the folder a [Parquet] sink writes and how it splits it.
type ParquetConfig struct {
	// Dir is created if missing; files are named part-00000.parquet, part-00001...
	// A folder that is not empty is refused unless Overwrite is set.
	Dir string
	// RowsPerFile starts a new file once a file holds at least this many rows
	// (samples); 0 means 8192. Each batch is one row group.
	RowsPerFile int64
	// Overwrite lets the sink write into a folder that is not empty: once the run
	// has ended cleanly this run's files replace the part-NNNNN.parquet files
	// there and the parts beyond this run's count are removed; files that are not
	// Parquet are left alone, and other Parquet files are refused (they would be
	// read back with the parts).
	Overwrite bool
}

// Parquet writes batches into a folder of Parquet files, one row per sample
// (see [ColumnKey], [ColumnLabel], [ColumnData]), one row group per batch,
// uncompressed and without dictionaries or statistics on the tensor column.
// The sample shape and dtype ([MetaShape], [MetaDType]) are also written as the
// file's key-value metadata.
//
// Every file is written under a hidden temporary name in the folder and synced;
// Close(nil) renames them all to their part names, and a failure (a failed
// Consume, Close with a cause, a full disk) removes them instead: the folder holds
// this run's whole output or none of it.
type Parquet struct {
	cfg    ParquetConfig
	layout *tableLayout
	create createTemp
	f      *destFile
	w      *pqarrow.FileWriter
	rows   int64
	files  []string // final names
	temps  []string // where they are written
	stale  []string // part files of an earlier run that this one replaces (Overwrite)
	failed error
	once   sync.Once
	cerr   error
}

// keptNote says what the folder holds after a run whose files were removed.
func (p *Parquet) keptNote() string {
	if len(p.stale) > 0 {
		return "the folder keeps none of this run's files; the parts of an earlier run are left as they were"
	}
	return "the folder keeps none of this run's files"
}

var partName = regexp.MustCompile(`^part-[0-9]{5}\.parquet$`)

// NewParquet checks cfg, creates the folder, and refuses one that is not empty
// (unless cfg.Overwrite).
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
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("sink parquet: %w", err)
	}
	p := &Parquet{cfg: cfg, create: osCreateTemp}
	var names, foreign []string
	for _, e := range entries {
		n := e.Name()
		names = append(names, n)
		switch {
		case partName.MatchString(n):
			p.stale = append(p.stale, filepath.Join(cfg.Dir, n))
		case isTemp(n):
			p.stale = append(p.stale, filepath.Join(cfg.Dir, n)) // left by a killed run
		case strings.EqualFold(filepath.Ext(n), ".parquet"):
			foreign = append(foreign, n)
		}
	}
	if len(names) > 0 && !cfg.Overwrite {
		return nil, refuseNonEmpty("parquet", "folder "+cfg.Dir, names)
	}
	if len(foreign) > 0 {
		return nil, fmt.Errorf("sink parquet: folder %s holds Parquet files that are not this sink's parts (%s): refusing to overwrite into it, since they would be read back with the new parts", cfg.Dir, strings.Join(foreign, ", "))
	}
	return p, nil
}

// Files returns the files of this run: written so far, and named as they will be
// once Close(nil) has committed them.
func (p *Parquet) Files() []string { return append([]string(nil), p.files...) }

// Consume writes b as one row group, starting a new file when the current one is full.
func (p *Parquet) Consume(_ context.Context, b *tensor.Batch) error {
	if p.failed != nil {
		return fmt.Errorf("%w (an earlier write failed)", p.failed)
	}
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
			return p.fail(err)
		}
	}
	if p.w == nil {
		name := filepath.Join(p.cfg.Dir, fmt.Sprintf("part-%05d.parquet", len(p.files)))
		tf, err := p.create(p.cfg.Dir, tempPattern(name))
		if err != nil {
			return p.fail(fmt.Errorf("sink parquet: %s: %w", name, err))
		}
		f := &destFile{outFile: tf, dest: name}
		p.temps, p.files = append(p.temps, f.Name()), append(p.files, name)
		props := parquet.NewWriterProperties(
			parquet.WithDictionaryDefault(false),
			parquet.WithStatsFor(ColumnData, false),
			parquet.WithMaxRowGroupLength(1<<20),
		)
		w, err := pqarrow.NewFileWriter(p.layout.schema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			f.Close()
			return p.fail(fileError("parquet", name, f, err))
		}
		md := p.layout.schema.Metadata()
		for i, k := range md.Keys() {
			if err := w.AppendKeyValueMetadata(k, md.Values()[i]); err != nil {
				w.Close()
				return p.fail(fileError("parquet", name, f, err))
			}
		}
		p.f, p.w, p.rows = f, w, 0
	}
	if err := p.w.Write(rec); err != nil {
		return p.fail(fileError("parquet", p.files[len(p.files)-1], p.f, err))
	}
	p.rows += rec.NumRows()
	return nil
}

// fail records a failed write: the run's files are then discarded at Close.
func (p *Parquet) fail(err error) error {
	p.failed = err
	return err
}

// finish closes the current file (pqarrow's Close also closes, and so syncs, the
// file, except when flushing its last row group fails: then it is closed here).
func (p *Parquet) finish() error {
	name, f := p.files[len(p.files)-1], p.f
	err := p.w.Close()
	if err != nil {
		_ = f.Close() // pqarrow returned before closing it; a second Close is harmless
	}
	p.w, p.f = nil, nil
	if err != nil {
		return fileError("parquet", name, f, err)
	}
	return nil
}

// Close finishes the last file. With a nil cause and nothing failed it renames
// every file to its part name (and, with Overwrite, removes the parts of an
// earlier run beyond this run's count); otherwise it removes them all, and
// returns a [*NotWrittenError] naming the folder when the cause alone made it
// do so (a run stopped or failed upstream).
func (p *Parquet) Close(cause error) error {
	p.once.Do(func() {
		var err error
		if p.w != nil {
			err = p.finish()
		}
		if err == nil {
			err = p.failed
		}
		if err != nil || cause != nil {
			p.cerr = errors.Join(err, discard(p.temps))
			if p.cerr != nil {
				p.cerr = fmt.Errorf("%w (%w)", p.cerr, &nothingKept{"the folder keeps none of this run's files"})
			} else if len(p.temps) > 0 {
				p.cerr = &NotWrittenError{Kind: "parquet", Dest: p.cfg.Dir, Kept: p.keptNote()}
			}
			return
		}
		keep := map[string]bool{}
		for _, f := range p.files {
			keep[f] = true
		}
		var old []string
		for _, s := range p.stale {
			if !keep[s] {
				old = append(old, s)
			}
		}
		if err := commit(p.temps, p.files); err != nil {
			p.cerr = fmt.Errorf("sink parquet: %w", err)
			return
		}
		if err := discard(old); err != nil {
			p.cerr = fmt.Errorf("sink parquet: removing the parts of an earlier run: %w", err)
		}
	})
	return p.cerr
}
