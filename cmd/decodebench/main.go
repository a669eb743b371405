//go:build linux

// Command decodebench measures per-core JPEG decode rates side by side in one
// run, on the same files, in alternating rounds: psiflow's TurboJPEG binding
// (full-size and reduced-size decoding), the standard library's image/jpeg,
// and Pillow (a /usr/bin/python3 script, scripts/reference/pil_decode_bench.py).
// Each contender decodes the files from memory into reused buffers (Pillow:
// Image.open(BytesIO).convert("RGB"), what torchvision's ImageFolder loader
// does) on one thread for -seconds per round, continuing round-robin through
// the files from round to round. It prints wall-clock and CPU-time rates (on
// a shared machine the CPU-time rate is the stable one), the CPU-bound limit
// (the per-core rate times the cores), and, for the transforms, the accuracy
// of reduced-size decoding against the full-size path on the same files.
//
//	go run ./cmd/decodebench -dir DIR [-rounds 5] [-seconds 3] [-transform val|train|none]
//
// -transform val is decode + Resize(256) + CenterCrop(224) (torchvision's
// validation transform), train is RandomResizedCrop(224) + a horizontal flip
// with probability 0.5 (its training transform; Pillow's row then runs
// torchvision's own transforms and needs python3-torchvision), none the
// decode alone. -files takes that many files spread evenly over the sorted
// list, so a mixed folder stays mixed.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
	limit := flag.Int("files", 1000, "use at most this many files, spread evenly over the sorted list")
	transform := flag.String("transform", "val", "val (Resize(256) + CenterCrop(224)), train (RandomResizedCrop(224) + flip) or none (decode only)")
	pillow := flag.Bool("pillow", true, "include Pillow (and for train, torchvision)")
	stdlib := flag.Bool("stdlib", false, "include the standard library's image/jpeg")
	script := flag.String("script", "scripts/reference/pil_decode_bench.py", "Pillow benchmark script")
	flag.Parse()
	if err := run(*dir, *rounds, *seconds, *limit, *transform, *pillow, *stdlib, *script); err != nil {
		fmt.Fprintln(os.Stderr, "decodebench:", err)
		os.Exit(1)
	}
}

// contender is one side of the comparison; next runs it for a while and
// returns its rates.
type contender struct {
	name string
	next func(seconds float64) (result, error)
}

// goContender decodes with a processor of its own, resuming where its last
// round stopped.
func goContender(name string, o decode.Options, tr decode.Transform, blobs [][]byte, keys []string) (contender, func(), error) {
	d, err := decode.NewDecoder(o)
	if err != nil {
		return contender{}, nil, err
	}
	p, err := decode.NewProcessor(d, tr)
	if err != nil {
		d.Close()
		return contender{}, nil, err
	}
	pos, index := 0, int64(0)
	step := func() error {
		_, err := p.Image(decode.Encoded{Data: blobs[pos], Key: keys[pos], Index: index})
		pos, index = (pos+1)%len(blobs), index+1
		return err
	}
	for range blobs { // warm-up pass: buffers sized before the first round
		if err := step(); err != nil {
			d.Close()
			return contender{}, nil, err
		}
	}
	return contender{name: name, next: func(seconds float64) (result, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		n := 0
		c0, t0 := threadCPU(), time.Now()
		deadline := t0.Add(time.Duration(seconds * float64(time.Second)))
		for n < len(blobs) || time.Now().Before(deadline) { // at least one pass
			if err := step(); err != nil {
				return result{}, err
			}
			n++
		}
		wall, cpu := time.Since(t0).Seconds(), (threadCPU() - c0).Seconds()
		return result{float64(n) / wall, float64(n) / cpu}, nil
	}}, func() { d.Close() }, nil
}

func run(dir string, rounds int, seconds float64, limit int, transform string, pillow, stdlib bool, script string) error {
	var tr decode.Transform
	switch transform {
	case "val":
		tr = decode.Transform{Resize: 256, CenterCrop: 224}
	case "train":
		tr = decode.Transform{RandomResizedCrop: decode.ResizedCrop{Size: 224}, FlipProb: 0.5, Seed: 1}
	case "none":
	default:
		return fmt.Errorf("-transform %q: want val, train or none", transform)
	}
	var all []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(strings.ToLower(p), ".jpg") || strings.HasSuffix(strings.ToLower(p), ".jpeg")) {
			all = append(all, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return fmt.Errorf("no .jpg files under %q", dir)
	}
	sort.Strings(all)
	files := all
	if limit > 0 && len(all) > limit {
		files = nil
		for i := range limit {
			files = append(files, all[i*len(all)/limit])
		}
	}
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
	fmt.Printf("%s: %d files, mean %d bytes, %d rounds of %.1fs each, transform %s, %d CPUs, load average %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), len(files), total/len(files), rounds, seconds, transform, runtime.NumCPU(), loadavg())

	var cs []contender
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	add := func(name string, b decode.Backend, tr decode.Transform, noCrop ...bool) error {
		c, done, err := goContender(name, decode.Options{Backend: b, NoCropDecoding: len(noCrop) > 0 && noCrop[0]}, tr, blobs, files)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		closers = append(closers, done)
		cs = append(cs, c)
		return nil
	}
	exact := tr
	exact.Exact = true
	if transform == "none" {
		if err := add("psiflow turbojpeg", decode.BackendTurbo, tr); err != nil {
			return err
		}
	} else {
		if err := add("psiflow exact", decode.BackendTurbo, exact); err != nil {
			return err
		}
		if err := add("psiflow reduced", decode.BackendTurbo, tr); err != nil {
			return err
		}
		if transform == "train" {
			// crop decoding (the default) against decoding every JPEG whole
			if err := add("psiflow reduced, whole", decode.BackendTurbo, tr, true); err != nil {
				return err
			}
		}
	}
	if stdlib {
		if err := add("psiflow stdlib", decode.BackendStd, exact); err != nil {
			return err
		}
	}
	if pillow {
		mode := map[string]string{"val": "--transform", "train": "--train", "none": ""}[transform]
		name := map[string]string{"val": "Pillow", "train": "torchvision", "none": "Pillow convert"}[transform]
		cs = append(cs, contender{name: name, next: func(seconds float64) (result, error) { return pyRun(script, seconds, mode, files) }})
		if transform == "none" {
			cs = append(cs, contender{name: "Pillow load", next: func(seconds float64) (result, error) { return pyRun(script, seconds, "--load", files) }})
		}
	}
	res := make([][]result, len(cs))
	for r := 0; r < rounds; r++ {
		for j := range cs {
			k := (j + r) % len(cs) // rotate the order every round
			x, err := cs[k].next(seconds)
			if err != nil {
				return fmt.Errorf("%s: %w", cs[k].name, err)
			}
			res[k] = append(res[k], x)
			fmt.Printf("round %d  %-18s %8.1f images/s wall  %8.1f images/cpu-s\n", r+1, cs[k].name, x.wall, x.cpu)
		}
	}
	fmt.Printf("\n| contender | CPU images/s median [min–max] | wall images/s median [min–max] | CPU-bound limit on %d cores |\n| --- | ---: | ---: | ---: |\n", runtime.NumCPU())
	for j, c := range cs {
		w, cpu := pick(res[j], func(x result) float64 { return x.wall }), pick(res[j], func(x result) float64 { return x.cpu })
		fmt.Printf("| %s | %.1f [%.1f–%.1f] | %.1f [%.1f–%.1f] | %.0f images/s |\n", c.name, cpu[len(cpu)/2], cpu[0], cpu[len(cpu)-1],
			w[len(w)/2], w[0], w[len(w)-1], cpu[len(cpu)/2]*float64(runtime.NumCPU()))
	}
	if transform != "none" && len(res[1]) > 0 {
		var ratios []float64
		for r := range res[0] {
			ratios = append(ratios, res[1][r].cpu/res[0][r].cpu)
		}
		slices.Sort(ratios)
		fmt.Printf("\nreduced / exact per CPU-second, per round: median %.2f× [%.2f–%.2f]\n", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
		if transform == "train" {
			ratios = ratios[:0]
			for r := range res[1] {
				ratios = append(ratios, res[1][r].cpu/res[2][r].cpu)
			}
			slices.Sort(ratios)
			fmt.Printf("crop decoding / whole decode (both reduced) per CPU-second, per round: median %.2f× [%.2f–%.2f]\n", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
		}
		return accuracy(tr, exact, blobs, files)
	}
	return nil
}

// accuracy compares reduced-size with full-size outputs on every file (the
// same sample index, so the same box for train) and prints the mean and max
// absolute difference per byte and the PSNR, over all images and over those
// decoded at reduced size.
func accuracy(tr, exact decode.Transform, blobs [][]byte, keys []string) error {
	d, err := decode.NewDecoder(decode.Options{Backend: decode.BackendTurbo})
	if err != nil {
		return err
	}
	defer d.Close()
	pr, err := decode.NewProcessor(d, tr)
	if err != nil {
		return err
	}
	pe, err := decode.NewProcessor(d, exact)
	if err != nil {
		return err
	}
	type acc struct {
		n, bytes int
		sum, se  float64
		maxd     int
		minPSNR  float64
	}
	all, scaled := acc{minPSNR: math.Inf(1)}, acc{minPSNR: math.Inf(1)}
	for i, b := range blobs {
		e := decode.Encoded{Data: b, Key: keys[i], Index: int64(i)}
		m, err := pr.Image(e)
		if err != nil {
			return err
		}
		got := slices.Clone(m.Pix)
		w, err := pe.Image(e)
		if err != nil {
			return err
		}
		if len(got) != len(w.Pix) {
			return fmt.Errorf("%s: reduced output has %d bytes, full-size %d", keys[i], len(got), len(w.Pix))
		}
		var sum, se float64
		maxd := 0
		for j := range got {
			dv := int(got[j]) - int(w.Pix[j])
			if dv < 0 {
				dv = -dv
			}
			sum += float64(dv)
			se += float64(dv * dv)
			maxd = max(maxd, dv)
		}
		p := math.Inf(1)
		if se > 0 {
			p = 10 * math.Log10(255*255/(se/float64(len(got))))
		}
		for _, a := range []*acc{&all, &scaled} {
			if a == &scaled && se == 0 && maxd == 0 {
				continue // not decoded at reduced size (or no difference at all)
			}
			a.n++
			a.bytes += len(got)
			a.sum += sum
			a.se += se
			a.maxd = max(a.maxd, maxd)
			a.minPSNR = min(a.minPSNR, p)
		}
	}
	fmt.Printf("\naccuracy of reduced-size against full-size decoding (same boxes):\n| images | mean |Δ| per byte | max |Δ| | PSNR (all bytes) | worst image's PSNR |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, x := range []struct {
		what string
		a    acc
	}{{"all", all}, {"those that differ (decoded at reduced size)", scaled}} {
		if x.a.n == 0 {
			fmt.Printf("| %s: none | | | | |\n", x.what)
			continue
		}
		ps := math.Inf(1)
		if x.a.se > 0 {
			ps = 10 * math.Log10(255*255/(x.a.se/float64(x.a.bytes)))
		}
		fmt.Printf("| %s: %d | %.3f | %d | %.1f dB | %.1f dB |\n", x.what, x.a.n, x.a.sum/float64(x.a.bytes), x.a.maxd, ps, x.a.minPSNR)
	}
	return nil
}

func pyRun(script string, seconds float64, mode string, files []string) (result, error) {
	args := []string{script, strconv.FormatFloat(seconds, 'f', -1, 64)}
	if mode != "" {
		args = append(args, mode)
	}
	out, err := exec.Command("/usr/bin/python3", append(args, files...)...).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, out)
	}
	var n int
	var wall, cpu float64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "images %d seconds %f cpu %f", &n, &wall, &cpu); err == nil {
			return result{float64(n) / wall, float64(n) / cpu}, nil
		}
	}
	return result{}, fmt.Errorf("unexpected output %q", out)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func pick(rs []result, f func(result) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v
}
