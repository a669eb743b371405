package source

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReaderCached reads a cached 64 MiB file in 1 MiB requests into
// registered pool buffers, per backend and queue depth (one reader, one core).
func BenchmarkReaderCached(b *testing.B) {
	dir := b.TempDir()
	path, _ := writeFile(b, dir, "big.bin", 64<<20, 1)
	for _, backend := range []Backend{BackendURing, BackendPread} {
		if backend == BackendURing && uringReason() != "" {
			continue
		}
		for _, qd := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/qd%d", backend, qd), func(b *testing.B) {
				pool, err := NewPool(qd, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				r, err := NewReader(ReaderOptions{Backend: backend, QueueDepth: qd, Buffers: pool})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				f, err := r.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				var free []Buffer
				for range qd {
					buf, _ := pool.Alloc(context.Background(), 1<<20)
					free = append(free, buf)
				}
				out := make([]Completion, qd)
				ctx := context.Background()
				b.SetBytes(1 << 20)
				b.ResetTimer()
				var off int64
				for i := 0; i < b.N; {
					for len(free) > 0 && i+r.InFlight() < b.N {
						buf := free[len(free)-1]
						free = free[:len(free)-1]
						if err := r.Submit(Request{File: f, Off: off, Buf: buf.Bytes(), Tag: buf}); err != nil {
							b.Fatal(err)
						}
						off = (off + 1<<20) % f.Size
					}
					n, err := r.Reap(ctx, out, 1)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range out[:n] {
						if c.Err != nil {
							b.Fatal(c.Err)
						}
						free = append(free, c.Tag.(Buffer))
						i++
					}
				}
				b.StopTimer()
				for _, buf := range free {
					buf.Release()
				}
			})
		}
	}
}

// BenchmarkFilesCached iterates 1000 cached 110 KiB files, listed 10 times
// (10,000 samples per iterator, so set-up is amortised as in a real epoch),
// through the Files dataset (open, admission, read, ordered delivery, release).
func BenchmarkFilesCached(b *testing.B) {
	dir := b.TempDir()
	var paths []string
	for i := range 1000 {
		p, _ := writeFile(b, dir, fmt.Sprintf("%04d.jpg", i), 110<<10, uint64(i))
		paths = append(paths, p)
	}
	var list []string
	for range 10 {
		list = append(list, paths...)
	}
	ds := NewFiles(list)
	for _, backend := range []Backend{BackendURing, BackendPread} {
		if backend == BackendURing && uringReason() != "" {
			continue
		}
		b.Run(string(backend), func(b *testing.B) {
			b.SetBytes(int64(len(list)) * 110 << 10)
			for range b.N {
				it, err := ds.Samples(Options{WorldSize: 1, Reader: ReaderOptions{Backend: backend}})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					s, err := it.Next(context.Background())
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					s.Release()
					n++
				}
				it.Close()
				if n != len(list) {
					b.Fatalf("%d samples", n)
				}
			}
			b.ReportMetric(float64(b.N*len(list))/b.Elapsed().Seconds(), "files/s")
		})
	}
}

// BenchmarkTarCached iterates cached WebDataset shards (4 shards × 250
// samples of a 110 KiB field plus two small ones).
func BenchmarkTarCached(b *testing.B) {
	dir := b.TempDir()
	var paths []string
	for sh := range 4 {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		payload := make([]byte, 110<<10)
		for i := range 250 {
			key := fmt.Sprintf("s%05d", sh*250+i)
			for _, f := range []struct {
				ext  string
				data []byte
			}{{"jpg", payload}, {"cls", []byte("7")}, {"json", []byte(`{"i":1}`)}} {
				tw.WriteHeader(&tar.Header{Name: key + "." + f.ext, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
				tw.Write(f.data)
			}
		}
		tw.Close()
		p := filepath.Join(dir, fmt.Sprintf("shard-%d.tar", sh))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	ds := NewTar(paths)
	for _, backend := range []Backend{BackendURing, BackendPread} {
		if backend == BackendURing && uringReason() != "" {
			continue
		}
		b.Run(string(backend), func(b *testing.B) {
			b.SetBytes(1000 * 110 << 10)
			for range b.N {
				it, err := ds.Samples(Options{WorldSize: 1, Reader: ReaderOptions{Backend: backend}})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					s, err := it.Next(context.Background())
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					s.Release()
					n++
				}
				it.Close()
				if n != 1000 {
					b.Fatalf("%d samples", n)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
