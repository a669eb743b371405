package sink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/psiflow/psiflow/source"
)

// entries lists a folder's names, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// export writes samples 0..n-1 in batches of 5 into a Parquet folder.
func export(t *testing.T, cfg ParquetConfig, n int) error {
	t.Helper()
	p, err := NewParquet(cfg)
	if err != nil {
		return err
	}
	for first := 0; first < n; first += 5 {
		if err := p.Consume(context.Background(), testBatch(first, min(5, n-first), 4, 6)); err != nil {
			return errors.Join(err, p.Close(err))
		}
	}
	return p.Close(nil)
}

// rowsIn counts the rows of the Parquet files of dir, read back as a user would.
func rowsIn(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Parquet files in %s (%v)", dir, err)
	}
	var rows int64
	for _, r := range readTables(t, source.NewParquet(files)) {
		rows += r.NumRows()
	}
	return rows
}

// TestParquetDestination: a folder that holds anything is refused, naming what is
// there; with Overwrite a 20-sample export replaces a 200-sample one (the parts it
// does not rewrite are removed, other files stay), and Parquet files that are not
// the sink's parts are refused.
func TestParquetDestination(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := export(t, ParquetConfig{Dir: dir, RowsPerFile: 50}, 200); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 4 {
		t.Fatalf("first export: %v, want 4 parts", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := export(t, ParquetConfig{Dir: dir, RowsPerFile: 50}, 20)
	if err == nil || !strings.Contains(err.Error(), "folder "+dir+" is not empty (README, part-00000.parquet, part-00001.parquet and 2 more)") || !strings.Contains(err.Error(), "overwrite") {
		t.Fatalf("second export without Overwrite: %v", err)
	}
	if n := rowsIn(t, dir); n != 200 {
		t.Fatalf("the refused export changed the folder: %d rows", n)
	}
	if err := export(t, ParquetConfig{Dir: dir, RowsPerFile: 50, Overwrite: true}, 20); err != nil {
		t.Fatal(err)
	}
	if got, want := entries(t, dir), []string{"README", "part-00000.parquet"}; !slices.Equal(got, want) {
		t.Fatalf("after overwriting: %v, want %v", got, want)
	}
	if n := rowsIn(t, dir); n != 20 {
		t.Fatalf("read back %d rows after overwriting with 20", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.parquet"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := export(t, ParquetConfig{Dir: dir, Overwrite: true}, 5); err == nil || !strings.Contains(err.Error(), "other.parquet") {
		t.Fatalf("overwrite beside a foreign Parquet file: %v", err)
	}
}

// TestArrowDestination: a file already at the path is refused; with Overwrite it
// is replaced only by a run that ends cleanly.
func TestArrowDestination(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.arrow")
	write := func(cfg ArrowConfig, n int, cause error) error {
		a, err := NewArrow(cfg)
		if err != nil {
			return err
		}
		if err := a.Consume(context.Background(), testBatch(0, n, 4, 6)); err != nil {
			return err
		}
		return a.Close(cause)
	}
	if err := write(ArrowConfig{Path: path}, 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := write(ArrowConfig{Path: path}, 3, nil); err == nil || !strings.Contains(err.Error(), "file "+path+" is not empty") {
		t.Fatalf("second write without Overwrite: %v", err)
	}
	// A run that did not finish: its file is removed, and Close says which
	// destination was not written (it used to say nothing).
	var nw *NotWrittenError
	if err := write(ArrowConfig{Path: path, Overwrite: true}, 3, errors.New("the graph failed")); !errors.As(err, &nw) || nw.Dest != path ||
		!errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "the file already there is left as it was") {
		t.Fatalf("close after a failed run: %v, want a NotWrittenError naming %s", err, path)
	}
	if n := arrowRows(t, path); n != 5 {
		t.Fatalf("a failed run replaced the file: %d rows", n)
	}
	if err := write(ArrowConfig{Path: path, Overwrite: true}, 3, nil); err != nil {
		t.Fatal(err)
	}
	if n := arrowRows(t, path); n != 3 {
		t.Fatalf("after overwriting: %d rows, want 3", n)
	}
	if got := entries(t, filepath.Dir(path)); !slices.Equal(got, []string{"out.arrow"}) {
		t.Fatalf("folder %v: a temporary file is left", got)
	}
}

func arrowRows(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, r := range readTables(t, source.NewArrowIPC([]string{path})) {
		n += r.NumRows()
	}
	return n
}

// fullDisk is a createTemp whose files fail with ENOSPC once limit bytes are
// written, as a full disk does.
func fullDisk(limit int64) createTemp {
	return func(dir, pattern string) (outFile, error) {
		f, err := osCreateTemp(dir, pattern)
		if err != nil {
			return nil, err
		}
		return &limitedFile{outFile: f, left: limit}, nil
	}
}

type limitedFile struct {
	outFile
	left int64
}

func (f *limitedFile) Write(p []byte) (int, error) {
	if int64(len(p)) > f.left {
		n, _ := f.outFile.Write(p[:f.left])
		f.left = 0
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.left -= int64(len(p))
	return f.outFile.Write(p)
}

// TestSinksLeaveNothingOnAFullDisk fills the disk under both file sinks, with a
// fault-injecting file and, where the test may mount one, a real 256 KiB tmpfs:
// the error says ENOSPC and names the file, and the destination holds none of
// the run's output (no partial file, no temporary), while an older file at the
// path (Overwrite) is left as it was.
func TestSinksLeaveNothingOnAFullDisk(t *testing.T) {
	type disk struct {
		name   string
		dir    func(t *testing.T) string
		create createTemp
	}
	disks := []disk{
		{"fault-injecting file", func(t *testing.T) string { return t.TempDir() }, fullDisk(20 << 10)},
		{"tmpfs of 256 KiB", smallTmpfs, osCreateTemp},
	}
	for _, d := range disks {
		t.Run(d.name+"/parquet", func(t *testing.T) {
			dir := filepath.Join(d.dir(t), "pq")
			p, err := NewParquet(ParquetConfig{Dir: dir, RowsPerFile: 40})
			if err != nil {
				t.Fatal(err)
			}
			p.create = d.create
			var werr error
			for first := 0; first < 4000 && werr == nil; first += 20 {
				werr = p.Consume(context.Background(), testBatch(first, 20, 16, 16)) // 15 KiB a batch
			}
			cerr := p.Close(werr)
			if !errors.Is(werr, syscall.ENOSPC) || !regexp.MustCompile(`^sink parquet: write `+regexp.QuoteMeta(dir)+`/part-[0-9]{5}\.parquet: no space left on device`).MatchString(werr.Error()) {
				t.Fatalf("writing: %v, want ENOSPC naming a part file of %s (close: %v)", werr, dir, cerr)
			}
			plainDiskFull(t, werr, cerr)
			if !errors.Is(cerr, ErrNothingKept) {
				t.Errorf("close: %v, want ErrNothingKept (a summary says none of the samples was kept)", cerr)
			}
			if got := entries(t, dir); len(got) != 0 {
				t.Fatalf("the folder keeps %v after the failure", got)
			}
		})
		t.Run(d.name+"/arrow", func(t *testing.T) {
			path := filepath.Join(d.dir(t), "out.arrow")
			if err := os.WriteFile(path, []byte("the previous export"), 0o644); err != nil {
				t.Fatal(err)
			}
			a := &Arrow{cfg: ArrowConfig{Path: path, Overwrite: true}}
			if err := a.createFile(d.create); err != nil {
				t.Fatal(err)
			}
			var werr error
			for first := 0; first < 4000 && werr == nil; first += 20 {
				werr = a.Consume(context.Background(), testBatch(first, 20, 16, 16))
			}
			cerr := a.Close(nil) // as a caller that ignores the failed Consume would
			if !errors.Is(werr, syscall.ENOSPC) || cerr == nil || !strings.Contains(cerr.Error(), "left as it was") {
				t.Fatalf("writing: %v; close: %v", werr, cerr)
			}
			if want := "sink arrow: write " + path + ": no space left on device"; werr.Error() != want {
				t.Errorf("writing: %q, want %q", werr, want)
			}
			plainDiskFull(t, werr, cerr)
			if !errors.Is(cerr, ErrNothingKept) {
				t.Errorf("close: %v, want ErrNothingKept", cerr)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != "the previous export" {
				t.Fatalf("the old file is now %q (%v)", b, err)
			}
			if got := entries(t, filepath.Dir(path)); !slices.Equal(got, []string{"out.arrow"}) {
				t.Fatalf("folder %v: a temporary file is left", got)
			}
		})
	}
}

// plainDiskFull fails t when the errors of a sink on a full disk name its hidden
// temporary file or carry the encoder's wording instead of the system's.
func plainDiskFull(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, bad := range []string{".tmp-", "unknown error type"} {
			if strings.Contains(err.Error(), bad) {
				t.Errorf("%q has %q", err, bad)
			}
		}
	}
}

// TestParquetFailureAndLeftovers: Close with a cause discards the run's files and
// says the folder was not written (a NotWrittenError naming it); a
// temporary file left by a killed run makes the folder non-empty, and Overwrite
// removes it.
func TestParquetFailureAndLeftovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pq")
	p, err := NewParquet(ParquetConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Consume(context.Background(), testBatch(0, 5, 4, 6)); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 1 || !isTemp(got[0]) {
		t.Fatalf("while writing: %v, want one temporary file", got)
	}
	var nw *NotWrittenError
	if err := p.Close(errors.New("stopped")); !errors.As(err, &nw) || nw.Dest != dir || !errors.Is(err, ErrNothingKept) {
		t.Fatalf("close of a stopped run: %v, want a NotWrittenError naming %s", err, dir)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("after a failed run: %v", got)
	}
	leftover := filepath.Join(dir, ".part-00000.parquet.tmp-123")
	if err := os.WriteFile(leftover, []byte("half a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := export(t, ParquetConfig{Dir: dir}, 5); err == nil || !strings.Contains(err.Error(), ".part-00000.parquet.tmp-123") {
		t.Fatalf("a leftover temporary file: %v", err)
	}
	if err := export(t, ParquetConfig{Dir: dir, Overwrite: true}, 5); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"part-00000.parquet"}) {
		t.Fatalf("after overwriting: %v", got)
	}
}
