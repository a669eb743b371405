package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/psiflow/psiflow/internal/demo"
)

func init() {
	register(command{
		name:    "demo",
		summary: "run a synthetic pipeline (generate → decode → batch → consume) anywhere",
		run:     runDemo,
	})
}

func runDemo(ctx context.Context, stdout io.Writer, args []string) error {
	cfg := demo.DefaultConfig()
	fs := newFlagSet("demo", stdout)
	fs.IntVar(&cfg.Items, "items", cfg.Items, "samples to generate")
	fs.IntVar(&cfg.ItemBytes, "size", cfg.ItemBytes, "bytes per sample")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "decode workers")
	fs.IntVar(&cfg.BatchSize, "batch", cfg.BatchSize, "samples per batch")
	fs.Int64Var(&cfg.Budget, "budget", cfg.Budget, "byte budget of the graph (bytes in flight)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the generated data")
	progress := fs.Bool("progress", isTerminal(stdout), "show a live progress line (default: when stdout is a terminal)")
	data := fs.String("data", "", "read this image folder (JPEG/PNG, e.g. from 'psiflow gen jpeg') through the real reader and decoder instead of generating samples")
	epochs := fs.Int("epochs", 1, "with -data: passes over the folder")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var show func(demo.Snapshot)
	if *progress {
		show = func(s demo.Snapshot) {
			sec := s.Elapsed.Seconds()
			fmt.Fprintf(stdout, "\r%8d samples  %9.0f samples/s  %9s/s  budget %9s / %-9s  bottleneck %s (%.0f%% busy)\x1b[K",
				s.Items, float64(s.Items)/sec, human(float64(s.Bytes)/sec), human(float64(s.BudgetInUse)), human(float64(s.BudgetLimit)),
				s.Bottleneck, s.BottleneckBusyPct)
		}
	}
	if *data != "" {
		fc := demo.DefaultFolderConfig(*data)
		fc.Workers, fc.BatchSize, fc.Epochs = cfg.Workers, cfg.BatchSize, *epochs
		if budgetSet(fs) {
			fc.Budget = cfg.Budget
		}
		fc.ReaderInfo = func(s string) { fmt.Fprintln(stdout, "  "+s) }
		fmt.Fprintf(stdout, "psiflow demo: %s → read → decode → Resize(%d) → CenterCrop(%d) → batch %d, %d decode workers, budget %s\n",
			*data, fc.Resize, fc.Crop, fc.BatchSize, fc.Workers, human(float64(fc.Budget)))
		sum, err := demo.RunFolder(ctx, fc, 250*time.Millisecond, show)
		if *progress {
			fmt.Fprintln(stdout)
		}
		printDemoSummary(stdout, sum)
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fmt.Fprintf(stdout, "psiflow demo: %d samples of %s, %d decode workers, batches of %d, budget %s\n",
		cfg.Items, human(float64(cfg.ItemBytes)), cfg.Workers, cfg.BatchSize, human(float64(cfg.Budget)))
	sum, err := demo.Run(ctx, cfg, 250*time.Millisecond, show)
	if *progress {
		fmt.Fprintln(stdout)
	}
	printDemoSummary(stdout, sum)
	return err
}

func printDemoSummary(w io.Writer, s demo.Summary) {
	sec := s.Elapsed.Seconds()
	fmt.Fprintf(w, "\n%d samples in %d batches in %.2fs: %.0f samples/s, %s/s; peak budget in use %s\n\n",
		s.Items, s.Batches, sec, float64(s.Items)/sec, human(float64(s.Bytes)/sec), human(float64(s.Peak)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STAGE\tKIND\tWORKERS\tIN\tOUT\tBYTES OUT\tBUSY s\tWAIT IN s\tWAIT OUT s\t")
	for _, st := range s.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%.2f\t%.2f\t%.2f\t\n",
			st.Name, st.Kind, st.Workers, st.ItemsIn, st.ItemsOut, human(float64(st.BytesOut)), st.Busy, st.WaitIn, st.WaitOut)
	}
	tw.Flush()
}

// budgetSet reports whether -budget was given on the command line.
func budgetSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "budget" })
	return set
}

// human formats a byte count with a binary unit.
func human(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", b), ".0") + " " + units[i]
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
