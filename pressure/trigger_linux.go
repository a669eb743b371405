//go:build linux

package pressure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// openTriggerFD opens path O_RDWR|O_NONBLOCK and arms one trigger on it.
// The string is terminated by a NUL, as the kernel requires on /proc/pressure.
func openTriggerFD(path string, t Trigger) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s for trigger %q: %w", path, t, explainTriggerErr(err))
	}
	if err := writeTrigger(fd, path, t); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func writeTrigger(fd int, path string, t Trigger) error {
	if _, err := unix.Write(fd, append([]byte(t.String()), 0)); err != nil {
		return fmt.Errorf("arm trigger %q on %s: %w", t, path, explainTriggerErr(err))
	}
	return nil
}

// explainTriggerErr adds the kernel's rule to the bare errno it returns.
func explainTriggerErr(err error) error {
	switch {
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%w (the kernel wants \"some|full <stall_us> <window_us>\", window 500ms..10s, stall <= window, and without CAP_SYS_RESOURCE a window that is a multiple of 2s)", err)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%w (one trigger per file descriptor)", err)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: %w (kernel built with PSI_DEFAULT_DISABLED; boot with psi=1)", ErrNoPSI, err)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %w", ErrNoPSI, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w (no write permission on the pressure file)", err)
	}
	return err
}

// OpenTriggers arms PSI triggers on a pressure file, one file descriptor per trigger,
// and delivers an [Event] (SignalSome or SignalFull, Share = stall/window) each time
// the kernel reports POLLPRI on one of them. Triggers are validated first
// ([Trigger.Validate]); a window that needs CAP_SYS_RESOURCE is opened through the
// user-namespace helper when cfg.UserNS is set, else refused.
//
// The source ends with an error when the pressure file goes away (POLLERR: the
// cgroup was removed), and with nil when ctx is cancelled.
func OpenTriggers(ctx context.Context, cfg TriggerConfig) (Source, error) {
	if len(cfg.Triggers) == 0 {
		return nil, errors.New("psi triggers: no trigger given")
	}
	path := cfg.Path
	if path == "" {
		path, _ = SelfPressurePath("memory")
	}
	priv, err := HasCapSysResource()
	if err != nil {
		return nil, fmt.Errorf("psi triggers on %s: %w", path, err)
	}
	s := &triggerSource{path: path, trigs: cfg.Triggers}
	closeAll := func() {
		for _, fd := range s.fds {
			unix.Close(fd)
		}
	}
	helped := false
	for _, t := range cfg.Triggers {
		verr := t.Validate(priv)
		var fd int
		switch {
		case verr == nil:
			fd, err = openTriggerFD(path, t)
		case errors.Is(verr, ErrNeedsPrivilege) && cfg.UserNS:
			if verr = t.Validate(true); verr != nil {
				closeAll()
				return nil, verr
			}
			fd, err = openTriggerInUserNS(ctx, path, t)
			helped = true
		default:
			closeAll()
			return nil, verr
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		s.fds = append(s.fds, fd)
	}
	strs := make([]string, len(cfg.Triggers))
	for i, t := range cfg.Triggers {
		strs[i] = fmt.Sprintf("%q", t.String())
	}
	s.desc = fmt.Sprintf("psi triggers %s on %s", strings.Join(strs, ", "), path)
	if helped {
		s.desc += " (short windows armed in a user namespace)"
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("psi triggers on %s: eventfd: %w", path, err)
	}
	s.wake = wake
	buf := cfg.Buffer
	if buf <= 0 {
		buf = 16
	}
	s.events = make(chan Event, buf)
	s.run(ctx)
	return s, nil
}

type triggerSource struct {
	path   string
	desc   string
	trigs  []Trigger
	fds    []int
	wake   int
	events chan Event
	err    error
}

func (s *triggerSource) Events() <-chan Event { return s.events }
func (s *triggerSource) Err() error           { return s.err }
func (s *triggerSource) Describe() string     { return s.desc }

// run starts the poll loop and a waker that interrupts poll when ctx is done.
func (s *triggerSource) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { wakeEventfd(s.wake) })
	go func() {
		s.err = s.loop(ctx)
		stop()
		for _, fd := range s.fds {
			unix.Close(fd)
		}
		unix.Close(s.wake)
		close(s.events)
	}()
}

func (s *triggerSource) loop(ctx context.Context) error {
	pfds := make([]unix.PollFd, len(s.fds)+1)
	for i, fd := range s.fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLPRI}
	}
	pfds[len(s.fds)] = unix.PollFd{Fd: int32(s.wake), Events: unix.POLLIN}
	for {
		if ctx.Err() != nil {
			return nil
		}
		for i := range pfds {
			pfds[i].Revents = 0
		}
		if _, err := unix.Poll(pfds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("poll psi triggers on %s: %w", s.path, err)
		}
		if pfds[len(s.fds)].Revents != 0 {
			return nil
		}
		now := time.Now()
		for i, t := range s.trigs {
			re := pfds[i].Revents
			if re&(unix.POLLERR|unix.POLLNVAL|unix.POLLHUP) != 0 {
				return fmt.Errorf("psi trigger %q on %s: poll revents %#x: the pressure file is gone (cgroup removed?)", t, s.path, re)
			}
			if re&unix.POLLPRI == 0 {
				continue
			}
			sig := SignalSome
			if t.Full {
				sig = SignalFull
			}
			ev := Event{Time: now, Source: "psi-trigger " + s.path, Signal: sig, Share: t.Share(), Window: t.Window, Count: 1}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// wakeEventfd adds 1 to an eventfd's counter, waking a poll on it.
func wakeEventfd(fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(fd, one[:])
}

var shortWindowCache sync.Map // path -> shortWindowResult

type shortWindowResult struct {
	ok     bool
	reason string
}
