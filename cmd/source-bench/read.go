//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/psiflow/psiflow/source"
	"golang.org/x/sys/unix"
)

func cpuNow(who int) time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readRange reads [0,size) of path loops times with workers readers, each
// reading a disjoint share in bs requests with qd in flight. Setup (pool,
// rings, buffer registration, open) is done before the clock starts.
func readRange(path string, size int64, backend source.Backend, workers, qd, bs int, direct bool, loops int) (int64, time.Duration, time.Duration, error) {
	pool, err := source.NewPool(workers*qd, bs)
	if err != nil {
		return 0, 0, 0, err
	}
	defer pool.Close()
	share := (size/int64(workers) + int64(bs) - 1) / int64(bs) * int64(bs)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, workers)
	bytes := make([]int64, workers)
	for w := range workers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			bytes[w], errs[w] = readShare(path, backend, pool, qd, bs, direct, int64(w)*share, min(size, int64(w+1)*share), loops, ready.Done, start)
		}()
	}
	ready.Wait()
	cpu0, t0 := cpuNow(unix.RUSAGE_SELF), time.Now()
	close(start)
	done.Wait()
	wall, cpu := time.Since(t0), cpuNow(unix.RUSAGE_SELF)-cpu0
	var total int64
	for _, b := range bytes {
		total += b
	}
	return total, wall, cpu, errors.Join(errs...)
}

func readShare(path string, backend source.Backend, pool *source.Pool, qd, bs int, direct bool, from, to int64, loops int, ready func(), start <-chan struct{}) (int64, error) {
	runtime.LockOSThread() // one ring per thread: cached reads complete inline on this core
	defer runtime.UnlockOSThread()
	var once sync.Once
	defer once.Do(ready)
	r, err := source.NewReader(source.ReaderOptions{Backend: backend, QueueDepth: qd, Buffers: pool, Direct: direct})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	f, err := r.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ctx := context.Background()
	bufs := make([]source.Buffer, 0, qd)
	for range qd {
		b, err := pool.Alloc(ctx, bs)
		if err != nil {
			return 0, err
		}
		clear(b.Bytes()) // fault the buffer in before the clock starts
		bufs = append(bufs, b)
	}
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	once.Do(ready)
	<-start
	out := make([]source.Completion, qd)
	var total int64
	for range loops {
		off := from
		free := slices.Clone(bufs)
		for off < to || r.InFlight() > 0 {
			for off < to && len(free) > 0 {
				b := free[len(free)-1]
				free = free[:len(free)-1]
				n := int(min(int64(bs), to-off))
				if err := r.Submit(source.Request{File: f, Off: off, Buf: b.Bytes()[:n], Tag: b}); err != nil {
					return total, err
				}
				off += int64(n)
			}
			n, err := r.Reap(ctx, out, 1)
			if err != nil {
				return total, err
			}
			for _, c := range out[:n] {
				if c.Err != nil {
					return total, c.Err
				}
				total += int64(c.N)
				free = append(free, c.Tag.(source.Buffer))
			}
		}
	}
	return total, nil
}

// readFiles reads every file once through the Files dataset. With io_uring
// and separate false it fails unless every file was chained (open, read,
// close in one submission), so the figure is that path's.
func readFiles(paths []string, backend source.Backend, workers, qd int, direct, dropCache, separate, kernelWait bool) (total int64, wall, cpu time.Duration, err error) {
	cpu0, t0 := cpuNow(unix.RUSAGE_SELF), time.Now()
	it, err := source.NewFiles(paths).Samples(source.Options{WorldSize: 1, Workers: workers,
		Reader: source.ReaderOptions{Backend: backend, QueueDepth: qd, Direct: direct, DropCache: dropCache, SeparateCalls: separate, KernelWait: kernelWait}})
	if err != nil {
		return 0, 0, 0, err
	}
	defer it.Close()
	for {
		s, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			return total, 0, 0, err
		}
		total += s.Len()
		s.Release()
	}
	wall, cpu = time.Since(t0), cpuNow(unix.RUSAGE_SELF)-cpu0
	if rp := it.(source.ReadPathReporter).ReadPaths(); backend == source.BackendURing && !separate && !dropCache && rp.Chained != int64(len(paths)) {
		return total, 0, 0, fmt.Errorf("read paths %+v: not every file was chained", rp)
	}
	return total, wall, cpu, nil
}
