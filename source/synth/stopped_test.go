package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// stopAfter is a context whose Err turns to context.Canceled from its n-th
// call on: a stop at a chosen point of a writer, without timing.
type stopAfter struct {
	context.Context
	n, calls atomic.Int64
}

func (c *stopAfter) Err() error {
	if c.calls.Add(1) >= c.n.Load() {
		return context.Canceled
	}
	return nil
}

func newStopAfter(n int64) *stopAfter {
	c := &stopAfter{Context: context.Background()}
	c.n.Store(n)
	return c
}

// TestStoppedWritersSayWhatTheyRemoved stops each table and shard writer in the
// middle of its second file: the error wraps the context's, names the partial
// file (gone from the folder), how much of it was written, and the whole files
// kept (still there); gen prints it after its "stopped by" line.
func TestStoppedWritersSayWhatTheyRemoved(t *testing.T) {
	im := Image{Width: 16, Height: 16}
	tab := Table{Files: 3, Batches: 4, Rows: 5, PayloadBytes: 8}
	tests := []struct {
		name    string
		write   func(ctx context.Context, dir string) ([]string, error)
		removed string
		unit    string
		of      int
	}{
		{"tar", func(ctx context.Context, dir string) ([]string, error) {
			return TarShardsContext(ctx, dir, Shards{Shards: 3, Samples: 4, Image: im}, 1)
		}, "shard-000001.tar", "samples", 4},
		{"parquet", func(ctx context.Context, dir string) ([]string, error) { return ParquetFilesContext(ctx, dir, tab, 1) }, "part-000001.parquet", "batches", 4},
		{"arrow", func(ctx context.Context, dir string) ([]string, error) { return ArrowFilesContext(ctx, dir, tab, 1) }, "part-000001.arrow", "batches", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each writer checks ctx once per file and once per sample or
			// batch: 1+4 checks for the first file, then the 9th is inside the
			// second, after 2 of its units.
			dir := t.TempDir()
			paths, err := tc.write(newStopAfter(9), dir)
			if paths != nil {
				t.Errorf("paths %v returned with the error", paths)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v: want one that wraps context.Canceled", err)
			}
			var st *Stopped
			if !errors.As(err, &st) {
				t.Fatalf("error %T %v: want a *Stopped", err, err)
			}
			if want := filepath.Join(dir, tc.removed); st.Removed != want {
				t.Errorf("Removed %q, want %q", st.Removed, want)
			}
			if st.Done != 2 || st.Of != tc.of || st.Unit != tc.unit {
				t.Errorf("Done %d of %d %s, want 2 of %d %s", st.Done, st.Of, st.Unit, tc.of, tc.unit)
			}
			if len(st.Kept) != 1 || filepath.Dir(st.Kept[0]) != dir {
				t.Errorf("Kept %v, want the first file only", st.Kept)
			}
			msg := err.Error()
			for _, want := range []string{"removed the partial file " + st.Removed, "(2 of 4 " + tc.unit + " written)", "kept 1 whole file"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if _, err := os.Stat(st.Removed); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the partial file is still there: %v", err)
			}
			for _, k := range st.Kept {
				if _, err := os.Stat(k); err != nil {
					t.Errorf("a kept file is gone: %v", err)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("folder holds %d entries, want the one whole file", len(entries))
			}
		})
	}
	t.Run("before any file", func(t *testing.T) {
		_, err := TarShardsContext(newStopAfter(1), t.TempDir(), Shards{Shards: 2, Samples: 2, Image: im}, 1)
		var st *Stopped
		if !errors.As(err, &st) || st.Removed != "" || !strings.Contains(err.Error(), "before any file was started") {
			t.Errorf("error %v: want a *Stopped that removed nothing", err)
		}
	})
}
