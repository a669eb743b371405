//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/psiflow/psiflow/source"
	"golang.org/x/sys/unix"
)

func writeRandom(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for k := range 8 {
				buf[i+k] = byte(v >> (8 * k))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSmall writes n files of 112 KiB (ImageNet's mean is about 110 KB)
// into 8 subdirectories. The size is the same for every file and a multiple
// of 4 KiB so fio, which skips a partial block at the end of a file, reads
// every file whole in one request, as psiflow does.
func writeSmall(dir string, n int) ([]string, int64, error) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, smallSize)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var paths []string
	var total int64
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%8))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, 0, err
		}
		size := smallSize
		buf[0], buf[1] = byte(i), byte(i>>8)
		p := filepath.Join(sub, fmt.Sprintf("%08d.jpg", i))
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			return nil, 0, err
		}
		paths = append(paths, p)
		total += int64(size)
	}
	unix.Sync()
	return paths, total, nil
}

// pin maps path and locks it in memory so it stays in the page cache.
func pin(path string) (func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.Mlock(m); err != nil {
		unix.Munmap(m)
		return nil, err
	}
	return func() { unix.Munlock(m); unix.Munmap(m) }, nil
}

func dropCache(paths []string) {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}

// resident returns the bytes of paths in the page cache (mincore over a mapping).
func resident(paths []string) int64 {
	var total int64
	page := int64(os.Getpagesize())
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		st, _ := f.Stat()
		if st.Size() == 0 {
			f.Close()
			continue
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			continue
		}
		vec := make([]byte, (st.Size()+page-1)/page)
		if mincore(m, vec) == nil {
			for _, v := range vec {
				if v&1 != 0 {
					total += page
				}
			}
		}
		unix.Munmap(m)
	}
	return total
}

func mincore(b, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return e
	}
	return nil
}

// streamResidency streams path buffered in 1 MiB reads and samples its residency.
func streamResidency(path string, size int64, dropOn bool) (peak, after int64, err error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, resident([]string{path}))
			}
		}
	}()
	pool, err := source.NewPool(8, 1<<20)
	if err == nil {
		r, rerr := source.NewReader(source.ReaderOptions{QueueDepth: 8, Buffers: pool, DropCache: dropOn})
		if rerr != nil {
			err = rerr
		} else {
			f, ferr := r.Open(path)
			if ferr != nil {
				err = ferr
			} else {
				bufs := make([]source.Buffer, 8)
				for i := range bufs {
					bufs[i], _ = pool.Alloc(context.Background(), 1<<20)
				}
				out := make([]source.Completion, 8)
				var off int64
				free := slices.Clone(bufs)
				for err == nil && (off < size || r.InFlight() > 0) {
					for off < size && len(free) > 0 {
						b := free[len(free)-1]
						free = free[:len(free)-1]
						err = r.Submit(source.Request{File: f, Off: off, Buf: b.Bytes(), Tag: b})
						off += 1 << 20
					}
					n, rerr := r.Reap(context.Background(), out, 1)
					if rerr != nil {
						err = rerr
					}
					for _, c := range out[:n] {
						free = append(free, c.Tag.(source.Buffer))
					}
				}
				f.Close()
				for _, b := range bufs {
					b.Release()
				}
			}
			r.Close()
		}
		pool.Close()
	}
	close(done)
	wg.Wait()
	return peak, resident([]string{path}), err
}
