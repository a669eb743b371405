// The benchmark drops the files from the page cache with fadvise(DONTNEED) after
// fdatasync, which this file calls as Linux's.

//go:build linux

package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFilesColdOrder reads 1500 files of 110 KiB from disk (the test's
// temporary folder: keep TMPDIR off tmpfs), cold, in file order and in a
// shuffled order (a permutation per seed and epoch, as psiflow.DataLoader's
// shuffle=True), with O_DIRECT (the image pipeline's default) and buffered:
// what the shuffled read order costs on data that is not cached. Before every
// pass each file's page cache is dropped (fdatasync, then posix_fadvise
// DONTNEED over the whole file), outside the timer. Files written one after
// another lie mostly in order on disk, so file order is the best case for the
// disk. One pass per case, rounds alternated by running it again (-count
// would run each case's rounds back to back):
//
//	go test -c -o /tmp/source.test ./source
//	for r in 1 2 3 4 5; do (cd source && /tmp/source.test -test.run '^$' \
//	    -test.bench BenchmarkFilesColdOrder -test.benchtime 1x); done
func BenchmarkFilesColdOrder(b *testing.B) {
	const n, size = 1500, 110 << 10
	dir := b.TempDir()
	paths := make([]string, n)
	for i := range paths {
		paths[i], _ = writeFile(b, dir, fmt.Sprintf("%05d.jpg", i), size, uint64(i))
	}
	drop := func() {
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	ds := NewFiles(paths)
	for _, direct := range []bool{true, false} {
		for _, shuffle := range []bool{false, true} {
			name := map[bool]string{true: "direct", false: "buffered"}[direct] + "/" + map[bool]string{false: "file-order", true: "shuffled"}[shuffle]
			b.Run(name, func(b *testing.B) {
				b.SetBytes(n * size)
				for i := range b.N {
					b.StopTimer()
					drop()
					b.StartTimer()
					it, err := ds.Samples(Options{WorldSize: 1, Shuffle: shuffle, Seed: 1, Epoch: i,
						Reader: ReaderOptions{Direct: direct, DropCache: true}})
					if err != nil {
						b.Fatal(err)
					}
					got := 0
					for {
						s, err := it.Next(context.Background())
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						s.Release()
						got++
					}
					it.Close()
					if got != n {
						b.Fatalf("%d samples, want %d", got, n)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "files/s")
			})
		}
	}
}
