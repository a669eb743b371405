// Package stopsig is how psiflow's programs stop on SIGINT and SIGTERM: a
// context cancelled with the signal as its cause, the line that names it, and
// the exit status a job scheduler expects of a process the signal stopped
// (128 + its number: 130 for SIGINT, 143 for SIGTERM).
//
// It owns the signal handling of a program's main; it does not print (the
// program says [Signal]'s message once) nor exit.
package stopsig

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// Signal is the cancellation cause of a [Context] that a stop signal ended;
// its message names the signal ("stopped by SIGTERM").
type Signal struct {
	// Sig is the signal received.
	Sig os.Signal
}

// Error returns "stopped by SIGTERM" (or SIGINT).
func (s *Signal) Error() string { return "stopped by " + Name(s.Sig) }

// ExitCode is the exit status of a program the signal stopped: 128 + its
// number, as a shell reports a process the signal killed.
func (s *Signal) ExitCode() int { return ExitCode(s.Sig) }

// ExitCode is 128 + the number of sig (130 for SIGINT, 143 for SIGTERM), or 1
// for a signal that has no number.
func ExitCode(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// Name is the conventional name of a signal: SIGTERM, SIGINT, SIGHUP.
func Name(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case nil:
		return "no signal"
	}
	return s.String()
}

// Context returns a context cancelled, with a [*Signal] cause, on the first
// SIGINT or SIGTERM; later ones are caught and dropped until stop, which
// releases the signals and the context.
func Context(parent context.Context) (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			cancel(&Signal{Sig: s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
		<-done
	}
}

// Of returns the signal that cancelled ctx (a [Context]), or nil when none
// did.
func Of(ctx context.Context) *Signal {
	var s *Signal
	if errors.As(context.Cause(ctx), &s) {
		return s
	}
	return nil
}

// StoppedBy returns the stop signal that err comes from, or nil: ctx was
// cancelled by one and err is that cancellation (context.Canceled, the signal
// itself as a cause, or an error of the caller's that also counts as one,
// listed in also), not a failure of its own.
func StoppedBy(ctx context.Context, err error, also ...error) *Signal {
	sig := Of(ctx)
	if sig == nil || err == nil {
		return nil
	}
	var s *Signal
	if errors.Is(err, context.Canceled) || errors.As(err, &s) {
		return sig
	}
	for _, a := range also {
		if errors.Is(err, a) {
			return sig
		}
	}
	return nil
}
