// Package uma is psiflow's Unified Memory Authority: the one owner of the
// large buffers a loader holds (the bytes that travel through graphs, the
// host copies of data bound for the GPU) and the one ledger that knows which
// of those bytes are hot, pinned, stable, preemptible or gone.
//
// It owns: arenas (one mmap(MAP_PRIVATE|MAP_ANONYMOUS) region per artifact,
// cut into chunks, addresses stable for the arena's life) and pools (arenas
// handed out by allocation); the chunk ledger and its state machine
// ([Transitions], declared as data); byte, pin, stable and transfer leases;
// the stable tier budget; preemption (madvise); residency checks, checksum
// verification and re-hydration; start-up validation; and telemetry
// (snapshots and psiflow_uma_* Prometheus metrics).
//
// It does not own: graphs (uma knows nothing of flow; byte leases count
// against any [Budget], which flow.Budget satisfies, and every lease is a
// [Releaser]); reading data from disk (a [RehydrateFunc] does that); the
// pressure signal (a pressure gate calls [UMA.Shed]); devices (the gpu package
// brackets its copies with [Arena.BeginTransfer] and calls
// [Arena.PostGPULoad]); cgroups (the caller passes the memory limit as
// Config.MemoryLimit, e.g. memory.SelfMemoryLimit; uma imports neither).
// The Arrow allocator lives in the subpackage umaarrow so that plain users of
// uma do not pull in Arrow.
//
// # Chunk states
//
// Every chunk is in one of HOT, STABLE, COLD, LOCKED_TX, COPIED_GPU,
// PREEMPTIBLE and EVICTED. An operation that would take a chunk along an edge
// not listed in [Transitions] fails with a [*TransitionError] naming the chunk,
// the two states and the operation. Each chunk carries a version (bumped on
// every change), its last access, its byte-lease, pin and stable-lease counts;
// the ledger carries a monotonic version bumped on every state and lease
// change. [UMA.Snapshot] copies all of it.
//
// # Leases
//
//   - [ByteLease] ([Arena.Lease], [Pool.Alloc]): reference counted
//     (Retain/Release, so it is a stage.Retainer and may be broadcast), holds
//     its bytes of a graph's byte budget from before the bytes are taken until
//     the last Release.
//   - [PinLease] ([Arena.Pin]): mlock; on EPERM or ENOMEM UMA stops calling
//     mlock, says so once through the Logger, and pin leases keep their
//     reference-count meaning (pinned chunks are never preempted).
//   - [StableLease] ([Arena.AcquireStable]): holds chunks STABLE under the
//     stable tier (Config.StableBytes); a refusal is a [*StableBudgetError]
//     and leaves the ledger version where it was.
//   - [Export] ([Arena.Export]): pin (and optionally stable) after ensuring the
//     bytes are resident and intact.
//   - [Transfer] ([Arena.BeginTransfer]): LOCKED_TX while a device copy reads.
//   - [Registration] ([Arena.Register]): the range is registered with a device
//     (cuMemHostRegister), which pinned its pages as they were: no chunk it
//     touches is marked preemptible, evicted, trimmed or shed until it is
//     released. Devices find it by address ([FindRegistration]) and refuse
//     any memory outside one, the Go heap included.
//
// A pipeline that ends, fails or is cancelled releases every lease;
// [UMA.CheckNoLeases] says which arena still holds which.
//
// # Preemption
//
// [Arena.MarkPreemptible] marks a ratio of an arena's chunks PREEMPTIBLE,
// coldest first by last access, skipping leased, pinned, stable, LOCKED_TX
// and EVICTED chunks, and chunks with no re-hydrate function (their bytes
// could not be brought back; ArenaOptions.PreemptWithoutSource accepts the
// loss): it records an xxh3 checksum of each chunk and then
// calls madvise(MADV_FREE), falling back to MADV_DONTNEED (chunk EVICTED)
// where the kernel refuses MADV_FREE. [Arena.EvictTail] drops chunks at once
// (MADV_DONTNEED, last chunk first; MADV_PAGEOUT does nothing to private
// anonymous memory without swap). [Arena.PostGPULoad] applies the arena's
// [Policy] (EvictCPU, MarkPreemptible, Keep). Config.DisablePreemptible and
// [UMA.SetPreemptible] are the enable_preemptible switch;
// Config.MaxFaultsPerSecond stops marking while re-hydration is churning.
//
// # Never serving reclaimed bytes
//
// Every path that hands bytes out (Lease, Pin, Export, AcquireStable,
// BeginTransfer, Hydrate, a partial Write) first restores PREEMPTIBLE and
// EVICTED chunks, with the chunk claimed so nothing else touches it:
//
//  1. mincore, before anything touches the chunk. A page not resident was
//     certainly reclaimed (skip to 4). Residency alone cannot prove the
//     opposite: a read of a reclaimed page maps the shared zero page, after
//     which mincore says resident.
//  2. Touch-write every page: an atomic add of zero to one word per page.
//     A write to a page that is still lazily freed makes it dirty, and the
//     kernel does not reclaim a dirty lazy-free page: it keeps the data. A
//     write to a page already reclaimed faults in a fresh zero-filled page.
//     Either way, once the loop is done no page of the chunk is lazily freed
//     any more, so the kernel can no longer change what the chunk holds.
//  3. Hash the chunk with xxh3 and compare with the checksum taken just before
//     MADV_FREE. Because of step 2 the bytes hashed are exactly the bytes that
//     will be served: there is no window in which the kernel could reclaim a
//     page after it was verified. A page reclaimed before step 2 now reads as
//     zeros and the checksum catches it (the chunk held non-zero data or its
//     checksum would have matched the zeros it now holds, which is then
//     correct to serve).
//  4. On mismatch (a fault, counted) call the chunk's [RehydrateFunc] to
//     re-read it from its source, time it (psiflow_uma_rehydrate_seconds),
//     and check the checksum again: re-hydrated bytes that differ from the
//     bytes marked preemptible are an error, never served. A chunk without a
//     re-hydrate function becomes EVICTED and the caller gets
//     [ErrNoRehydrate].
//
// The cost is one write per page plus one xxh3 pass over the chunk, below
// the cost of a memcpy of it with the default huge-page hint (see
// docs/BENCHMARKS.md, section uma).
//
// [UMA.Reconcile] (periodically: [UMA.RunReconciler]) checks PREEMPTIBLE
// chunks with mincore without touching them and turns the ones the kernel
// took into EVICTED chunks (a fault), so that the preemptible bytes reported
// are bytes still resident. It cannot prove a chunk intact; only the
// re-acquire above does.
//
// # Start-up validation and metrics
//
// [New] checks that Config.StableBytes fits in the memory limit
// (Config.MemoryLimit: psiflow's pipelines pass memory.SelfMemoryLimit, the
// process's cgroup limit; unset, the host's physical memory, and the source
// says so; both capped at what RLIMIT_AS leaves) minus Config.PinnedPoolBytes,
// and shows all the numbers when it does not. With Config.Registerer set, the psiflow_uma_* metrics
// are registered: stable_bytes{state=total|used},
// preemptible_bytes{state=total|marked}, faults_total, faults_per_second,
// rehydrations_total, rehydrate_seconds (histogram), enable_preemptible,
// chunks{state}, leases{kind}, ledger_version, mlock_enabled.
//
// uma works on Linux only; elsewhere [New] returns an error.
package uma
