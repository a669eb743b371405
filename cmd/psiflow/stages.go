package main

import (
	"context"
	"fmt"
	"io"

	"github.com/psiflow/psiflow/pipelines"
)

func init() {
	register(command{
		name:    "stages",
		summary: "list every source, stage and sink kind of pipeline files with its parameters",
		run:     runStages,
	})
}

func runStages(_ context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("stages", stdout)
	md := fs.Bool("markdown", false, "print the reference as Markdown (the generated part of docs/PIPELINES.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *md {
		_, err := io.WriteString(stdout, pipelines.Default().Markdown())
		return err
	}
	return pipelines.Default().WriteReference(stdout)
}
