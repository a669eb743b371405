package sink

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// outFile is a file a sink writes under a temporary name: Close flushes it to the
// disk (fsync), so that a full disk shows up here and not after the rename.
type outFile interface {
	io.Writer
	Close() error
	Name() string
}

// createTemp makes the temporary file of a sink in dir (its final name's folder,
// so that the rename is atomic). Tests replace it to inject faults.
type createTemp func(dir, pattern string) (outFile, error)

func osCreateTemp(dir, pattern string) (outFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return syncedFile{f}, nil
}

// syncedFile is an *os.File whose Close syncs it first.
type syncedFile struct{ *os.File }

func (f syncedFile) Close() error {
	serr := f.File.Sync()
	cerr := f.File.Close()
	if serr != nil {
		return &fs.PathError{Op: "fsync", Path: f.Name(), Err: serr}
	}
	return cerr
}

// destFile is a sink's temporary file whose write and close errors name the
// destination (the name the user gave, not the hidden temporary one) and which
// keeps the first: the encoders (arrow-go) wrap a write error in their own words
// ("unknown error type: …"), and the sink reports the plain one instead.
type destFile struct {
	outFile
	dest string
	err  error // the first failed write or close, naming dest
}

func (f *destFile) Write(p []byte) (int, error) {
	n, err := f.outFile.Write(p)
	if err != nil {
		err = f.note(err)
	}
	return n, err
}

func (f *destFile) Close() error {
	if err := f.outFile.Close(); err != nil {
		return f.note(err)
	}
	return nil
}

// note records err (the first one only) with the temporary name replaced by dest,
// and returns what it recorded.
func (f *destFile) note(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == f.outFile.Name() {
		err = &fs.PathError{Op: pe.Op, Path: f.dest, Err: pe.Err}
	}
	if f.err == nil {
		f.err = err
	}
	return err
}

// fileError is the error a sink (kind) reports for err, which happened writing the
// file dest through f: f's own write or close failure when it had one (naming
// dest, without the encoder's wrapping), else err about dest.
func fileError(kind, dest string, f *destFile, err error) error {
	if f != nil && f.err != nil {
		return fmt.Errorf("sink %s: %w", kind, f.err)
	}
	return fmt.Errorf("sink %s: %s: %w", kind, dest, err)
}

// ErrNothingKept is wrapped by the Close error of a file sink whose run failed:
// it removed the run's output (none of the batches it accepted is on the disk),
// and a summary of what it accepted must say so (errors.Is).
var ErrNothingKept = errors.New("the sink kept none of this run's output")

// nothingKept says what a failed file sink left (kept), and is [ErrNothingKept].
type nothingKept struct{ kept string }

func (e *nothingKept) Error() string        { return e.kept }
func (e *nothingKept) Is(target error) bool { return target == ErrNothingKept }

// NotWrittenError is the Close error of a file sink (Parquet, Arrow file) told
// that its run did not end cleanly (a non-nil cause: a stop signal, a failure
// upstream) while nothing of its own failed: it removed this run's temporary
// output, so Dest was not written. It is [ErrNothingKept]. A program that says
// the cause (stopped by SIGTERM) says this too, in one line, so that the loss
// is not silent.
type NotWrittenError struct {
	// Kind is the sink's kind: "parquet" or "arrow".
	Kind string
	// Dest is the destination not written: the Parquet folder or the Arrow file.
	Dest string
	// Kept says what is at Dest instead.
	Kept string
}

// Error says which destination was not written and what is there.
func (e *NotWrittenError) Error() string {
	return fmt.Sprintf("sink %s: %s was not written: the run did not finish, so the sink removed this run's temporary output (%s)", e.Kind, e.Dest, e.Kept)
}

// Is reports whether target is [ErrNothingKept].
func (e *NotWrittenError) Is(target error) bool { return target == ErrNothingKept }

// tempPattern is the pattern of the temporary file for final: hidden, in the same
// folder, with a random suffix.
func tempPattern(final string) string { return "." + filepath.Base(final) + ".tmp-*" }

// isTemp reports whether name is a sink's temporary file (left by a run that was
// killed before it could remove it).
func isTemp(name string) bool { return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") }

// commit renames each temporary file to its final name and syncs their folder.
func commit(temps, finals []string) error {
	var errs []error
	dirs := map[string]bool{}
	for i, tmp := range temps {
		if err := os.Rename(tmp, finals[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		dirs[filepath.Dir(finals[i])] = true
	}
	for d := range dirs {
		if f, err := os.Open(d); err == nil {
			_ = f.Sync()
			f.Close()
		}
	}
	return errors.Join(errs...)
}

// discard removes the temporary files of a run that did not end cleanly.
func discard(temps []string) error {
	var errs []error
	for _, tmp := range temps {
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// refuseNonEmpty is the error for a destination that holds data: what is there
// and how to proceed.
func refuseNonEmpty(kind, what string, names []string) error {
	shown := names
	if len(shown) > 3 {
		shown = shown[:3]
	}
	more := ""
	if len(names) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return fmt.Errorf("sink %s: %s is not empty (%s%s): refusing to mix this run's output with what is there; empty it, choose another, or overwrite (the sink's Overwrite option, -overwrite on the launcher)",
		kind, what, strings.Join(shown, ", "), more)
}
