//go:build linux

package uring

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// smallFiles writes n files of size bytes each under a temporary folder and
// returns their NUL-terminated paths and contents.
func smallFiles(t testing.TB, n, size int) ([][]byte, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	var paths, datas [][]byte
	for i := range n {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		p := filepath.Join(dir, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, append([]byte(p), 0))
		datas = append(datas, data)
	}
	return paths, datas
}

// chain queues open, read and close of each path, linked, into slots
// 0..len(paths)-1 of the registered file table, and submits them at once.
func chain(r *Ring, paths [][]byte, bufs [][]byte) error {
	for i := range paths {
		slot := uint32(i)
		e := r.SQE()
		e.PrepOpenatDirect(ATFDCWD, &paths[i][0], unix.O_RDONLY, 0, slot) // O_CLOEXEC is EINVAL for a direct descriptor
		e.Flags |= SQEIOLink
		e.UserData = uint64(3 * i)
		e = r.SQE()
		e.PrepReadDirect(slot, bufs[i], 0)
		e.Flags |= SQEIOHardlink // the close runs after a short read too
		e.UserData = uint64(3*i + 1)
		e = r.SQE()
		e.PrepCloseDirect(slot)
		e.UserData = uint64(3*i + 2)
	}
	_, err := r.Submit(uint32(3 * len(paths)))
	return err
}

// reapAll takes n completions, waiting for them, into res by user data.
func reapAll(t testing.TB, r *Ring, res []int32) {
	for got := 0; got < len(res); {
		c, ok := r.PeekCQE()
		if !ok {
			if _, err := r.Submit(1); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r.CQESeen()
		res[c.UserData] = c.Res
		got++
	}
}

// TestChainedOpenReadClose: a small file costs one submission of three
// linked entries (open into a direct descriptor, read, close) and no
// descriptor in the process; the bytes read are the file's; a file that
// does not exist fails its open with ENOENT and cancels its read
// (ECANCELED) without touching its neighbours; a read shorter than its
// buffer still closes its file (the close is hard-linked); the slots are
// free again for the next round.
func TestChainedOpenReadClose(t *testing.T) {
	r := newRing(t, 64)
	table := make([]int32, 8)
	for i := range table {
		table[i] = -1
	}
	if err := r.RegisterFiles(table); err != nil {
		t.Skipf("sparse file table refused: %v", err)
	}
	paths, datas := smallFiles(t, 4, 5000)
	paths[2] = append([]byte(filepath.Join(t.TempDir(), "missing")), 0)
	for round := range 2 { // the slots are reused: the closes freed them
		bufs := make([][]byte, len(paths))
		for i := range bufs {
			bufs[i] = make([]byte, 8192)
		}
		if err := chain(r, paths, bufs); err != nil {
			t.Fatal(err)
		}
		res := make([]int32, 3*len(paths))
		reapAll(t, r, res)
		for i := range paths {
			open, read, cl := res[3*i], res[3*i+1], res[3*i+2]
			if i == 2 {
				if open != -int32(unix.ENOENT) || read != -int32(unix.ECANCELED) || (cl != -int32(unix.ECANCELED) && cl != -int32(unix.EBADF)) {
					t.Fatalf("round %d missing file: open %d, read %d, close %d; want -ENOENT, -ECANCELED, -ECANCELED or -EBADF", round, open, read, cl)
				}
				continue
			}
			if open != 0 || read != 5000 || cl != 0 {
				t.Fatalf("round %d file %d: open %d, read %d, close %d", round, i, open, read, cl)
			}
			if !bytes.Equal(bufs[i][:read], datas[i]) {
				t.Fatalf("round %d file %d: the bytes read differ", round, i)
			}
		}
	}
}

// BenchmarkSmallFiles reads 112 KiB files, cold (POSIX_FADV_DONTNEED on
// each before the pass), with open + pread + close system calls one file
// after another ("syscalls") and with linked open/read/close entries, 16
// files per submission ("chained"). It reports MB/s and the CPU time per
// GB of this process (user + system).
func BenchmarkSmallFiles(b *testing.B) {
	const n, size, batch = 256, 112 << 10, 16
	paths, _ := smallFiles(b, n, size)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	drop := func() {
		for _, p := range paths {
			fd, err := unix.Open(string(p[:len(p)-1]), unix.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
			unix.Close(fd)
		}
	}
	cpu := func() float64 {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	for _, mode := range []string{"syscalls", "chained"} {
		b.Run(mode, func(b *testing.B) {
			var r *Ring
			if mode == "chained" {
				var err error
				if r, err = New(4*batch, SetupClamp|SetupCoopTaskrun); err != nil {
					b.Skip(err)
				}
				defer r.Close()
				table := make([]int32, batch)
				for i := range table {
					table[i] = -1
				}
				if err := r.RegisterFiles(table); err != nil {
					b.Skip(err)
				}
			}
			res := make([]int32, 3*batch)
			var busy, bytesRead float64
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				drop()
				b.StartTimer()
				c0 := cpu()
				if mode == "syscalls" {
					for i, p := range paths {
						fd, err := unix.Open(string(p[:len(p)-1]), unix.O_RDONLY|unix.O_CLOEXEC, 0)
						if err != nil {
							b.Fatal(err)
						}
						m, err := unix.Pread(fd, bufs[i%batch], 0)
						unix.Close(fd)
						if err != nil || m != size {
							b.Fatal(m, err)
						}
					}
				} else {
					for i := 0; i < n; i += batch {
						if err := chain(r, paths[i:i+batch], bufs); err != nil {
							b.Fatal(err)
						}
						reapAll(b, r, res)
						for k := range batch {
							if res[3*k+1] != size {
								b.Fatalf("file %d: open %d read %d close %d", i+k, res[3*k], res[3*k+1], res[3*k+2])
							}
						}
					}
				}
				busy += cpu() - c0
				bytesRead += n * size
			}
			b.ReportMetric(bytesRead/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(busy/(bytesRead/1e9), "cpu-s/GB")
		})
	}
}
