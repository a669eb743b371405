package harness

import (
	"path/filepath"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/pressure"
)

// memSampler samples a group's memory.current at a fixed interval until stopped.
type memSampler struct {
	stop     chan struct{}
	done     chan struct{}
	peak     int64
	timeline []Point
}

// startSampler samples g every interval, with times since start.
func startSampler(g *cgroup.Group, interval time.Duration, start time.Time) *memSampler {
	s := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if v, err := g.MemoryCurrent(); err == nil {
				s.peak = max(s.peak, v)
				s.timeline = append(s.timeline, Point{T: time.Since(start).Seconds(), Bytes: v})
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the largest sample and every sample.
func (s *memSampler) finish() (peak int64, timeline []Point) {
	close(s.stop)
	<-s.done
	return s.peak, s.timeline
}

// psiWindow reads a group's memory.pressure totals at the start and at the end of a
// run.
type psiWindow struct {
	path  string // "" where the group has none
	start pressure.PSI
	err   string // why there are no totals
}

// openPSI reads g's memory.pressure totals now.
func openPSI(g *cgroup.Group) psiWindow {
	d := g.V2Dir()
	if d == "" {
		return psiWindow{err: "the group has no cgroup2 directory, so no memory.pressure"}
	}
	w := psiWindow{path: filepath.Join(d, "memory.pressure")}
	var err error
	if w.start, err = pressure.ReadPSI(w.path); err != nil {
		return psiWindow{err: err.Error()}
	}
	return w
}

// end reads the totals again; the stall over wall goes in res.
type psiEnd struct {
	psi pressure.PSI
	err error
}

func (w psiWindow) end() psiEnd {
	if w.path == "" {
		return psiEnd{}
	}
	p, err := pressure.ReadPSI(w.path)
	return psiEnd{psi: p, err: err}
}

// fill puts the stall between the start and e, over wall, in res.
func (w psiWindow) fill(e psiEnd, wall time.Duration, res *Result) {
	switch {
	case w.path == "":
		res.PSIError = w.err
	case e.err != nil:
		res.PSIError = e.err.Error()
	default:
		t := psiDelta(w.start, e.psi, wall, w.path)
		res.PSI = &t
	}
}

// filePeak reads the kernel's peak usage counter of the group: v1
// memory.max_usage_in_bytes, else v2 memory.peak (Linux 5.19+). It returns 0 and "" where
// neither exists.
func filePeak(g *cgroup.Group) (int64, string) {
	var paths []string
	if d, err := g.V1Dir("memory"); err == nil {
		paths = append(paths, filepath.Join(d, "memory.max_usage_in_bytes"))
	}
	if d := g.V2Dir(); d != "" {
		paths = append(paths, filepath.Join(d, "memory.peak"))
	}
	for _, p := range paths {
		if v, err := cgroup.ReadInt(p); err == nil {
			return v, filepath.Base(p)
		}
	}
	return 0, ""
}
