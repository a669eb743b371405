package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/psiflow/psiflow/internal/harness"
)

func init() {
	register(command{
		name:    "cotenant",
		summary: "(used by bench -cotenant) touch anonymous memory over a ramp, hold it (a spike: for -hold, then fall to -after) until stdin closes",
		run:     runCoTenant,
	})
}

const coTenantUsage = `Usage: psiflow cotenant -bytes SIZE [-ramp 5s] [-hold 5s -after SIZE]

The co-tenant of "psiflow bench -cotenant": a stand-in for a training process that
shares the loader's memory cgroup. It maps SIZE of anonymous memory and writes every
page, evenly over -ramp (the memory is charged to its cgroup page by page and, without
swap, cannot be reclaimed), reports its progress as JSON lines on stdout
({"event":"ramp","bytes":N,"t":S} at each tenth, {"event":"held",...} when done), and
holds the memory until its standard input closes or it gets SIGINT or SIGTERM. With
-hold it is a spike: after holding SIZE for -hold it gives back all but -after at once
(MADV_DONTNEED), says {"event":"fell","bytes":N,...} and holds what is left.

Flags:
`

func runCoTenant(ctx context.Context, stdout io.Writer, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(os.Stderr, coTenantUsage)
			fs := flag.NewFlagSet("cotenant", flag.ContinueOnError)
			fs.String("bytes", "", "anonymous memory to touch and hold: bytes, or with a K, M, G suffix (binary; required)")
			fs.Duration("ramp", 5e9, "time over which the memory is touched, evenly (0: at once)")
			fs.Duration("hold", 0, "a spike: hold -bytes this long, then give back all but -after (0: hold -bytes until the end)")
			fs.String("after", "0", "with -hold: the memory kept after the fall, bytes or with a K, M, G suffix")
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
			return flag.ErrHelp
		}
	}
	if err := harness.CoTenantMain(ctx, args, os.Stdin, stdout, io.Discard); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
