package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/internal/stopsig"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source/synth"
)

// command is one launcher subcommand.
type command struct {
	// name is the word typed after "psiflow" (several words are joined by a space, e.g. "pressure watch").
	name string
	// summary is the one-line description shown by "psiflow help".
	summary string
	// run executes the command with the arguments that follow its name.
	// stdout is where results go; errors are returned, not printed.
	run func(ctx context.Context, stdout io.Writer, args []string) error
}

var commands = map[string]command{}

// register adds a subcommand; it panics on a duplicate name (a programming error caught at start-up).
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("psiflow: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad command-line usage (exit status 2).
var errUsage = errors.New("usage")

func main() {
	reexec.Init() // first: this binary is also its own cgroup and pressure helpers
	if code := checkAddressSpace(os.Stderr, os.Args[1:]); code != 0 {
		os.Exit(code)
	}
	ctx, stop := stopsig.Context(context.Background())
	code := dispatch(ctx, os.Stdout, os.Stderr, os.Args[1:])
	stop()
	os.Exit(code)
}

// dispatch finds the command named by args (longest match of one or two words) and runs it.
// It returns the process exit status.
func dispatch(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	var c command
	var ok bool
	var rest []string
	if len(args) >= 2 {
		c, ok = commands[args[0]+" "+args[1]]
		rest = args[2:]
	}
	if !ok {
		c, ok = commands[args[0]]
		rest = args[1:]
	}
	if !ok {
		fmt.Fprintf(stderr, "psiflow: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if path := os.Getenv(cpuProfileEnv); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "psiflow %s: %s: %v\n", c.name, cpuProfileEnv, err)
			return 1
		}
		defer stopProfile(stderr)
	}
	if err := c.run(ctx, stdout, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var st *exitStatusError
		if sig := stoppedBy(ctx, err); sig != nil {
			// What a stop signal ended reads as that signal, not as a cancelled
			// context, and ends with 128 + its number, as a shell reports a
			// process the signal killed (what job schedulers look for).
			fmt.Fprintf(stderr, "psiflow %s: %v\n", c.name, sig)
			var nw *sink.NotWrittenError
			if errors.As(err, &nw) {
				// What the stop cost: a file sink removed this run's output.
				fmt.Fprintf(stderr, "psiflow %s: %v\n", c.name, nw)
			}
			var gs *synth.Stopped
			if errors.As(err, &gs) {
				// gen: the partial file it removed, and what it kept.
				fmt.Fprintf(stderr, "psiflow %s: %v\n", c.name, gs)
			}
			return sig.ExitCode()
		}
		if errors.As(err, &st) && st.err == nil {
			return st.code // already said (a -cgroup child said how it ended)
		}
		fmt.Fprintf(stderr, "psiflow %s: %v\n", c.name, err)
		if errors.As(err, &st) {
			return st.code
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		if errors.Is(err, memory.ErrBelowFloor) {
			return protocol.ExitBelowFloor // the loader yielded to its co-tenant
		}
		return 1
	}
	return 0
}

// cpuProfileEnv names the environment variable that makes any command write a CPU
// profile of its run (runtime/pprof) to the file it names, for `go tool pprof`.
const cpuProfileEnv = "PSIFLOW_CPUPROFILE"

// startCPUProfile starts a CPU profile written to path; the function it returns stops
// it and closes the file, reporting a failure on w.
func startCPUProfile(path string) (func(w io.Writer), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func(w io.Writer) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(w, "psiflow: %s: %v\n", cpuProfileEnv, err)
		}
	}, nil
}

// exitStatusError is a command's failure that carries the exit status psiflow ends
// with: that of a command a launcher ran (passed through as timeout and env do). A
// nil err means the failure was already said (by the child psiflow of run -cgroup):
// dispatch then prints nothing.
type exitStatusError struct {
	code int
	err  error
}

func (e *exitStatusError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitStatusError) Unwrap() error { return e.err }

// stoppedBy returns the stop signal that err comes from, or nil: ctx was cancelled
// by one and err is the cancellation (context.Canceled, the signal as a graph's
// cause, or a run's errStopped), not a failure of its own.
func stoppedBy(ctx context.Context, err error) *stopsig.Signal {
	return stopsig.StoppedBy(ctx, err, errStopped)
}

// sayStopped says on standard error which signal stopped command name, when one
// did (a command that ends with status 0 on it: the live views).
func sayStopped(ctx context.Context, name string) {
	if sig := stopsig.Of(ctx); sig != nil {
		fmt.Fprintf(os.Stderr, "psiflow %s: %v\n", name, sig)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "psiflow: AI-training data loading that slows down before the OOM killer acts.")
	fmt.Fprintln(w, "\nUsage: psiflow <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'psiflow <command> -h' for a command's flags.")
	fmt.Fprintln(w, "With "+cpuProfileEnv+"=FILE in the environment, a command writes a CPU profile of its run to FILE (go tool pprof).")
	fmt.Fprintln(w, "A command stopped by SIGINT or SIGTERM says so and exits with 128 + the signal's number (130, 143); the live views (pressure watch, top) exit 0.")
}

// newFlagSet returns a flag set for a subcommand that reports errors instead of exiting.
func newFlagSet(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("psiflow "+name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	return fs
}

// parseFlags parses args and wraps a parse failure as a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
