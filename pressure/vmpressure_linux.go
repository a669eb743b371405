//go:build linux

package pressure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"golang.org/x/sys/unix"
)

// SelfMemoryV1Dir returns the calling process's cgroup directory in the v1 memory
// hierarchy ([cgroup.Self]'s [cgroup.Group.V1Dir]). It fails on a pure cgroup v2
// host.
func SelfMemoryV1Dir() (string, error) {
	g, err := cgroup.Self()
	if err != nil {
		return "", err
	}
	return g.V1Dir("memory")
}

// OpenVMPressure listens to cgroup v1 memory pressure levels: for each level an
// eventfd is registered by writing "<eventfd> <fd of memory.pressure_level> <level>[,mode]"
// to the group's cgroup.event_control. Each notification becomes an [Event]
// (SignalVMLow, SignalVMMedium or SignalVMCritical) whose Count is the eventfd
// counter. The source ends with nil when ctx is cancelled and with an error when the
// cgroup is removed.
func OpenVMPressure(ctx context.Context, cfg VMPressureConfig) (Source, error) {
	dir := cfg.Dir
	if dir == "" {
		d, err := SelfMemoryV1Dir()
		if err != nil {
			return nil, fmt.Errorf("vmpressure: %w", err)
		}
		dir = d
	}
	levels := cfg.Levels
	if len(levels) == 0 {
		levels = []Signal{SignalVMMedium, SignalVMCritical}
	}
	switch cfg.Mode {
	case "", "local", "hierarchy":
	default:
		return nil, fmt.Errorf("vmpressure on %s: mode %q is not \"\", \"local\" or \"hierarchy\"", dir, cfg.Mode)
	}
	levelPath := filepath.Join(dir, "memory.pressure_level")
	ctlPath := filepath.Join(dir, "cgroup.event_control")
	s := &vmSource{dir: dir, levels: levels, minInterval: cfg.MinInterval}
	if s.minInterval <= 0 {
		s.minInterval = 100 * time.Millisecond
	}
	cleanup := func() {
		for _, fd := range s.efds {
			unix.Close(fd)
		}
		if s.levelFD > 0 {
			unix.Close(s.levelFD)
		}
	}
	lfd, err := unix.Open(levelPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("vmpressure: open %s: %w", levelPath, err)
	}
	s.levelFD = lfd
	names := make([]string, len(levels))
	for i, l := range levels {
		name := vmLevelName(l)
		if name == "" {
			cleanup()
			return nil, fmt.Errorf("vmpressure on %s: %v is not a vmpressure level", dir, l)
		}
		names[i] = name
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("vmpressure on %s: eventfd: %w", dir, err)
		}
		s.efds = append(s.efds, efd)
		arg := name
		if cfg.Mode != "" {
			arg += "," + cfg.Mode
		}
		line := fmt.Sprintf("%d %d %s", efd, lfd, arg)
		if err := os.WriteFile(ctlPath, []byte(line), 0); err != nil {
			cleanup()
			return nil, fmt.Errorf("vmpressure: register %q in %s: %w", line, ctlPath, err)
		}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("vmpressure on %s: eventfd: %w", dir, err)
	}
	s.wake = wake
	s.desc = fmt.Sprintf("cgroup v1 vmpressure %s on %s", strings.Join(names, ","), dir)
	buf := cfg.Buffer
	if buf <= 0 {
		buf = 16
	}
	s.events = make(chan Event, buf)
	stop := context.AfterFunc(ctx, func() { wakeEventfd(s.wake) })
	go func() {
		s.err = s.loop(ctx)
		stop()
		cleanup()
		unix.Close(s.wake)
		close(s.events)
	}()
	return s, nil
}

type vmSource struct {
	dir         string
	desc        string
	levels      []Signal
	efds        []int
	levelFD     int
	wake        int
	minInterval time.Duration
	events      chan Event
	err         error
}

func (s *vmSource) Events() <-chan Event { return s.events }
func (s *vmSource) Err() error           { return s.err }
func (s *vmSource) Describe() string     { return s.desc }

func (s *vmSource) loop(ctx context.Context) error {
	pfds := make([]unix.PollFd, len(s.efds)+1)
	last := make([]time.Time, len(s.efds))
	for {
		if ctx.Err() != nil {
			return nil
		}
		// Only levels whose MinInterval has passed are polled; the others keep counting.
		now := time.Now()
		timeout := -1
		n := 0
		idx := make([]int, 0, len(s.efds))
		for i, fd := range s.efds {
			if wait := last[i].Add(s.minInterval).Sub(now); wait > 0 {
				ms := int(wait/time.Millisecond) + 1
				if timeout < 0 || ms < timeout {
					timeout = ms
				}
				continue
			}
			pfds[n] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
			idx = append(idx, i)
			n++
		}
		pfds[n] = unix.PollFd{Fd: int32(s.wake), Events: unix.POLLIN}
		if _, err := unix.Poll(pfds[:n+1], timeout); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("poll vmpressure eventfds of %s: %w", s.dir, err)
		}
		if pfds[n].Revents != 0 {
			return nil
		}
		for k, i := range idx {
			if pfds[k].Revents&unix.POLLIN == 0 {
				continue
			}
			var b [8]byte
			if _, err := unix.Read(s.efds[i], b[:]); err != nil {
				if errors.Is(err, unix.EAGAIN) {
					continue
				}
				return fmt.Errorf("read vmpressure eventfd of %s: %w", s.dir, err)
			}
			// The kernel also signals the eventfd when the cgroup is removed.
			if _, err := os.Stat(filepath.Join(s.dir, "memory.pressure_level")); err != nil {
				return fmt.Errorf("vmpressure on %s: cgroup gone: %w", s.dir, err)
			}
			t := time.Now()
			last[i] = t
			ev := Event{Time: t, Source: "vmpressure " + s.dir, Signal: s.levels[i], Count: binary.NativeEndian.Uint64(b[:])}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
