//go:build linux

package uring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	regEventfd   = 4
	unregEventfd = 5

	// cqEventfdDisabled is IORING_CQ_EVENTFD_DISABLED (Linux 5.8): while it is
	// set in the completion ring's flags the kernel does not signal the
	// registered eventfd.
	cqEventfdDisabled uint32 = 1 << 0
)

// Notifier is an eventfd registered with a ring (IORING_REGISTER_EVENTFD):
// the kernel signals it when it posts completions, and [Notifier.Wait]
// waits for that signal in Go's network poller, so a goroutine waiting for
// completions parks like one waiting on a socket instead of blocking a
// thread in io_uring_enter (which the runtime's monitor must notice and
// hand the thread's processor off from).
//
// The kernel signals the eventfd when it posts a completion; for rings set
// up with [SetupCoopTaskrun] a completion that needs the submitting thread's
// task work is posted only when that thread next enters the kernel, which a
// thread asleep in the Go scheduler does not do: use a Notifier only on
// rings set up without it.
//
// A Notifier is not safe for concurrent use; it belongs to its ring.
type Notifier struct {
	r     *Ring
	f     *os.File
	rc    syscall.RawConn
	buf   [8]byte
	armed bool
}

// ErrNotifierUnavailable is returned by [Ring.NewNotifier] when the ring's
// completion flags cannot switch the notifications off (Linux < 5.8), or
// the eventfd cannot be polled by Go's network poller.
var ErrNotifierUnavailable = errors.New("uring: completion notifier unavailable")

// NewNotifier creates a non-blocking eventfd, registers it with the ring and
// hands it to Go's network poller. Notifications start disarmed: the
// kernel signals the eventfd only between [Notifier.Arm] and
// [Notifier.Disarm], so completions reaped while the reader is busy cost
// no wake-up of the poller. Close the Notifier after the ring.
func (r *Ring) NewNotifier() (*Notifier, error) {
	if r.cqFlags == nil {
		return nil, fmt.Errorf("%w: the completion ring has no flags word (Linux < 5.8)", ErrNotifierUnavailable)
	}
	atomic.StoreUint32(r.cqFlags, atomic.LoadUint32(r.cqFlags)|cqEventfdDisabled)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("uring: eventfd: %w", err)
	}
	fd := int32(efd)
	if err := r.register(regEventfd, unsafe.Pointer(&fd), 1); err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("uring: register eventfd: %w", err)
	}
	// os.NewFile adds a non-blocking descriptor to the network poller.
	f := os.NewFile(uintptr(efd), "io_uring eventfd")
	rc, err := f.SyscallConn()
	if err == nil {
		// A descriptor the poller refused has no deadlines: Wait could not time out.
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		_ = r.register(unregEventfd, nil, 0)
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrNotifierUnavailable, err)
	}
	return &Notifier{r: r, f: f, rc: rc}, nil
}

// Arm lets the kernel signal the eventfd for the completions it posts from
// now on. A waiter arms, then looks at the completion queue once more (a
// completion posted before Arm signalled nothing), then calls Wait.
func (n *Notifier) Arm() {
	if !n.armed {
		atomic.StoreUint32(n.r.cqFlags, atomic.LoadUint32(n.r.cqFlags)&^cqEventfdDisabled)
		n.armed = true
	}
}

// Disarm stops the kernel signalling the eventfd: while the completions
// are reaped without waiting.
func (n *Notifier) Disarm() {
	if n.armed {
		atomic.StoreUint32(n.r.cqFlags, atomic.LoadUint32(n.r.cqFlags)|cqEventfdDisabled)
		n.armed = false
	}
}

// Wait parks the goroutine in the network poller until the eventfd has been
// signalled (and resets its count), or until timeout: then it returns
// [ErrTimeout]. A signal left from completions already reaped makes it
// return at once: the caller looks at the completion queue after every
// return, and may find it empty.
//
// The kernel may read the flag Arm clears just before it publishes a
// completion, so a completion posted at the very moment of Arm can go
// unsignalled: the caller waits in slices of a timeout and looks at the
// completion queue after each.
func (n *Notifier) Wait(timeout time.Duration) error {
	if err := n.f.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("uring: eventfd deadline: %w", err)
	}
	var rerr error
	err := n.rc.Read(func(fd uintptr) bool {
		for {
			_, e := unix.Read(int(fd), n.buf[:])
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // not signalled: park in the poller
			}
			rerr = e
			return true
		}
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	case err != nil:
		return fmt.Errorf("uring: wait on eventfd: %w", err)
	case rerr != nil:
		return fmt.Errorf("uring: read eventfd: %w", rerr)
	}
	return nil
}

// Close closes the eventfd. Close the ring first (closing the ring drops
// the registration); a Notifier whose ring is still open is unregistered.
func (n *Notifier) Close() error {
	if n.f == nil {
		return nil
	}
	if n.r.fd >= 0 {
		_ = n.r.register(unregEventfd, nil, 0)
	}
	err := n.f.Close()
	n.f = nil
	return err
}
