package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/psiflow/psiflow/tensor"
)

// ArrowConfig names where an [Arrow] sink writes: exactly one of Path and Socket.
type ArrowConfig struct {
	// Path is an Arrow IPC file (the random-access file format, which
	// source.NewArrowIPC and pyarrow.ipc.open_file read). It is written under a
	// hidden temporary name in the same folder and renamed to Path when the run
	// ends cleanly; a failure removes it. A file that is already at Path and not
	// empty is refused unless Overwrite is set.
	Path string
	// Overwrite lets a clean end replace a file already at Path (until then the
	// old file stays as it was).
	Overwrite bool
	// Socket is a Unix socket path to listen on; the first client that connects
	// receives an Arrow IPC stream (pyarrow.ipc.open_stream). The socket file is
	// removed when the sink closes.
	Socket string
}

// Arrow writes batches as Arrow record batches, one row per sample (see
// [ColumnKey], [ColumnLabel], [ColumnData]), to a file or a Unix socket.
type Arrow struct {
	cfg    ArrowConfig
	ln     *net.UnixListener
	w      io.WriteCloser // file or connection
	df     *destFile      // w when it is a file
	temp   string         // the file's temporary name
	failed error
	layout *tableLayout
	file   *ipc.FileWriter
	stream *ipc.Writer
	once   sync.Once
	cerr   error
}

// NewArrow opens the file or starts listening on the socket.
func NewArrow(cfg ArrowConfig) (*Arrow, error) {
	if (cfg.Path == "") == (cfg.Socket == "") {
		return nil, errors.New("sink arrow: give exactly one of a file path and a socket path")
	}
	a := &Arrow{cfg: cfg}
	if cfg.Path != "" {
		return a, a.createFile(osCreateTemp)
	}
	ln, err := listenUnix("unix", cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("sink arrow: %w", err)
	}
	a.ln = ln
	return a, nil
}

// createFile checks the destination and opens the temporary file with create.
func (a *Arrow) createFile(create createTemp) error {
	if fi, err := os.Stat(a.cfg.Path); err == nil {
		switch {
		case fi.IsDir():
			return fmt.Errorf("sink arrow: %s is a folder, not a file", a.cfg.Path)
		case fi.Size() > 0 && !a.cfg.Overwrite:
			return refuseNonEmpty("arrow", "file "+a.cfg.Path, []string{fmt.Sprintf("%d bytes", fi.Size())})
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sink arrow: %w", err)
	}
	f, err := create(filepath.Dir(a.cfg.Path), tempPattern(a.cfg.Path))
	if err != nil {
		return fmt.Errorf("sink arrow: %s: %w", a.cfg.Path, err)
	}
	a.df = &destFile{outFile: f, dest: a.cfg.Path}
	a.w, a.temp = a.df, f.Name()
	return nil
}

// Accept waits for the socket's client (a file sink returns at once). Consume
// calls it when it has not been called.
func (a *Arrow) Accept(ctx context.Context) error {
	if a.w != nil {
		return nil
	}
	if a.ln == nil {
		return errors.New("sink arrow: closed")
	}
	c, err := acceptUnix(ctx, a.ln)
	if err != nil {
		return fmt.Errorf("sink arrow: socket %s: %w", a.cfg.Socket, err)
	}
	a.w = c
	return nil
}

// Consume writes b as one record batch.
func (a *Arrow) Consume(ctx context.Context, b *tensor.Batch) error {
	if a.failed != nil {
		return fmt.Errorf("%w (an earlier write failed)", a.failed)
	}
	if err := a.Accept(ctx); err != nil {
		return err
	}
	if a.layout == nil {
		l, err := layoutOf(b)
		if err != nil {
			return fmt.Errorf("sink arrow: %w", err)
		}
		a.layout = l
		if a.cfg.Path != "" {
			if a.file, err = ipc.NewFileWriter(a.w, ipc.WithSchema(l.schema)); err != nil {
				a.failed = fileError("arrow", a.cfg.Path, a.df, err)
				return a.failed
			}
		} else {
			a.stream = ipc.NewWriter(a.w, ipc.WithSchema(l.schema))
		}
	}
	rec, err := a.layout.record(b)
	if err != nil {
		return fmt.Errorf("sink arrow: %w", err)
	}
	defer rec.Release()
	if a.file != nil {
		err = a.file.Write(rec)
	} else {
		err = a.stream.Write(rec)
	}
	if err != nil {
		a.failed = fileError("arrow", a.where(), a.df, err)
		return a.failed
	}
	return nil
}

func (a *Arrow) where() string {
	if a.cfg.Path != "" {
		return a.cfg.Path
	}
	return a.cfg.Socket
}

// Close finishes the file (its footer) or the stream (its end marker) and
// closes it. A file is then renamed to its path, unless cause is not nil or a
// write failed: then it is removed, and a file already at the path stays as it
// was; when the cause alone removed it (a run stopped or failed upstream), the
// error is a [*NotWrittenError] naming the path. A file sink with no batch
// leaves an empty file.
func (a *Arrow) Close(cause error) error {
	a.once.Do(func() {
		var errs []error
		if a.file != nil {
			if err := a.file.Close(); err != nil { // the footer: a full disk shows here too
				errs = append(errs, fileError("arrow", a.cfg.Path, a.df, err))
			}
		}
		if a.stream != nil {
			errs = append(errs, a.stream.Close())
		}
		if a.w != nil {
			errs = append(errs, a.w.Close())
		}
		if a.ln != nil {
			errs = append(errs, closeListener(a.ln, a.cfg.Socket))
		}
		if a.temp != "" {
			if err := errors.Join(append(errs, a.failed)...); err != nil || cause != nil {
				derr := discard([]string{a.temp})
				errs = append(errs, derr)
				switch {
				case err != nil:
					errs = append(errs, &nothingKept{a.cfg.Path + " is left as it was"})
				case derr == nil:
					// Only the cause removed it: say which file was not written.
					kept := "nothing is there"
					if _, serr := os.Lstat(a.cfg.Path); serr == nil {
						kept = "the file already there is left as it was"
					}
					a.cerr = &NotWrittenError{Kind: "arrow", Dest: a.cfg.Path, Kept: kept}
					return
				}
			} else {
				errs = append(errs, commit([]string{a.temp}, []string{a.cfg.Path}))
			}
		}
		if err := errors.Join(errs...); err != nil {
			a.cerr = fmt.Errorf("sink arrow: %s: %w", a.where(), err)
		}
	})
	return a.cerr
}
