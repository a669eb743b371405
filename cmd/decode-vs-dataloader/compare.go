//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/harness"
)

func runCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	data := fs.String("data", "/var/tmp/psiflow-imagenet", "image folder (ImageFolder layout)")
	mk := fs.Int("make", 0, "generate this many JPEGs into -data first if it has none (scripts/reference/make_jpegs.py)")
	limits := fs.String("limits", "0,256M,128M", "comma-separated cgroup memory limits (0: none)")
	rounds := fs.Int("rounds", 3, "rounds per loader and limit (alternating order)")
	cold := fs.Bool("cold", true, "drop the page cache of the data before each run")
	timeout := fs.Duration("timeout", 3*time.Minute, "per-run timeout (the group is killed after it)")
	warmup := fs.Int("warmup", 3, "batches left out of throughput and latency")
	python := fs.String("python", "/usr/bin/python3", "Python with torch and torchvision (Debian python3-torch, python3-torchvision)")
	workers := fs.Int("workers", 2, "DataLoader num_workers and psiflow decode workers")
	md := fs.String("md", "", "write the Markdown report here (default stdout)")
	js := fs.String("json", "", "write the JSON report here")
	only := fs.String("only", "", "run only this loader (psiflow or dataloader)")
	limitSeconds := fs.Float64("limit-seconds", 3, "CPU seconds to time the transform alone for the CPU-bound limit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := harness.DataFiles(*data)
	if err != nil || len(files) == 0 {
		if *mk <= 0 {
			return fmt.Errorf("no data under %s (use -make N): %v", *data, err)
		}
		cmd := exec.CommandContext(ctx, *python, "scripts/reference/make_jpegs.py", *data, strconv.Itoa(*mk), "100")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("generating data: %w", err)
		}
		if files, err = harness.DataFiles(*data); err != nil {
			return err
		}
	}
	var ls []int64
	for _, f := range strings.Split(*limits, ",") {
		n, err := bytesize.Parse(f)
		if err != nil {
			return err
		}
		ls = append(ls, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	peer, err := filepath.Abs("benchmarks/peers/dataloader.py")
	if err != nil {
		return err
	}
	loaders := []harness.Loader{
		{Name: "dataloader", Argv: []string{self, "wrap", "--", *python, peer, "--data", *data, "--workers", strconv.Itoa(*workers), "--prefetch", "2", "--batch", "64"}},
		{Name: "psiflow", Argv: []string{self, "wrap", "--", self, "loader", "-data", *data, "-workers", strconv.Itoa(*workers), "-batch", "64"}},
	}
	if *only != "" {
		var keep []harness.Loader
		for _, l := range loaders {
			if l.Name == *only {
				keep = append(keep, l)
			}
		}
		loaders = keep
	}
	plan := harness.Plan{
		Loaders:  loaders,
		Limits:   ls,
		Rounds:   *rounds,
		Baseline: loaders[0].Name,
		Options: harness.Options{
			Timeout: *timeout, Warmup: *warmup, Cold: *cold, Data: files,
			GroupPrefix: "psiflow-decodebench", Stderr: os.Stderr,
		},
	}
	lim, err := measureLimit(files, *limitSeconds)
	if err != nil {
		return fmt.Errorf("measuring the CPU-bound limit: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%d files, limits %v, %d rounds, cold=%v; CPU-bound limit %.0f images/s (%.0f per core × %d)\n",
		len(files), ls, *rounds, *cold, lim.rate(), lim.perCore, lim.cpus)
	rep, err := harness.Compare(ctx, plan, func(r harness.Result) {
		fmt.Fprintf(os.Stderr, "%+v\n", r)
	})
	if rep != nil {
		var w io.Writer = os.Stdout
		if *md != "" {
			f, ferr := os.Create(*md)
			if ferr != nil {
				return ferr
			}
			defer f.Close()
			w = f
		}
		if werr := rep.WriteMarkdown(w); werr != nil && err == nil {
			err = werr
		}
		perCPU := writeCPUTable(w, rep)
		writeLimitTable(w, rep, lim, perCPU)
		if *js != "" {
			f, ferr := os.Create(*js)
			if ferr != nil {
				return ferr
			}
			defer f.Close()
			if werr := rep.WriteJSON(f); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return err
}

// loaderLimit names one loader at one memory limit.
type loaderLimit struct {
	loader string
	limit  int64
}

// writeCPUTable adds samples per CPU-second (all processes of the loader, from
// the wrap subcommand's report) per loader and limit: median and range over
// the finished runs. It returns the medians.
func writeCPUTable(w io.Writer, rep *harness.Report) map[loaderLimit]float64 {
	type key = loaderLimit
	vals := map[key][]float64{}
	medians := map[key]float64{}
	var order []key
	for _, r := range rep.Runs {
		k := key{r.Loader, r.Limit}
		if _, ok := vals[k]; !ok {
			order = append(order, k)
			vals[k] = nil
		}
		var cpu float64
		i := strings.LastIndex(r.StderrTail, "decode-vs-dataloader: cpu seconds ")
		if r.Outcome != harness.Finished || i < 0 || r.DoneSamples <= 0 {
			continue
		}
		if _, err := fmt.Sscanf(r.StderrTail[i:], cpuLine, &cpu); err != nil || cpu <= 0 {
			continue
		}
		vals[k] = append(vals[k], float64(r.DoneSamples)/cpu)
	}
	fmt.Fprint(w, "\nSamples per CPU-second (user + system time of all the loader's processes, whole run including start-up):\n\n")
	fmt.Fprintln(w, "| limit | loader | runs | samples per CPU-second |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: |")
	for _, k := range order {
		v := vals[k]
		lim := "none"
		if k.limit > 0 {
			lim = harness.FormatBytes(k.limit)
		}
		if len(v) == 0 {
			fmt.Fprintf(w, "| %s | %s | 0 | – |\n", lim, k.loader)
			continue
		}
		s := harness.Summarize(v)
		medians[k] = s.Median
		fmt.Fprintf(w, "| %s | %s | %d | %.0f (%.0f–%.0f) |\n", lim, k.loader, len(v), s.Median, s.Min, s.Max)
	}
	return medians
}
