package stopsig

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		if got := (&Signal{Sig: tc.sig}).ExitCode(); got != tc.want {
			t.Errorf("%s: exit %d, want %d", Name(tc.sig), got, tc.want)
		}
	}
	if got := (&Signal{Sig: syscall.SIGTERM}).Error(); got != "stopped by SIGTERM" {
		t.Errorf("message %q", got)
	}
}

// TestContext sends this process SIGTERM: the context ends with the signal as
// its cause, and StoppedBy tells the cancellation from a failure of its own.
func TestContext(t *testing.T) {
	ctx, stop := Context(context.Background())
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("no cancellation 30 s after SIGTERM")
	}
	s := Of(ctx)
	if s == nil || s.Sig != syscall.SIGTERM {
		t.Fatalf("cause %v, want SIGTERM", context.Cause(ctx))
	}
	mine := errors.New("mine")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("read: %w", context.Canceled), true},
		{fmt.Errorf("graph: %w", s), true},
		{fmt.Errorf("x: %w", mine), true},
		{errors.New("disk full"), false},
		{nil, false},
	} {
		if got := StoppedBy(ctx, tc.err, mine) != nil; got != tc.want {
			t.Errorf("StoppedBy(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if StoppedBy(context.Background(), context.Canceled) != nil {
		t.Error("a context no signal ended has no stop signal")
	}
}
