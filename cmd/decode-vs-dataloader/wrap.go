//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// cpuLine is what the wrap subcommand writes last on standard error.
const cpuLine = "decode-vs-dataloader: cpu seconds %f\n"

// runWrap runs argv (after "--") with the same standard streams and, when it
// exits, writes the CPU time (user + system) of all its waited-for
// descendants to standard error. On this shared machine, samples per CPU
// second compare loaders independently of how busy the other tenants are.
func runWrap(args []string) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return errors.New("wrap: no command")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// pass termination on to the child; the harness kills the whole group anyway
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-sig:
			_ = cmd.Process.Signal(s)
		case <-done:
		}
	}()
	err := cmd.Wait()
	var ru syscall.Rusage
	if e := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); e == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Fprintf(os.Stderr, cpuLine, cpu.Seconds())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	return err
}
