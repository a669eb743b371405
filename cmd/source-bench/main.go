//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/source"
	"golang.org/x/sys/unix"
)

var (
	dirFlag    = flag.String("dir", "/var/tmp", "directory for the benchmark data (a disk, not tmpfs)")
	rounds     = flag.Int("rounds", 5, "alternating rounds per case")
	fioBin     = flag.String("fio", "fio", "fio binary (empty: skip fio)")
	quick      = flag.Bool("quick", false, "small data and 2 rounds (smoke test)")
	bigMiB     = flag.Int("big", 1024, "size of the large file in MiB")
	smallCount = flag.Int("small", 4000, "number of small files")
	casesFlag  = flag.String("cases", "cached,direct,small,cache", "cases to run, comma-separated: cached, direct, small, cache")
	onlyFlag   = flag.String("only", "", "run only the contenders whose name contains this text (empty: all; for profiling one reader)")
)

// want reports whether the case named name was asked for (-cases).
func want(name string) bool { return slices.Contains(strings.Split(*casesFlag, ","), name) }

type result struct {
	name  string
	bytes int64 // bytes read by the last run
	gbps  []float64
	cpuGB []float64 // CPU seconds per GB
}

func (r *result) add(bytes int64, wall, cpu time.Duration) {
	r.bytes = bytes
	gb := float64(bytes) / 1e9
	r.gbps = append(r.gbps, gb/wall.Seconds())
	r.cpuGB = append(r.cpuGB, cpu.Seconds()/gb)
}

func med(v []float64) (m, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2], s[0], s[len(s)-1]
}

type contender struct {
	name string
	fio  bool
	run  func() (bytes int64, wall, cpu time.Duration, err error)
}

func main() {
	flag.Parse()
	if *quick {
		*rounds, *bigMiB, *smallCount = 2, 128, 300
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp(*dirFlag, "psiflow-source-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *fioBin != "" {
		if _, err := exec.LookPath(*fioBin); err != nil {
			fmt.Printf("fio not found (%v): fio columns skipped\n", err)
			*fioBin = ""
		}
	}
	st := source.IOStatus()
	host, _ := os.Hostname()
	fmt.Printf("# psiflow source bench — %s, %s, GOMAXPROCS=%d, backend probe: %s %s\n", time.Now().UTC().Format(time.RFC3339), host, runtime.GOMAXPROCS(0), st.Backend, st.Reason)

	big := filepath.Join(dir, "big.bin")
	bigSize := int64(*bigMiB) << 20
	if err := writeRandom(big, bigSize, 1); err != nil {
		return err
	}
	smallDir := filepath.Join(dir, "small")
	smallPaths, smallBytes, err := writeSmall(smallDir, *smallCount)
	if err != nil {
		return err
	}
	fmt.Printf("data: %s (%d MiB), %d small files (%d bytes, %d on average) in %s\n\n", big, bigSize>>20, len(smallPaths), smallBytes, smallBytes/int64(len(smallPaths)), smallDir)

	var report []caseReport
	if want("cached") {
		r, err := cachedCase(big, bigSize)
		if err != nil {
			return err
		}
		report = append(report, r)
	}
	if want("direct") {
		r, err := directCase(big, bigSize)
		if err != nil {
			return err
		}
		report = append(report, r)
	}
	if want("small") {
		r, err := smallCase(smallDir, smallPaths)
		if err != nil {
			return err
		}
		report = append(report, r)
	}
	if want("cache") {
		if err := cacheCase(big, bigSize, smallPaths, smallBytes); err != nil {
			return err
		}
	}
	summarize(report)
	return nil
}

// cachedCase: cached 1 MiB reads, file pinned with mmap+mlock.
func cachedCase(big string, bigSize int64) (caseReport, error) {
	unpin, err := pin(big)
	if err != nil {
		return caseReport{}, fmt.Errorf("pin %s in the page cache: %w", big, err)
	}
	loops := max(1, int(4<<30/bigSize)) // ≈4 GiB per run
	cached := []contender{
		{name: "psiflow io_uring, 2 rings qd4 fixed", run: func() (int64, time.Duration, time.Duration, error) {
			return readRange(big, bigSize, source.BackendURing, 2, 4, 1<<20, false, loops)
		}},
		{name: "psiflow pread, 2 workers", run: func() (int64, time.Duration, time.Duration, error) {
			return readRange(big, bigSize, source.BackendPread, 2, 1, 1<<20, false, loops)
		}},
	}
	cached = append(cached, fioContenders(big, bigSize, fioCase{jobs: 2, bs: "1m", loops: loops, invalidate: 0}, []fioEngine{
		{"psync", "psync", 1, ""}, {"io_uring qd4", "io_uring", 4, ""}, {"io_uring qd4 fixedbufs", "io_uring", 4, "--fixedbufs"},
	})...)
	res, err := rotate("cached 1 MiB reads (pinned), 2 workers", cached)
	unpin()
	return caseReport{"cached 1 MiB", res}, err
}

// directCase: cold O_DIRECT 1 MiB reads.
func directCase(big string, bigSize int64) (caseReport, error) {
	direct := []contender{
		{name: "psiflow io_uring, 1 ring qd64 fixed O_DIRECT", run: func() (int64, time.Duration, time.Duration, error) {
			return readRange(big, bigSize, source.BackendURing, 1, 64, 1<<20, true, 1)
		}},
		{name: "psiflow io_uring, 2 rings qd32 fixed O_DIRECT", run: func() (int64, time.Duration, time.Duration, error) {
			return readRange(big, bigSize, source.BackendURing, 2, 32, 1<<20, true, 1)
		}},
		{name: "psiflow pread, 8 workers O_DIRECT", run: func() (int64, time.Duration, time.Duration, error) {
			return readRange(big, bigSize, source.BackendPread, 8, 1, 1<<20, true, 1)
		}},
	}
	direct = append(direct, fioContenders(big, bigSize, fioCase{jobs: 1, bs: "1m", loops: 1, direct: true}, []fioEngine{
		{"io_uring qd64 fixedbufs", "io_uring", 64, "--fixedbufs"}, {"io_uring qd64", "io_uring", 64, ""}, {"libaio qd64", "libaio", 64, ""},
	})...)
	direct = append(direct, fioContenders(big, bigSize, fioCase{jobs: 8, bs: "1m", loops: 1, direct: true}, []fioEngine{{"psync ×8", "psync", 1, ""}})...)
	res, err := rotate("cold O_DIRECT 1 MiB reads", direct)
	return caseReport{"cold O_DIRECT 1 MiB", res}, err
}

// smallCase: cold small files through the Files dataset, io_uring with
// small files chained (the default) and with separate calls, pread, and fio,
// buffered and O_DIRECT.
func smallCase(smallDir string, smallPaths []string) (caseReport, error) {
	drop := func() { dropCache(smallPaths) }
	var small []contender
	for _, direct := range []bool{false, true} {
		suffix := ""
		if direct {
			suffix = " O_DIRECT"
		}
		small = append(small,
			contender{name: "psiflow Files io_uring chained, 2 rings qd32" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendURing, 2, 32, direct, false, false)
			}},
			contender{name: "psiflow Files io_uring separate, 2 rings qd32" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendURing, 2, 32, direct, false, true)
			}},
			contender{name: "psiflow Files pread, 8 workers" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendPread, 8, 1, direct, false, false)
			}})
		if *fioBin == "" {
			continue
		}
		for _, e := range []fioEngine{{"psync ×8", "psync", 1, ""}, {"io_uring ×8 qd4", "io_uring", 4, ""}} {
			small = append(small, contender{name: "fio " + e.label + suffix, fio: true, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return fioSmall(smallDir, e, direct)
			}})
		}
	}
	res, err := rotate("cold 112 KiB files", small)
	return caseReport{"cold 112 KiB files", res}, err
}

// cacheCase: page cache with and without fadvise.
func cacheCase(big string, bigSize int64, smallPaths []string, smallBytes int64) error {
	drop := func() { dropCache(smallPaths) }
	fmt.Println("## page cache (resident bytes of the dataset after / at most during a pass)")
	for _, dropOn := range []bool{false, true} {
		drop()
		if _, _, _, err := readFiles(smallPaths, source.BackendURing, 2, 32, false, dropOn, false); err != nil {
			return err
		}
		fmt.Printf("small files, DropCache=%-5v: %6.1f MiB of %6.1f MiB resident after the pass\n", dropOn, float64(resident(smallPaths))/(1<<20), float64(smallBytes)/(1<<20))
	}
	for _, dropOn := range []bool{false, true} {
		dropCache([]string{big})
		peak, after, err := streamResidency(big, bigSize, dropOn)
		if err != nil {
			return err
		}
		fmt.Printf("large file streamed buffered, DropCache=%-5v: peak %6.1f MiB, after %6.1f MiB of %d MiB\n", dropOn, float64(peak)/(1<<20), float64(after)/(1<<20), bigSize>>20)
	}
	fmt.Println()
	return nil
}

type caseReport struct {
	name string
	res  []*result
}

// rotate runs every contender once per round, rotating the order each round.
func rotate(title string, cs []contender) ([]*result, error) {
	if *onlyFlag != "" {
		cs = slices.DeleteFunc(slices.Clone(cs), func(c contender) bool { return !strings.Contains(c.name, *onlyFlag) })
	}
	res := make([]*result, len(cs))
	for i, c := range cs {
		res[i] = &result{name: c.name}
	}
	for r := 0; r < *rounds; r++ {
		for k := range cs {
			i := (k + r) % len(cs)
			b, wall, cpu, err := cs[i].run()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", title, cs[i].name, err)
			}
			res[i].add(b, wall, cpu)
		}
	}
	fmt.Printf("## %s (%d rounds, median [min–max])\n", title, *rounds)
	fmt.Printf("%-48s %22s %22s %6s %8s\n", "reader", "GB/s", "CPU s/GB", "cores", "GB/run")
	for _, r := range res {
		m, lo, hi := med(r.gbps)
		c, clo, chi := med(r.cpuGB)
		fmt.Printf("%-48s %6.2f [%5.2f–%5.2f] %6.3f [%5.3f–%5.3f] %6.2f %8.3f\n", r.name, m, lo, hi, c, clo, chi, m*c, float64(r.bytes)/1e9)
	}
	fmt.Println()
	return res, nil
}

func summarize(cases []caseReport) {
	fmt.Println("## goals")
	for _, c := range cases {
		var bestFio, bestOurs *result
		var bestFioV, bestOursV float64
		for _, r := range c.res {
			m, _, _ := med(r.gbps)
			switch {
			case strings.HasPrefix(r.name, "fio"):
				if m > bestFioV {
					bestFio, bestFioV = r, m
				}
			case strings.Contains(r.name, "io_uring"):
				if m > bestOursV {
					bestOurs, bestOursV = r, m
				}
			}
		}
		if bestOurs != nil && bestFio != nil {
			ratio := bestOursV / bestFioV
			fmt.Printf("%-20s throughput: best psiflow io_uring (%s) %.2f GB/s = %.2f× best fio (%s, %.2f GB/s): goal ≥ 0.9× %s\n",
				c.name, bestOurs.name, bestOursV, ratio, bestFio.name, bestFioV, verdict(ratio >= 0.9))
			// On a shared, CPU-bound machine throughput follows the CPU share a
			// reader gets; bytes per CPU-second compare the work each one does.
			uc, _, _ := med(bestOurs.cpuGB)
			fc, _, _ := med(bestFio.cpuGB)
			fmt.Printf("%-20s efficiency: %.1f GB per CPU-second vs %.1f for that fio engine (%.2f×)\n", c.name, 1/uc, 1/fc, fc/uc)
		}
		chainedGoal(c)
		// CPU per GB: each io_uring contender against the pread one in the same mode.
		for _, u := range c.res {
			if strings.HasPrefix(u.name, "fio") || !strings.Contains(u.name, "io_uring") {
				continue
			}
			direct := strings.Contains(u.name, "O_DIRECT")
			for _, p := range c.res {
				if strings.HasPrefix(p.name, "fio") || !strings.Contains(p.name, "pread") || strings.Contains(p.name, "O_DIRECT") != direct {
					continue
				}
				uc, _, _ := med(u.cpuGB)
				pc, _, _ := med(p.cpuGB)
				fmt.Printf("%-20s CPU: %s %.3f s/GB vs %s %.3f s/GB: goal below pread %s\n", c.name, u.name, uc, p.name, pc, verdict(uc < pc))
			}
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

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
func readFiles(paths []string, backend source.Backend, workers, qd int, direct, dropCache, separate bool) (total int64, wall, cpu time.Duration, err error) {
	cpu0, t0 := cpuNow(unix.RUSAGE_SELF), time.Now()
	it, err := source.NewFiles(paths).Samples(source.Options{WorldSize: 1, Workers: workers,
		Reader: source.ReaderOptions{Backend: backend, QueueDepth: qd, Direct: direct, DropCache: dropCache, SeparateCalls: separate}})
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

// chainedGoal prints, for the small-file case, the per-round ratios of the
// chained io_uring contender against the best fio engine of the same round
// (throughput, goal ≥ 1.0×) and against the pread contender of the same mode
// (CPU per GB, goal ≤ 0.7×), buffered and O_DIRECT.
func chainedGoal(c caseReport) {
	for _, mode := range []string{"", " O_DIRECT"} {
		var chained, pread *result
		var fios []*result
		for _, r := range c.res {
			if strings.HasSuffix(r.name, "O_DIRECT") != (mode != "") {
				continue
			}
			switch {
			case strings.Contains(r.name, "io_uring chained"):
				chained = r
			case strings.Contains(r.name, "pread") && !strings.HasPrefix(r.name, "fio"):
				pread = r
			case strings.HasPrefix(r.name, "fio"):
				fios = append(fios, r)
			}
		}
		if chained == nil || pread == nil {
			continue
		}
		var tput, cpu []float64
		for i := range chained.gbps {
			cpu = append(cpu, chained.cpuGB[i]/pread.cpuGB[i])
			best := 0.0
			for _, f := range fios {
				best = max(best, f.gbps[i])
			}
			if best > 0 {
				tput = append(tput, chained.gbps[i]/best)
			}
		}
		name := "buffered"
		if mode != "" {
			name = "O_DIRECT"
		}
		if len(tput) > 0 {
			m, lo, hi := med(tput)
			fmt.Printf("%-20s chained %s: throughput ÷ best fio of the same round %.2f× [%.2f–%.2f]: goal ≥ 1.0× %s\n", c.name, name, m, lo, hi, verdict(m >= 1))
		}
		m, lo, hi := med(cpu)
		fmt.Printf("%-20s chained %s: CPU per GB ÷ pread's of the same round %.2f× [%.2f–%.2f]: goal ≤ 0.7× %s\n", c.name, name, m, lo, hi, verdict(m <= 0.7))
	}
}
