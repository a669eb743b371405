package uma

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/psiflow/psiflow/internal/addrspace"
	"github.com/psiflow/psiflow/internal/bytesize"
)

// Budget is a byte budget that byte leases count against: bytes are acquired
// before they are allocated or leased and released when the last reference to
// the lease is released. flow.Budget satisfies it.
type Budget interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// Releaser is what a graph calls when an element is consumed, dropped or
// discarded on cancel. Every lease type implements it (stage.Releaser).
type Releaser interface {
	Release()
}

// RehydrateFunc re-reads the bytes of chunk id into dst (len(dst) is the
// chunk's length) from the chunk's source. It must fill all of dst.
type RehydrateFunc func(ctx context.Context, id ChunkID, dst []byte) error

// Errors that callers may test for with errors.Is.
var (
	// ErrClosed: the UMA or arena was closed.
	ErrClosed = errors.New("uma: closed")
	// ErrNoRehydrate: a chunk's bytes are gone and it has no re-hydrate function.
	ErrNoRehydrate = errors.New("uma: bytes were reclaimed and the chunk has no re-hydrate function")
	// ErrStableBudget: a stable lease does not fit in the stable tier.
	ErrStableBudget = errors.New("uma: stable tier budget exceeded")
	// ErrDoesNotFit: start-up validation failed (stable tier larger than the memory available).
	ErrDoesNotFit = errors.New("uma: stable bytes do not fit in memory")
	// ErrLeased: an operation needs a chunk without leases (close, write during a transfer).
	ErrLeased = errors.New("uma: outstanding leases")
)

// Config configures a [UMA]. The zero value is usable on Linux: host-chosen
// chunk size, no stable tier, preemption enabled, slog.Default, no metrics.
type Config struct {
	// ChunkSize is the default chunk size of arenas, a multiple of the page
	// size. Zero picks one from the host's memory (see [DefaultChunkSize]).
	ChunkSize int64
	// StableBytes is the stable tier: the most bytes that stable leases may hold
	// at once. Zero means no stable tier (every stable lease is refused).
	StableBytes int64
	// PinnedPoolBytes is the sum of the pinned pools outside UMA (io_uring
	// registered buffers, pinned staging for the GPU). Start-up validation checks
	// StableBytes <= memory limit - PinnedPoolBytes.
	PinnedPoolBytes int64
	// DisablePreemptible is the enable_preemptible switch, inverted so that the
	// zero value enables preemption. While disabled MarkPreemptible marks
	// nothing and every post-GPU-load policy acts as Keep. See SetPreemptible.
	DisablePreemptible bool
	// MaxFaultsPerSecond throttles preemption against thrashing: while the
	// mean fault rate over the last minute is at or above it, MarkPreemptible
	// marks nothing (MarkResult.Throttled). Zero: no throttle.
	MaxFaultsPerSecond float64
	// MemoryLimit returns the memory available to this process and where the
	// figure came from: start-up validation and the default chunk size use it.
	// Pass memory.SelfMemoryLimit for the process's cgroup limit (the smallest
	// of its cgroup and ancestors) capped at what RLIMIT_AS leaves; psiflow's
	// pipelines do. Nil uses the host's physical memory (sysinfo totalram) capped
	// at what RLIMIT_AS leaves, and its source says so: UMA does not read
	// cgroups.
	MemoryLimit func() (bytes int64, source string, err error)
	// Logger receives the few warnings UMA emits (mlock disabled, MADV_FREE
	// unavailable). Nil uses slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives the psiflow_uma_* metrics. Close
	// unregisters them.
	Registerer prometheus.Registerer

	// kernel replaces the system calls (tests only).
	kernel kernel
}

// DefaultChunkSize picks a chunk size for a host with memBytes of memory:
// memBytes/4096 rounded down to a power of two, between 2 MiB (one huge
// page) and 64 MiB. 24 GiB gives 4 MiB.
func DefaultChunkSize(memBytes int64) int64 {
	const lo, hi = 2 << 20, 64 << 20
	c := int64(lo)
	for c*2 <= memBytes/4096 && c*2 <= hi {
		c *= 2
	}
	return c
}

// UMA is the Unified Memory Authority: the one ledger of every arena's chunks,
// their leases and their preemption. It is safe for concurrent use by many
// pipelines.
type UMA struct {
	cfg   Config
	k     kernel
	log   *slog.Logger
	start time.Time
	page  int

	memLimit       int64
	memLimitSource string

	mu      sync.Mutex
	closed  bool
	arenas  map[string]*Arena
	order   []*Arena
	version uint64
	// stableUsed is the bytes of chunks with stable leases (plus reservations in progress).
	stableUsed int64
	leases     leaseCounts

	preemptible atomic.Bool
	mlockOff    atomic.Bool
	freeOff     atomic.Bool
	mlockOnce   sync.Once
	freeOnce    sync.Once

	faults       atomic.Int64
	rehydrations atomic.Int64
	rate         faultRate
	metrics      *metrics
	clock        func() int64 // tests only
}

type leaseCounts struct {
	bytes, pins, stables, transfers, registrations int
}

// New validates cfg and returns a UMA. Validation: StableBytes must fit in the
// memory limit (cgroup limit or MemTotal) minus PinnedPoolBytes; the error
// shows all three numbers and where the limit came from.
func New(cfg Config) (*UMA, error) {
	if !supported {
		return nil, errUnsupported
	}
	u := &UMA{cfg: cfg, k: cfg.kernel, log: cfg.Logger, start: time.Now(), arenas: map[string]*Arena{}}
	if u.k == nil {
		u.k = defaultKernel()
	}
	if u.log == nil {
		u.log = slog.Default()
	}
	u.page = u.k.pageSize()
	limitFn := cfg.MemoryLimit
	if limitFn == nil {
		limitFn = func() (int64, string, error) {
			total, err := hostMemory()
			if err != nil {
				return 0, "", err
			}
			return addrspace.CapMemoryLimit(total, "sysinfo totalram (Config.MemoryLimit unset)")
		}
	}
	limit, src, err := limitFn()
	if err != nil {
		return nil, fmt.Errorf("uma: reading the memory limit for start-up validation: %w", err)
	}
	u.memLimit, u.memLimitSource = limit, src
	if err := validateStable(cfg.StableBytes, cfg.PinnedPoolBytes, limit, src); err != nil {
		return nil, err
	}
	if u.cfg.ChunkSize == 0 {
		u.cfg.ChunkSize = DefaultChunkSize(limit)
	}
	if u.cfg.ChunkSize <= 0 || u.cfg.ChunkSize%int64(u.page) != 0 {
		return nil, fmt.Errorf("uma: chunk size %d is not a positive multiple of the page size %d", u.cfg.ChunkSize, u.page)
	}
	u.preemptible.Store(!cfg.DisablePreemptible)
	if cfg.Registerer != nil {
		m, err := newMetrics(u, cfg.Registerer)
		if err != nil {
			return nil, err
		}
		u.metrics = m
	}
	return u, nil
}

// validateStable is the start-up check of TensorCast's stable tier:
// stable bytes must fit in (limit - pinned pools).
func validateStable(stable, pinned, limit int64, source string) error {
	if stable < 0 || pinned < 0 {
		return fmt.Errorf("uma: stable bytes %d and pinned pool bytes %d must not be negative", stable, pinned)
	}
	avail := limit - pinned
	if stable > avail {
		return fmt.Errorf("%w: stable bytes %d (%s) > memory limit %d (%s, from %s) - pinned pools %d (%s) = %d (%s)",
			ErrDoesNotFit, stable, bytesize.Human(stable), limit, bytesize.Human(limit), source, pinned, bytesize.Human(pinned), avail, bytesize.Human(avail))
	}
	return nil
}

// ChunkSize is the default chunk size of this UMA's arenas.
func (u *UMA) ChunkSize() int64 { return u.cfg.ChunkSize }

// MemoryLimit is the limit start-up validation used and where it came from.
func (u *UMA) MemoryLimit() (bytes int64, source string) { return u.memLimit, u.memLimitSource }

// SetPreemptible flips the enable_preemptible switch at run time.
func (u *UMA) SetPreemptible(on bool) { u.preemptible.Store(on) }

// Preemptible reports the enable_preemptible switch.
func (u *UMA) Preemptible() bool { return u.preemptible.Load() }

// MlockEnabled reports whether pin leases still call mlock (false after
// mlock failed with EPERM or ENOMEM once).
func (u *UMA) MlockEnabled() bool { return !u.mlockOff.Load() }

// Faults is the number of PREEMPTIBLE chunks found reclaimed on re-acquire.
func (u *UMA) Faults() int64 { return u.faults.Load() }

// Rehydrations is the number of chunks re-read through their re-hydrate
// function (reclaimed PREEMPTIBLE chunks plus EVICTED ones).
func (u *UMA) Rehydrations() int64 { return u.rehydrations.Load() }

// now is the ledger clock: monotonic nanoseconds since New (tests may
// replace it with a counter).
func (u *UMA) now() int64 {
	if u.clock != nil {
		return u.clock()
	}
	return int64(time.Since(u.start))
}

// bump increments the ledger version. Called with mu held.
func (u *UMA) bump() { u.version++ }

// Leases counts outstanding leases by kind.
type Leases struct {
	Bytes, Pins, Stables, Transfers int
}

// Total is the sum of all kinds.
func (l Leases) Total() int { return l.Bytes + l.Pins + l.Stables + l.Transfers }

// Outstanding returns the leases not yet released, over all arenas.
func (u *UMA) Outstanding() Leases {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Leases{u.leases.bytes, u.leases.pins, u.leases.stables, u.leases.transfers}
}

// Registrations returns the number of device registrations ([Arena.Register])
// not yet released, over all arenas. [UMA.CheckNoLeases] counts them too.
func (u *UMA) Registrations() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.leases.registrations
}

// CheckNoLeases returns an error naming every arena that still holds leases:
// a pipeline that ended, failed or was cancelled must leave none.
func (u *UMA) CheckNoLeases() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for _, a := range u.order {
		if err := a.leasedLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Shed frees memory now, for a pressure gate at its Critical level: it trims
// the free chunks of every pool and evicts PREEMPTIBLE chunks (tail first)
// until at least want bytes were released or nothing is left. It returns the
// bytes released.
func (u *UMA) Shed(want int64) (int64, error) {
	u.mu.Lock()
	arenas := append([]*Arena(nil), u.order...)
	u.mu.Unlock()
	var freed int64
	var errs []error
	for _, a := range arenas {
		if freed >= want {
			break
		}
		if a.pool != nil {
			n, err := a.pool.Trim()
			freed += n
			errs = append(errs, err)
		}
	}
	for _, a := range arenas {
		if freed >= want || a.pool != nil {
			continue
		}
		n, err := a.evict(want-freed, true)
		freed += n
		errs = append(errs, err)
	}
	return freed, errors.Join(errs...)
}

// Close closes every arena and unregisters the metrics. It fails, closing
// nothing, while any lease is outstanding.
func (u *UMA) Close() error {
	if err := u.CheckNoLeases(); err != nil {
		return fmt.Errorf("uma: close: %w", err)
	}
	u.mu.Lock()
	arenas := append([]*Arena(nil), u.order...)
	u.closed = true
	u.mu.Unlock()
	var errs []error
	for _, a := range arenas {
		errs = append(errs, a.Close())
	}
	if u.metrics != nil {
		u.metrics.unregister()
	}
	return errors.Join(errs...)
}

// ChunkRecord is one chunk's ledger entry in a [Snapshot].
type ChunkRecord struct {
	ID      ChunkID
	State   State
	Version uint64
	// LastAccess is the ledger clock (time since the UMA started) of the last
	// write, lease or recorded touch.
	LastAccess time.Duration
	Bytes      int64
	// Refs counts byte leases (and pool allocations) on the chunk.
	Refs int
	// Pins counts pin leases; Mlocked says whether the pages are mlocked.
	Pins    int
	Mlocked bool
	Stables int
	// Registered counts device registrations covering the chunk.
	Registered int
}

// ArenaSnapshot is one arena in a [Snapshot].
type ArenaSnapshot struct {
	Name      string
	Pool      bool
	ChunkSize int64
	Size      int64
	Chunks    []ChunkRecord
}

// Snapshot is a consistent copy of the ledger for telemetry and tests.
type Snapshot struct {
	// Version is the monotonic ledger version.
	Version uint64
	Arenas  []ArenaSnapshot
	// States counts chunks per state over all arenas.
	States map[State]int
	// StableTotal and StableUsed are the stable tier and its use in bytes.
	StableTotal, StableUsed int64
	// PreemptibleTotal is the bytes of artifact chunks not under a stable lease;
	// PreemptibleMarked those in state PREEMPTIBLE.
	PreemptibleTotal, PreemptibleMarked int64
	Leases                              Leases
	// Registrations counts device registrations ([Arena.Register]).
	Registrations        int
	Faults, Rehydrations int64
}

// Snapshot copies the ledger.
func (u *UMA) Snapshot() Snapshot {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := Snapshot{
		Version:       u.version,
		States:        map[State]int{},
		StableTotal:   u.cfg.StableBytes,
		StableUsed:    u.stableUsed,
		Leases:        Leases{u.leases.bytes, u.leases.pins, u.leases.stables, u.leases.transfers},
		Registrations: u.leases.registrations,
		Faults:        u.faults.Load(), Rehydrations: u.rehydrations.Load(),
	}
	for _, a := range u.order {
		as := ArenaSnapshot{Name: a.name, Pool: a.pool != nil, ChunkSize: a.chunkSize, Size: a.size, Chunks: make([]ChunkRecord, len(a.chunks))}
		for i := range a.chunks {
			c := &a.chunks[i]
			n := a.chunkLen(i)
			as.Chunks[i] = ChunkRecord{
				ID: ChunkID{a.name, i}, State: c.state, Version: c.version, LastAccess: time.Duration(c.lastAccess),
				Bytes: n, Refs: int(c.refs), Pins: int(c.pins), Mlocked: c.mlocked, Stables: int(c.stables), Registered: int(c.regs),
			}
			s.States[c.state]++
			if a.pool == nil && c.stables == 0 {
				s.PreemptibleTotal += n
			}
			if c.state == Preemptible {
				s.PreemptibleMarked += n
			}
		}
		s.Arenas = append(s.Arenas, as)
	}
	sort.Slice(s.Arenas, func(i, j int) bool { return s.Arenas[i].Name < s.Arenas[j].Name })
	return s
}
