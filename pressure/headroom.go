package pressure

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/bytesize"
)

// MemorySample is one reading of the memory a loader shares with the other processes
// of its memory cgroup.
type MemorySample struct {
	// At is when the sample was taken.
	At time.Time
	// Limit is the effective hard limit in bytes (MemTotal when Limited is false).
	Limit   int64
	Limited bool
	// Source names the file the limit came from.
	Source string
	// Unreclaimable is what the whole group holds that reclaim cannot take without
	// swap: anonymous, shared and unevictable memory (memory.stat anon + shmem +
	// unevictable on v2, total_rss + total_shmem + total_unevictable on v1;
	// MemTotal − MemAvailable without a limit). Unevictable pages include program
	// text that a process locked (the elastic runtime's own, when its pages were
	// first read in this group): they are counted among the others' memory, since
	// Self (below) has only anonymous and shared pages.
	Unreclaimable int64
	// Self is this process's own part of it: RssAnon + RssShmem of /proc/self/status.
	Self int64
	// Unevictable is the group's unevictable part of Unreclaimable (memory.stat
	// unevictable, v1 total_unevictable; 0 where unknown).
	Unevictable int64
	// SelfLocked is this process's own locked file pages, resident (the program
	// text it locked: [HeadroomConfig.SelfLocked]). Where the pages were first
	// read in this group they are among its Unevictable; where they were read
	// elsewhere they are charged there, which is why [MemorySample.OwnText] counts
	// at most Unevictable of them.
	SelfLocked int64
}

// Others returns the unreclaimable bytes of the group that this process's Self
// does not hold. They include its own locked text charged here ([MemorySample.OwnText]),
// which reclaim cannot take either: the allowances count it as taken.
func (s MemorySample) Others() int64 { return max(0, s.Unreclaimable-s.Self) }

// OwnText returns this process's locked text charged to the group: SelfLocked, at
// most the group's Unevictable.
func (s MemorySample) OwnText() int64 { return min(s.SelfLocked, s.Unevictable) }

// HeadroomConfig configures a [Headroom]. Floor and Max are required.
type HeadroomConfig struct {
	// Read takes a sample; nil reads the calling process's cgroup ([CgroupMemory]).
	Read func() (MemorySample, error)
	// SelfLocked, when set, returns this process's own locked and resident file
	// pages (its locked program text) for [MemorySample.SelfLocked] of every
	// sample [Headroom.Update] takes.
	SelfLocked func() int64
	// Floor is the loader's smallest working set that still makes progress (encoded
	// files of one batch, one batch of output tensors, decode scratch per worker).
	Floor int64
	// BudgetFloor is the part of Floor that is the graph's byte budget (bytes in
	// flight from read to decode); the rest of Floor is memory outside the budget.
	// The budget never goes below it. Default: Floor/2.
	BudgetFloor int64
	// Max is the largest budget (bytes in flight) the loader asks for.
	Max int64
	// Reserve is kept free for the others' bursts and the kernel: default
	// [DefaultReserve] of the sample's limit.
	Reserve int64
	// Lookahead projects the others' growth this far ahead (default 1s): a co-tenant
	// that grows at r bytes/s over two sampling intervals in a row is counted at
	// others + r × Lookahead (see [HeadroomReport.Projected]).
	Lookahead time.Duration
	// Interval is the time between samples in [Headroom.Run] (default 200ms, at
	// least 100ms).
	Interval time.Duration
	// PeakWindow is how long the others' highest reading counts as their recent
	// peak (default [DefaultPeakWindow]; negative: none). Only a rise above that
	// peak is growth that the projection carries ahead: a trainer's every step
	// takes back memory it held a moment ago, and returning there is not a ramp.
	PeakWindow time.Duration
}

// DefaultPeakWindow is [HeadroomConfig.PeakWindow] by default: several steps of a
// training loop (about 0.2 s each beside the trainer grid's trainer).
const DefaultPeakWindow = 2 * time.Second

// MaxDefaultReserve is the largest default reserve ([DefaultReserve]).
const MaxDefaultReserve = 64 << 20

// DefaultReserve is the reserve a headroom leaves free under a limit when
// [HeadroomConfig.Reserve] is 0: limit/16, at least 8 MiB and at most
// [MaxDefaultReserve] (8 MiB up to 128 MiB, 16 MiB at 256 MiB, 64 MiB from 1 GiB
// up). The reserve is what the others may take between two samples before the
// loader follows, and the kernel's own charges; neither grows with the limit
// without end: a trainer's step allocates its batch's activations (37 MiB in one
// 100 ms sample for 64 images of 224², whatever its ballast), and a 2 GiB group's
// kernel memory was 6–37 MiB. Uncapped, limit/16 kept 128 MiB free at 2 GiB,
// and beside a trainer at 85% that left the loader its floor only between the
// trainer's steps.
func DefaultReserve(limit int64) int64 {
	return min(max(8<<20, limit/16), MaxDefaultReserve)
}

func (c *HeadroomConfig) fill() {
	if c.BudgetFloor == 0 {
		c.BudgetFloor = c.Floor / 2
	}
	if c.Lookahead == 0 {
		c.Lookahead = time.Second
	}
	if c.Interval == 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.PeakWindow == 0 {
		c.PeakWindow = DefaultPeakWindow
	}
}

// Validate names the first field that cannot work (after defaults).
func (c HeadroomConfig) Validate() error {
	c.fill()
	switch {
	case c.Floor <= 0:
		return fmt.Errorf("headroom: floor %d bytes: must be positive", c.Floor)
	case c.BudgetFloor <= 0 || c.BudgetFloor > c.Floor:
		return fmt.Errorf("headroom: budget floor %d bytes: must be in (0, floor %d]", c.BudgetFloor, c.Floor)
	case c.Max < c.BudgetFloor:
		return fmt.Errorf("headroom: max budget %d bytes is below the budget floor %d", c.Max, c.BudgetFloor)
	case c.Reserve < 0:
		return fmt.Errorf("headroom: reserve %d bytes: must not be negative", c.Reserve)
	case c.Lookahead < 0:
		return fmt.Errorf("headroom: lookahead %s: must not be negative", c.Lookahead)
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("headroom: interval %s: must be at least 100ms", c.Interval)
	}
	return nil
}

// HeadroomReport is what one sample says about the loader's memory.
type HeadroomReport struct {
	MemorySample
	// Growth is the others' smoothed growth in bytes per second (negative: shrinking).
	Growth float64
	// Projected is the growth rate projected Lookahead ahead, in bytes per second:
	// 0 unless the others rose above their recent peak (the highest reading of
	// the last PeakWindow) over each of the last two sampling intervals, then the
	// least of Growth and those two rises' rates. A single interval's rise is not
	// projected: a trainer's step allocates its activations in one interval and
	// frees them in the next (+37 MiB and back within 100 ms at 2 GiB), and
	// projected a second ahead each step looked like a ramp to the limit and
	// paused the loader for nothing; nor is a return to a height the others held
	// within the window (a step whose allocations come in two intervals). A
	// co-tenant that ramps up is projected from its second interval on.
	Projected float64
	// Rise is the others' rise above their recent peak over the last sampling
	// interval, in bytes per second (0: they are at or below it): what a
	// decision that looks only a few tens of milliseconds ahead may project
	// (the paused loader's leave, which cannot be undone), where a return to
	// a height the others held a moment ago is a trainer's step, not a ramp.
	Rise float64
	// Allowance is what the loader may hold in all: limit − (others + Projected ×
	// Lookahead) − reserve. It can be negative.
	Allowance int64
	// Current is the allowance without the projected growth: limit − others −
	// reserve, what the loader may hold now. It can be negative.
	Current int64
	// Reserve is the reserve the allowances leave free.
	Reserve int64
	// Budget is the byte budget that follows: Allowance minus the floor's part outside
	// the budget, kept within [BudgetFloor, Max].
	Budget int64
	// BelowFloor reports that Allowance is smaller than Floor (once below, until it
	// is a quarter of Floor, at least 4 MiB, above it): the loader runs at its floor.
	BelowFloor bool
	// Changed reports that BelowFloor differs from the previous report (the first
	// report counts as changed only when it is below the floor).
	Changed bool
}

// Message is the one line to show when a report crosses the floor, or "".
func (r HeadroomReport) Message(floor int64) string {
	if !r.Changed {
		return ""
	}
	if r.BelowFloor {
		return fmt.Sprintf("the cgroup leaves the loader %s (limit %s, others hold %s), below its floor of %s: running at its floor",
			bytesize.Human(r.Allowance), bytesize.Human(r.Limit), bytesize.Human(r.Others()), bytesize.Human(floor))
	}
	return fmt.Sprintf("the cgroup leaves the loader %s again, above its floor of %s: budget back to %s",
		bytesize.Human(r.Allowance), bytesize.Human(floor), bytesize.Human(r.Budget))
}

// Headroom turns memory samples into a byte budget that follows what the others of
// the cgroup leave free. Safe for concurrent use.
type Headroom struct {
	cfg HeadroomConfig

	mu     sync.Mutex
	prev   MemorySample
	growth float64
	// rates are the others' rise above their recent peak over the last
	// interval and the one before it, in bytes per second (0: none).
	rates [2]float64
	// recent are the others' readings (own text left out) of the last
	// PeakWindow, oldest first: the base samples of the growth.
	recent []peakReading
	below  bool
	last   HeadroomReport
	seen   bool
}

// NewHeadroom checks cfg and returns a headroom without samples.
func NewHeadroom(cfg HeadroomConfig) (*Headroom, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	if cfg.Read == nil {
		tree, err := cgroup.DefaultTree()
		if err != nil {
			return nil, fmt.Errorf("headroom: %w", err)
		}
		if cfg.Read, err = CgroupMemory(tree, "/proc"); err != nil {
			return nil, err
		}
	}
	return &Headroom{cfg: cfg}, nil
}

// Config returns the configuration with defaults applied.
func (h *Headroom) Config() HeadroomConfig { return h.cfg }

// Last returns the latest report (zero before the first sample).
func (h *Headroom) Last() HeadroomReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Update takes a sample and returns its report.
func (h *Headroom) Update() (HeadroomReport, error) {
	s, err := h.cfg.Read()
	if err != nil {
		return HeadroomReport{}, fmt.Errorf("headroom: %w", err)
	}
	if h.cfg.SelfLocked != nil {
		s.SelfLocked = h.cfg.SelfLocked()
	}
	return h.Observe(s), nil
}

// Observe computes the report of sample s (taken after the previous one).
func (h *Headroom) Observe(s MemorySample) HeadroomReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	others := s.Others()
	base := !h.seen // s is the sample the next growth is measured from
	if h.seen {
		// Over less than half an interval a step of noise is a steep rate (the
		// first sample of a run comes a few milliseconds after New's, and 0.6 MiB
		// in 20 ms projected 13 MiB ahead and paused a loader that had room):
		// such a sample leaves the growth and its base as they are.
		if dt := s.At.Sub(h.prev.At); dt >= h.cfg.Interval/2 {
			// The growth is the other processes': the loader's own text, locked
			// as it runs, grows while it starts, and projected ahead it paused a
			// loader that had room.
			x := others - s.OwnText()
			rate := float64(x-(h.prev.Others()-h.prev.OwnText())) / dt.Seconds()
			h.growth = 0.5*h.growth + 0.5*rate // smooth one noisy step, follow a ramp
			// The rise above the recent peak (the previous reading at least):
			// what the others take that they did not hold a moment ago.
			rise := 0.0
			if peak := h.peakLocked(s.At); x > peak {
				rise = float64(x-peak) / dt.Seconds()
			}
			h.rates = [2]float64{rise, h.rates[0]}
			base = true
		}
	}
	if base {
		h.recent = append(h.recent, peakReading{s.At, others - s.OwnText()})
	}
	reserve := h.cfg.Reserve
	if reserve == 0 {
		reserve = DefaultReserve(s.Limit)
	}
	// Only a growth that lasted two intervals is projected (see Projected).
	rate := 0.0
	if h.rates[0] > 0 && h.rates[1] > 0 {
		rate = max(0, min(h.growth, h.rates[0], h.rates[1]))
	}
	projected := float64(others) + rate*h.cfg.Lookahead.Seconds()
	allowance := s.Limit - int64(math.Min(projected, math.MaxInt64/2)) - reserve
	outside := h.cfg.Floor - h.cfg.BudgetFloor
	budget := min(max(allowance-outside, h.cfg.BudgetFloor), h.cfg.Max)
	// Hysteresis: below the floor once under it; back above only with a margin of
	// a quarter of the floor (at least 4 MiB), so a co-tenant hovering at the line
	// is announced once, not at every sample.
	below := allowance < h.cfg.Floor
	if h.below && !below {
		below = allowance < h.cfg.Floor+max(h.cfg.Floor/4, 4<<20)
	}
	r := HeadroomReport{MemorySample: s, Growth: h.growth, Projected: rate, Rise: h.rates[0], Allowance: allowance, Budget: budget,
		Current: s.Limit - others - reserve, Reserve: reserve,
		BelowFloor: below, Changed: below != h.below}
	if base {
		h.prev = s
	}
	h.below, h.seen, h.last = below, true, r
	return r
}

// RecentPeak returns the others' highest reading within PeakWindow of the
// latest sample, counted as [MemorySample.Others] counts them (the latest
// sample's own locked text included), and false before the first sample or
// where PeakWindow is negative (no window).
func (h *Headroom) RecentPeak() (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.seen || h.cfg.PeakWindow < 0 {
		return 0, false
	}
	peak, ok := int64(0), false
	for _, r := range h.recent {
		if h.last.At.Sub(r.at) <= h.cfg.PeakWindow && (!ok || r.v > peak) {
			peak, ok = r.v, true
		}
	}
	if !ok {
		return 0, false
	}
	return peak + h.last.OwnText(), true
}

// peakReading is one reading of the others, their own locked text left out.
type peakReading struct {
	at time.Time
	v  int64
}

// peakLocked drops the readings older than PeakWindow before now and returns the
// highest left, the previous base sample's at least. Called with h.mu held.
func (h *Headroom) peakLocked(now time.Time) int64 {
	peak := h.prev.Others() - h.prev.OwnText()
	if h.cfg.PeakWindow < 0 {
		h.recent = h.recent[:0]
		return peak
	}
	i := 0
	for i < len(h.recent) && now.Sub(h.recent[i].at) > h.cfg.PeakWindow {
		i++
	}
	h.recent = append(h.recent[:0], h.recent[i:]...)
	for _, r := range h.recent {
		peak = max(peak, r.v)
	}
	return peak
}

// Run samples every Interval until ctx ends, calling apply with each report from
// this goroutine; it returns nil when ctx ends. A failing sample is passed to
// onErr (when set) and skipped: a missing file for one sample must not stop a loader.
func (h *Headroom) Run(ctx context.Context, apply func(HeadroomReport), onErr func(error)) error {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		if r, err := h.Update(); err != nil {
			if onErr != nil {
				onErr(err)
			}
		} else {
			apply(r)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CgroupMemory returns a reader of the memory the calling process shares, in tree:
// the group among its memory cgroup and ancestors with the smallest hard limit is
// found once; each call reads that group's limit and memory.stat and proc's
// self/status. proc is the /proc mount ("/proc" unless testing).
func CgroupMemory(tree *cgroup.Tree, proc string) (func() (MemorySample, error), error) {
	lim, err := tree.SelfLimitingGroup()
	if err != nil {
		return nil, fmt.Errorf("headroom: %w", err)
	}
	best, v2 := lim.Dir, lim.V2
	status := filepath.Join(proc, "self", "status")
	meminfo := filepath.Join(proc, "meminfo")
	return func() (MemorySample, error) {
		s := MemorySample{At: time.Now()}
		var err error
		if s.Self, err = readStatusRss(status); err != nil {
			return s, err
		}
		if best == "" {
			total, avail, err := readMeminfo(meminfo)
			if err != nil {
				return s, err
			}
			s.Limit, s.Source, s.Unreclaimable = total, meminfo+" MemTotal", total-avail
			return s, nil
		}
		p := lim.File
		v, limited, err := cgroup.ReadLimit(p)
		if err != nil {
			return s, err
		}
		if !limited { // the limit was lifted since: MemTotal bounds it
			total, _, err := readMeminfo(meminfo)
			if err != nil {
				return s, err
			}
			v = total
		}
		s.Limit, s.Limited, s.Source = v, limited, p
		st, err := cgroup.ReadMemoryStat(filepath.Join(best, "memory.stat"), v2)
		if err != nil {
			return s, err
		}
		s.Unreclaimable = st.Unreclaimable()
		if v, ok := st.Get("unevictable"); ok {
			s.Unevictable = int64(min(v, uint64(s.Unreclaimable)))
		}
		return s, nil
	}, nil
}

// readStatusRss returns RssAnon + RssShmem of a /proc/<pid>/status file, in bytes.
func readStatusRss(path string) (int64, error) {
	b, err := cgroup.ReadProcSizes(path, "RssAnon:", "RssShmem:")
	if err != nil {
		return 0, err
	}
	return b[0] + b[1], nil
}

// readMeminfo returns MemTotal and MemAvailable of /proc/meminfo, in bytes.
func readMeminfo(path string) (total, avail int64, err error) {
	b, err := cgroup.ReadProcSizes(path, "MemTotal:", "MemAvailable:")
	if err != nil {
		return 0, 0, err
	}
	return b[0], b[1], nil
}
