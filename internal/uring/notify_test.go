//go:build linux

package uring

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

func newNotifier(t *testing.T, r *Ring) *Notifier {
	t.Helper()
	n, err := r.NewNotifier()
	if errors.Is(err, ErrNotifierUnavailable) || errors.Is(err, unix.EINVAL) {
		kerneltest.Skip(t, kerneltest.IOUring, "eventfd notifications unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// plainRing is a ring without cooperative task running, as a Notifier needs.
func plainRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	r, err := New(entries, SetupClamp)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		kerneltest.Skip(t, kerneltest.IOUring, "io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestNotifierArmed: a completion posted while armed signals the eventfd
// (Wait returns at once); one posted while disarmed does not (Wait runs
// into its timeout), and its completion is in the ring all the same.
func TestNotifierArmed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		armed bool
	}{
		{"armed", true},
		{"disarmed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := plainRing(t, 4)
			n := newNotifier(t, r)
			if tc.armed {
				n.Arm()
			}
			r.SQE().PrepNop() // a NOP completes inside the submission
			if _, err := r.Submit(0); err != nil {
				t.Fatal(err)
			}
			timeout := 200 * time.Millisecond
			if tc.armed {
				timeout = time.Minute
			}
			t0 := time.Now()
			err := n.Wait(timeout)
			switch {
			case tc.armed && err != nil:
				t.Fatalf("armed: Wait after a completion: %v", err)
			case !tc.armed && !errors.Is(err, ErrTimeout):
				t.Fatalf("disarmed: Wait = %v after %v, want ErrTimeout (the eventfd was signalled)", err, time.Since(t0))
			}
			if got := r.CQReady(); got != 1 {
				t.Fatalf("%d completions ready, want 1", got)
			}
			// The signal was consumed: the next Wait times out.
			if err := n.Wait(20 * time.Millisecond); !errors.Is(err, ErrTimeout) {
				t.Fatalf("second Wait = %v, want ErrTimeout", err)
			}
		})
	}
}

// TestNotifierWakesOnAsyncCompletion submits a read of an empty pipe from a
// thread of its own, which then sleeps in the scheduler, and waits for the
// completion on another goroutine: the completion (its task work runs on the
// submitting thread) must arrive once the pipe is written, though the
// submitting thread never enters the kernel by itself.
func TestNotifierWakesOnAsyncCompletion(t *testing.T) {
	r := plainRing(t, 4)
	n := newNotifier(t, r)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	buf := make([]byte, 16)
	submitted, release := make(chan error, 1), make(chan struct{})
	defer close(release)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		e := r.SQE()
		e.PrepRead(int32(pr.Fd()), buf, 0)
		e.UserData = 7
		_, err := r.Submit(0)
		submitted <- err
		<-release // the submitting thread sleeps here, locked to this goroutine
	}()
	if err := <-submitted; err != nil {
		t.Fatal(err)
	}
	n.Arm()
	if r.CQReady() != 0 {
		t.Fatal("the read of an empty pipe completed before the pipe was written")
	}
	waited := make(chan error, 1)
	go func() { waited <- n.Wait(time.Minute) }()
	if _, err := pw.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Wait did not return after the pipe was written")
	}
	c, ok := r.PeekCQE()
	if !ok {
		t.Fatal("signalled, but no completion in the ring")
	}
	r.CQESeen()
	if c.UserData != 7 || c.Res != 5 || string(buf[:5]) != "hello" {
		t.Fatalf("completion %+v, buf %q: want user data 7, 5 bytes, hello", c, buf[:5])
	}
}

// TestNotifierClose: closing the notifier before or after its ring
// succeeds, and Close twice is harmless.
func TestNotifierClose(t *testing.T) {
	for _, ringFirst := range []bool{true, false} {
		r := plainRing(t, 4)
		n := newNotifier(t, r)
		if ringFirst {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(); err != nil {
			t.Fatalf("ring closed first %v: %v", ringFirst, err)
		}
		if err := n.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}
