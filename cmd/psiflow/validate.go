package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/psiflow/psiflow/pipelines"
)

func init() {
	register(command{
		name:    "validate",
		summary: "check pipeline files (syntax, kinds, keys, parameter types and ranges, edge types) without running them",
		run:     runValidate,
	})
}

// setFlags collects repeated -set key=value overrides.
type setFlags []string

func (s *setFlags) String() string { return strings.Join(*s, ",") }

func (s *setFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want key=value", v)
	}
	*s = append(*s, v)
	return nil
}

// parseInterleaved parses flags that may come before and after positional arguments.
func parseInterleaved(fset *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fset, args); err != nil {
			return nil, err
		}
		if fset.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fset.Arg(0))
		args = fset.Args()[1:]
	}
}

// loadPipeline reads FILE, or a shipped pipeline by name ("demo", "demo.yaml")
// when no such file exists.
func loadPipeline(file string, sets []string) (*pipelines.Pipeline, error) {
	opts := pipelines.Options{Set: sets}
	if _, err := os.Stat(file); err != nil && errors.Is(err, fs.ErrNotExist) {
		name := strings.TrimSuffix(file, ".yaml") + ".yaml"
		if data, serr := fs.ReadFile(pipelines.Shipped(), name); serr == nil {
			return pipelines.Parse("pipelines/"+name, data, opts)
		}
	}
	return pipelines.Load(file, opts)
}

func runValidate(_ context.Context, stdout io.Writer, args []string) error {
	fset := newFlagSet("validate", stdout)
	var sets setFlags
	fset.Var(&sets, "set", "override key=value (repeatable), e.g. -set decode.workers=4")
	quiet := fset.Bool("q", false, "print nothing when valid")
	files, err := parseInterleaved(fset, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: no pipeline file (psiflow validate FILE...)", errUsage)
	}
	bad := 0
	for _, f := range files {
		p, err := loadPipeline(f, sets)
		if err != nil {
			bad++
			fmt.Fprintln(stdout, err)
			continue
		}
		if !*quiet {
			fmt.Fprintf(stdout, "%s: valid: %s\n", p.File, describePipeline(p))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files not valid", bad, len(files))
	}
	return nil
}

// describePipeline writes the graph a file makes in one line.
func describePipeline(p *pipelines.Pipeline) string {
	var parts []string
	prev := ""
	for _, c := range p.Nodes() {
		s := c.Name
		if c.Name != c.Kind.Name {
			s += "(" + c.Kind.Name + ")"
		}
		if len(c.Inputs) > 1 || (len(c.Inputs) == 1 && c.Inputs[0] != prev) {
			s = strings.Join(c.Inputs, "+") + " ⇒ " + s
		}
		parts = append(parts, s)
		prev = c.Name
	}
	epochs := ""
	if p.Epochs > 1 {
		epochs = fmt.Sprintf(", %d epochs", p.Epochs)
	}
	device := ""
	if d := p.Device(); d != "cpu" {
		device = ", device " + d
		if d == "sim" {
			device += " (simulated)"
		}
	}
	return strings.Join(parts, " → ") + epochs + device
}
