//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/psiflow/psiflow/source"
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
				return readFiles(smallPaths, source.BackendURing, 2, 32, direct, false, false, false)
			}},
			contender{name: "psiflow Files io_uring kernel-wait chained, 2 rings qd32" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendURing, 2, 32, direct, false, false, true)
			}},
			contender{name: "psiflow Files io_uring separate, 2 rings qd32" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendURing, 2, 32, direct, false, true, false)
			}},
			contender{name: "psiflow Files pread, 8 workers" + suffix, run: func() (int64, time.Duration, time.Duration, error) {
				drop()
				return readFiles(smallPaths, source.BackendPread, 8, 1, direct, false, false, false)
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
		if _, _, _, err := readFiles(smallPaths, source.BackendURing, 2, 32, false, dropOn, false, false); err != nil {
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
	fmt.Printf("%-58s %22s %22s %6s %8s\n", "reader", "GB/s", "CPU s/GB", "cores", "GB/run")
	for _, r := range res {
		m, lo, hi := med(r.gbps)
		c, clo, chi := med(r.cpuGB)
		fmt.Printf("%-58s %6.2f [%5.2f–%5.2f] %6.3f [%5.3f–%5.3f] %6.2f %8.3f\n", r.name, m, lo, hi, c, clo, chi, m*c, float64(r.bytes)/1e9)
	}
	fmt.Println()
	return res, nil
}
