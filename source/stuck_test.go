//go:build linux

package source

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/stuckfs"
)

// stuckDataset mounts files a.bin … e.bin, of which c.bin's reads hang.
func stuckDataset(t *testing.T, honour bool) (*stuckfs.FS, []string, map[string][]byte) {
	t.Helper()
	files := map[string][]byte{}
	var names []string
	for i, n := range []string{"a", "b", "c", "d", "e"} {
		name := n + ".bin"
		files[name] = bytes.Repeat([]byte{byte('a' + i)}, 30000+i)
		names = append(names, name)
	}
	fs := stuckfs.MountT(t, stuckfs.Options{Files: files, Stuck: []string{"c.bin"}, HonourInterrupts: honour})
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(fs.Dir, n)
	}
	return fs, paths, files
}

// TestCloseCancelsAReadInFlight holds a real read of a regular file in the
// kernel (a FUSE file whose reads do not answer) and closes the iterator.
// io_uring cancels the read (IORING_OP_ASYNC_CANCEL interrupts the FUSE
// request) when the file system honours interrupts, so Close returns with
// the read still unanswered. Where the read cannot be interrupted (pread,
// or a file system that ignores interrupts) Close returns once the read is
// answered, and not before; flowsrc ends the graph without it (see its tests).
// Either way every sample delivered is whole and nothing is left held.
func TestCloseCancelsAReadInFlight(t *testing.T) {
	for _, b := range backends(t) {
		for _, honour := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/interrupts-honoured=%v", b, honour), func(t *testing.T) {
				fs, paths, files := stuckDataset(t, honour)
				budget := &countBudget{}
				it, err := NewFiles(paths).Samples(Options{WorldSize: 1, Workers: 1, Budget: budget, Reader: ReaderOptions{Backend: b}})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				for _, want := range paths[:2] {
					s, err := it.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if s.Key != want || !bytes.Equal(s.Field("bin"), files[filepath.Base(want)]) {
						t.Fatalf("sample %s, want %s whole", s.Key, want)
					}
					s.Release()
				}
				select {
				case <-fs.ReadStarted():
				case <-time.After(time.Minute):
					t.Fatal("the read of c.bin never reached the file system")
				}
				if w := it.(WaitReporter).Waiting(); !slices.Contains(w, paths[2]) {
					t.Errorf("waiting for %v, want %s among them", w, paths[2])
				}
				closed := make(chan error, 1)
				go func() { closed <- it.Close() }()
				interruptible := b == BackendURing && honour
				if interruptible {
					select {
					case err := <-closed:
						if err != nil {
							t.Fatal(err)
						}
					case <-time.After(time.Minute):
						t.Fatal("Close did not cancel the read in flight")
					}
					if fs.Hanging() != 0 {
						t.Fatalf("%d reads still hang after Close", fs.Hanging())
					}
				} else {
					select {
					case err := <-closed:
						t.Fatalf("Close returned (%v) while the kernel still held a read into its buffer", err)
					case <-time.After(100 * time.Millisecond):
					}
					fs.Unblock()
					select {
					case err := <-closed:
						if err != nil {
							t.Fatal(err)
						}
					case <-time.After(time.Minute):
						t.Fatal("Close did not return once the read was answered")
					}
				}
				if n := budget.inUse.Load(); n != 0 {
					t.Fatalf("budget holds %d bytes after Close", n)
				}
			})
		}
	}
}
