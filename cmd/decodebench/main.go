//go:build linux

// Command decodebench measures per-core JPEG decode rates side by side in one
// run, on the same files, in alternating rounds: psiflow's TurboJPEG binding,
// the standard library's image/jpeg, and Pillow (a /usr/bin/python3 script,
// scripts/reference/pil_decode_bench.py). Each contender decodes every file
// from memory into a reused buffer (Pillow: Image.open(BytesIO).convert("RGB"),
// what torchvision's ImageFolder loader does) on one thread for -seconds.
// It prints wall-clock and CPU-time rates: on a shared machine the CPU-time
// rate is the stable one.
//
//	go run ./cmd/decodebench -dir DIR [-rounds 5] [-seconds 3]
//
// With -transform it also times decode + Resize(256) + CenterCrop(224) for
// psiflow (Pillow's row then includes the same resize and crop).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/stage/decode"
)

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

type result struct{ wall, cpu float64 } // images per second

func main() {
	dir := flag.String("dir", "", "folder of JPEGs (searched recursively)")
	rounds := flag.Int("rounds", 5, "alternating rounds")
	seconds := flag.Float64("seconds", 3, "seconds per contender per round")
	limit := flag.Int("files", 200, "use at most this many files")
	transform := flag.Bool("transform", false, "time decode + Resize(256) + CenterCrop(224) instead of decode alone")
	script := flag.String("script", "scripts/reference/pil_decode_bench.py", "Pillow benchmark script")
	flag.Parse()
	if err := run(*dir, *rounds, *seconds, *limit, *transform, *script); err != nil {
		fmt.Fprintln(os.Stderr, "decodebench:", err)
		os.Exit(1)
	}
}

func run(dir string, rounds int, seconds float64, limit int, transform bool, script string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(strings.ToLower(p), ".jpg") && len(files) < limit {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no .jpg files under %q", dir)
	}
	sort.Strings(files)
	var blobs [][]byte
	var total int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		blobs = append(blobs, b)
		total += len(b)
	}
	fmt.Printf("files %d, mean %d bytes, %d rounds of %.1fs each, transform=%v, GOMAXPROCS=%d\n",
		len(files), total/len(files), rounds, seconds, transform, runtime.GOMAXPROCS(0))

	tr := decode.Transform{}
	if transform {
		tr = decode.Transform{Resize: 256, CenterCrop: 224}
	}
	goRun := func(b decode.Backend) (result, error) {
		d, err := decode.NewDecoder(decode.Options{Backend: b})
		if err != nil {
			return result{}, err
		}
		defer d.Close()
		p, err := decode.NewProcessor(d, tr, 0)
		if err != nil {
			return result{}, err
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i, blob := range blobs { // warm-up pass
			if _, err := p.Image(blob, files[i]); err != nil {
				return result{}, err
			}
		}
		n := 0
		c0, t0 := threadCPU(), time.Now()
		deadline := t0.Add(time.Duration(seconds * float64(time.Second)))
		for time.Now().Before(deadline) {
			for i, blob := range blobs {
				if _, err := p.Image(blob, files[i]); err != nil {
					return result{}, err
				}
				n++
			}
		}
		wall, cpu := time.Since(t0).Seconds(), (threadCPU() - c0).Seconds()
		return result{float64(n) / wall, float64(n) / cpu}, nil
	}
	pyRun := func(load bool) (result, error) {
		args := []string{script, strconv.FormatFloat(seconds, 'f', -1, 64)}
		if transform {
			args = append(args, "--transform")
		} else if load {
			args = append(args, "--load")
		}
		out, err := exec.Command("/usr/bin/python3", append(args, files...)...).CombinedOutput()
		if err != nil {
			return result{}, fmt.Errorf("pillow: %v: %s", err, out)
		}
		var n int
		var wall, cpu float64
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "images %d seconds %f cpu %f", &n, &wall, &cpu); err == nil {
				return result{float64(n) / wall, float64(n) / cpu}, nil
			}
		}
		return result{}, fmt.Errorf("pillow: unexpected output %q", out)
	}
	names := []string{"psiflow turbojpeg", "psiflow stdlib", "Pillow convert"}
	runs := []func() (result, error){
		func() (result, error) { return goRun(decode.BackendTurbo) },
		func() (result, error) { return goRun(decode.BackendStd) },
		func() (result, error) { return pyRun(false) },
	}
	if !transform {
		names = append(names, "Pillow load")
		runs = append(runs, func() (result, error) { return pyRun(true) })
	}
	res := make([][]result, len(names))
	for r := 0; r < rounds; r++ {
		for j := range names {
			k := (j + r) % len(names) // rotate the order every round
			x, err := runs[k]()
			if err != nil {
				return fmt.Errorf("%s: %w", names[k], err)
			}
			res[k] = append(res[k], x)
			fmt.Printf("round %d  %-18s %8.1f images/s wall  %8.1f images/cpu-s\n", r+1, names[k], x.wall, x.cpu)
		}
	}
	fmt.Printf("\n%-18s %28s %28s\n", "contender", "wall images/s median [min–max]", "CPU images/s median [min–max]")
	for j, name := range names {
		w, c := pick(res[j], func(x result) float64 { return x.wall }), pick(res[j], func(x result) float64 { return x.cpu })
		fmt.Printf("%-18s %10.1f [%6.1f–%6.1f] %10.1f [%6.1f–%6.1f]\n", name, w[len(w)/2], w[0], w[len(w)-1], c[len(c)/2], c[0], c[len(c)-1])
	}
	return nil
}

func pick(rs []result, f func(result) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v
}
