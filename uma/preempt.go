package uma

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// MarkResult says what MarkPreemptible did.
type MarkResult struct {
	// Marked chunks are now PREEMPTIBLE (MADV_FREE); Bytes is their size.
	Marked int
	Bytes  int64
	// Evicted chunks went through the MADV_DONTNEED fallback (MADV_FREE
	// unavailable): their bytes are gone at once and they are EVICTED.
	Evicted int
	// Skipped counts chunks not eligible: leased, pinned, stable, LOCKED_TX,
	// EVICTED, registered with a device, or busy.
	Skipped int
	// Registered counts chunks skipped because a device registration covers
	// them (see [Registration]); they are also in Skipped.
	Registered int
	// NoSource counts chunks skipped because they have no re-hydrate function
	// (see ArenaOptions.PreemptWithoutSource); they are also in Skipped.
	NoSource int
	// Disabled is true when enable_preemptible is off: nothing was marked.
	Disabled bool
	// Throttled is true when the fault rate reached Config.MaxFaultsPerSecond:
	// nothing was marked, since re-hydration is already churning.
	Throttled bool
}

// eligibleLocked says whether chunk i may be preempted or evicted now.
func (a *Arena) eligibleLocked(i int, states ...State) bool {
	c := &a.chunks[i]
	if c.busy != nil || c.refs > 0 || c.pins > 0 || c.stables > 0 || c.txs > 0 || c.regs > 0 {
		return false
	}
	for _, s := range states {
		if c.state == s {
			return true
		}
	}
	return false
}

// MarkPreemptible makes floor(ratio × chunks) of the arena's chunks
// PREEMPTIBLE, counting those already PREEMPTIBLE, coldest first (by last
// access; ties by index). Chunks with byte leases, pins or stable leases,
// LOCKED_TX or EVICTED chunks, and chunks without a re-hydrate function
// (unless ArenaOptions.PreemptWithoutSource) are skipped. For each chosen chunk it records
// an xxh3 checksum of the bytes and then calls madvise(MADV_FREE); where the
// kernel refuses MADV_FREE (EINVAL) it falls back to MADV_DONTNEED, logged
// once, and the chunk is EVICTED instead. With enable_preemptible off it
// marks nothing.
func (a *Arena) MarkPreemptible(ctx context.Context, ratio float64) (MarkResult, error) {
	var res MarkResult
	if a.pool != nil {
		return res, fmt.Errorf("uma: mark preemptible on pool %q: pool memory has no source to re-hydrate from (use Trim)", a.name)
	}
	if ratio < 0 || ratio > 1 || math.IsNaN(ratio) {
		return res, fmt.Errorf("uma: mark preemptible on arena %q: ratio %v outside [0,1]", a.name, ratio)
	}
	if ok, err := a.beginMark(&res); !ok {
		return res, err
	}
	u := a.u
	target := int(math.Floor(ratio * float64(len(a.chunks))))
	var cand []int
	for i := range a.chunks {
		switch {
		case a.chunks[i].state == Preemptible:
			target--
		case a.eligibleLocked(i, Hot, Cold, CopiedGPU) && !a.sourcedLocked(i):
			res.NoSource++
			res.Skipped++
		case a.eligibleLocked(i, Hot, Cold, CopiedGPU):
			cand = append(cand, i)
		default:
			res.Skipped++
			if a.chunks[i].regs > 0 {
				res.Registered++
			}
		}
	}
	sort.SliceStable(cand, func(x, y int) bool {
		return a.chunks[cand[x]].lastAccess < a.chunks[cand[y]].lastAccess
	})
	if target < 0 {
		target = 0
	}
	if len(cand) > target {
		cand = cand[:target]
	}
	for _, i := range cand {
		a.chunks[i].busy = make(chan struct{})
	}
	u.mu.Unlock()
	return a.markChunks(ctx, cand, res)
}

// beginMark is the start both markings share: it reports in res a marking that
// enable_preemptible is off or the fault rate forbids, and otherwise returns true
// with u.mu held and the arena open.
func (a *Arena) beginMark(res *MarkResult) (bool, error) {
	if !a.u.preemptible.Load() {
		res.Disabled = true
		return false, nil
	}
	u := a.u
	if lim := u.cfg.MaxFaultsPerSecond; lim > 0 && u.rate.perSecond(u.now()) >= lim {
		res.Throttled = true
		return false, nil
	}
	u.mu.Lock()
	if err := a.checkOpenLocked("mark preemptible"); err != nil {
		u.mu.Unlock()
		return false, err
	}
	return true, nil
}

// markChunks checksums and lazily frees the chunks in cand, which the caller
// has claimed (busy) and left u.mu unlocked; it records the new states, adds
// to res and unclaims the chunks.
func (a *Arena) markChunks(ctx context.Context, cand []int, res MarkResult) (MarkResult, error) {
	u := a.u
	type out struct {
		sum     uint64
		evicted bool
		err     error
	}
	outs := make([]out, len(cand))
	for k, i := range cand {
		if err := ctx.Err(); err != nil {
			outs[k].err = fmt.Errorf("uma: mark preemptible chunk %s: %w", a.id(i), err)
			continue
		}
		b := a.span(i)
		outs[k].sum = xxh3.Hash(b)
		outs[k].evicted, outs[k].err = a.u.lazyFree(b)
		if outs[k].err != nil {
			outs[k].err = fmt.Errorf("uma: mark preemptible chunk %s: %w", a.id(i), outs[k].err)
		}
	}

	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for k, i := range cand {
		c := &a.chunks[i]
		o := outs[k]
		switch {
		case o.err != nil:
			errs = append(errs, o.err)
		case o.evicted:
			if err := a.setLocked(i, Evicted, "mark preemptible"); err != nil {
				errs = append(errs, err)
				break
			}
			c.sum, c.hasSum = o.sum, true
			res.Evicted++
		default:
			if err := a.setLocked(i, Preemptible, "mark preemptible"); err != nil {
				errs = append(errs, err)
				break
			}
			c.sum, c.hasSum = o.sum, true
			res.Marked++
			res.Bytes += a.chunkLen(i)
		}
	}
	a.unclaimLocked2(cand)
	return res, errors.Join(errs...)
}

func (a *Arena) unclaimLocked2(idx []int) {
	for _, i := range idx {
		a.unclaimLocked(i, i)
	}
}

// lazyFree is madvise(MADV_FREE) with the MADV_DONTNEED fallback. evicted
// reports that the fallback ran (the bytes are gone).
func (u *UMA) lazyFree(b []byte) (evicted bool, err error) {
	if !u.freeOff.Load() {
		err := u.k.madvise(b, adviseFree)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return false, err
		}
		u.freeOff.Store(true)
		u.freeOnce.Do(func() {
			u.log.Warn("uma: MADV_FREE refused; preemption falls back to MADV_DONTNEED (bytes are dropped at once and re-hydrated on use)", "err", err)
		})
	}
	if err := u.k.madvise(b, adviseDontNeed); err != nil {
		return false, err
	}
	return true, nil
}

// EvictTail drops the host copy of up to want bytes, last chunk first:
// madvise(MADV_DONTNEED) on HOT, COLD, COPIED_GPU and PREEMPTIBLE chunks
// without leases that have a re-hydrate function (or whose arena sets
// PreemptWithoutSource); they become EVICTED (re-hydrated on next use). It returns
// the bytes evicted. (MADV_PAGEOUT does nothing to private anonymous memory
// without swap, so eviction uses MADV_DONTNEED.)
func (a *Arena) EvictTail(want int64) (int64, error) {
	if a.pool != nil {
		return 0, fmt.Errorf("uma: evict on pool %q: use Trim", a.name)
	}
	return a.evict(want, false)
}

// EvictPreemptible drops every PREEMPTIBLE chunk of the arena at once
// (MADV_DONTNEED, last chunk first): they become EVICTED, and their pages leave
// the cgroup's usage now rather than when reclaim takes them. Chunks in other
// states are left alone. It is what a shed action calls for an arena whose
// PREEMPTIBLE chunks are idle (a staging ring's slots after their copy). It
// returns the bytes evicted.
func (a *Arena) EvictPreemptible() (int64, error) {
	if a.pool != nil {
		return 0, fmt.Errorf("uma: evict on pool %q: use Trim", a.name)
	}
	return a.evict(a.size, true)
}

// evict drops up to want bytes from the tail; onlyPreemptible restricts it
// to PREEMPTIBLE chunks (shedding under pressure).
func (a *Arena) evict(want int64, onlyPreemptible bool) (int64, error) {
	u := a.u
	states := []State{Hot, Cold, CopiedGPU, Preemptible}
	if onlyPreemptible {
		states = []State{Preemptible}
	}
	u.mu.Lock()
	if err := a.checkOpenLocked("evict"); err != nil {
		u.mu.Unlock()
		return 0, err
	}
	var cand []int
	var sum int64
	for i := len(a.chunks) - 1; i >= 0 && sum < want; i-- {
		if a.eligibleLocked(i, states...) && a.sourcedLocked(i) {
			cand = append(cand, i)
			sum += a.chunkLen(i)
			a.chunks[i].busy = make(chan struct{})
		}
	}
	u.mu.Unlock()
	return a.evictChunks(cand)
}

// evictChunks drops the chunks in cand, which the caller has claimed (busy) and
// left u.mu unlocked, with MADV_DONTNEED; they become EVICTED and are unclaimed.
func (a *Arena) evictChunks(cand []int) (int64, error) {
	u := a.u
	errs := make([]error, len(cand))
	for k, i := range cand {
		if err := u.k.madvise(a.span(i), adviseDontNeed); err != nil {
			errs[k] = fmt.Errorf("uma: evict chunk %s: %w", a.id(i), err)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var freed int64
	for k, i := range cand {
		if errs[k] != nil {
			continue
		}
		if err := a.setLocked(i, Evicted, "evict"); err != nil {
			errs[k] = err
			continue
		}
		freed += a.chunkLen(i)
	}
	a.unclaimLocked2(cand)
	return freed, errors.Join(errs...)
}

// PostGPULoad applies the arena's post-GPU-load policy once the device holds
// the data: PolicyEvictCPU evicts every eligible chunk, PolicyMarkPreemptible
// marks them all preemptible, PolicyKeep does nothing. With enable_preemptible
// off every policy acts as Keep. It returns the policy applied.
func (a *Arena) PostGPULoad(ctx context.Context) (Policy, error) {
	p := Policy(a.policy.Load())
	if !a.u.preemptible.Load() {
		return PolicyKeep, nil
	}
	switch p {
	case PolicyEvictCPU:
		_, err := a.EvictTail(a.size)
		return p, err
	case PolicyMarkPreemptible:
		_, err := a.MarkPreemptible(ctx, 1)
		return p, err
	case PolicyKeep:
		return p, nil
	}
	return p, fmt.Errorf("uma: arena %q: unknown post-GPU-load policy %d", a.name, int(p))
}
