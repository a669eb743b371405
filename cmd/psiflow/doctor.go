package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// hostCheck is one row of "psiflow doctor": a feature of the host and whether psiflow can use it.
// Each area registers its checks from its own file (doctor_<area>.go) with registerCheck.
type hostCheck struct {
	// order sorts rows; lower first. Areas use their own hundreds (cgroup 100, pressure 200,
	// memory 300, io 400, decode 500, gpu 600).
	order int
	// name is the feature, e.g. "cgroup layout" or "io_uring".
	name string
	// probe reports whether the feature is usable and a detail: the value found, or the reason it is not usable.
	probe func(ctx context.Context) (ok bool, detail string)
}

var hostChecks []hostCheck

// registerCheck adds a row to "psiflow doctor".
func registerCheck(c hostCheck) { hostChecks = append(hostChecks, c) }

func init() {
	register(command{
		name:    "doctor",
		summary: "show what this host supports (cgroups, PSI, io_uring, memory, decoders, GPU)",
		run:     runDoctor,
	})
}

func runDoctor(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("doctor", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	checks := append([]hostCheck(nil), hostChecks...)
	sort.SliceStable(checks, func(i, j int) bool { return checks[i].order < checks[j].order })
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tSTATUS\tDETAIL")
	for _, c := range checks {
		ok, detail := c.probe(ctx)
		status := "yes"
		if !ok {
			status = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.name, status, detail)
	}
	return tw.Flush()
}
