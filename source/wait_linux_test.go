//go:build linux

package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// uringOnly skips where this host cannot run the io_uring reader.
func uringOnly(t *testing.T) {
	t.Helper()
	if r := uringReason(); r != "" {
		t.Skipf("io_uring not tested here: %s", r)
	}
}

// TestURingWaitModes reads a file dataset, chained and O_DIRECT or not, with
// the reader waiting in Go's poller (the default) and in io_uring_enter
// (KernelWait): every byte arrives either way, and the default reader has
// its notifier.
func TestURingWaitModes(t *testing.T) {
	uringOnly(t)
	dir := t.TempDir()
	want := map[string][]byte{}
	var paths []string
	for i := range 40 {
		p, data := writeFile(t, dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".bin", 1000+i*3001, uint64(i))
		want[p] = data
		paths = append(paths, p)
	}
	for _, tc := range []struct {
		name               string
		kernelWait, direct bool
	}{
		{"poller", false, false},
		{"poller/direct", false, true},
		{"kernel", true, false},
		{"kernel/direct", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ReaderOptions{Backend: BackendURing, QueueDepth: 4, KernelWait: tc.kernelWait, Direct: tc.direct}
			r, err := NewReader(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.(*uringReader).notify != nil; got == tc.kernelWait {
				t.Errorf("KernelWait %v: reader has a notifier: %v", tc.kernelWait, got)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			it, err := NewFiles(paths).Samples(Options{WorldSize: 1, Workers: 2, Reader: opts})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			n := 0
			for {
				s, err := it.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(s.Field("bin"), want[s.Key]) {
					t.Fatalf("%s: %d bytes, want its %d", s.Key, len(s.Field("bin")), len(want[s.Key]))
				}
				s.Release()
				n++
			}
			if n != len(paths) {
				t.Fatalf("%d samples, want %d", n, len(paths))
			}
		})
	}
}

// TestURingReapCancelled holds a read in the kernel (a FUSE file whose reads
// do not answer) and reaps it with a context that ends: Reap returns the
// context's error within a bound in both wait modes, and once the read is
// answered it completes whole.
func TestURingReapCancelled(t *testing.T) {
	uringOnly(t)
	for _, kernelWait := range []bool{false, true} {
		t.Run(map[bool]string{false: "poller", true: "kernel"}[kernelWait], func(t *testing.T) {
			fs, paths, files := stuckDataset(t, false)
			r, err := NewReader(ReaderOptions{Backend: BackendURing, QueueDepth: 2, KernelWait: kernelWait})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			f, err := r.Open(paths[2])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, f.Size)
			if err := r.Submit(Request{File: f, Buf: buf}); err != nil {
				t.Fatal(err)
			}
			// Reap submits the read (a batch of one is not submitted by Submit)
			// and waits for it until its context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			out := make([]Completion, 2)
			t0 := time.Now()
			n, err := r.Reap(ctx, out, 1)
			if !errors.Is(err, context.DeadlineExceeded) || n != 0 {
				t.Fatalf("Reap with an ended context = %d, %v; want 0, deadline exceeded", n, err)
			}
			if d := time.Since(t0); d > 30*time.Second {
				t.Fatalf("Reap returned %v after its context ended", d)
			}
			select {
			case <-fs.ReadStarted():
			case <-time.After(time.Minute):
				t.Fatal("the read never reached the file system")
			}
			fs.Unblock()
			n, err = r.Reap(context.Background(), out, 1)
			if err != nil || n != 1 {
				t.Fatalf("Reap after the read was answered = %d, %v", n, err)
			}
			if c := out[0]; c.Err != nil || !bytes.Equal(buf[:c.N], files[filepath.Base(paths[2])]) {
				t.Fatalf("completion %d bytes, err %v: want the file whole", c.N, c.Err)
			}
		})
	}
}
