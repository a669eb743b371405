// Package umacache is a sample cache in UMA's preemptible memory: entries (a sample's
// decoded tensor, or its encoded bytes) live in chunks of one UMA arena that are
// marked PREEMPTIBLE (madvise MADV_FREE) as soon as they are written. While memory is
// free the kernel leaves them alone and a later epoch reads them instead of reading
// and decoding again; when somebody needs the memory the kernel takes them without a
// stall (lazily freed pages are the cheapest to reclaim), and the cache notices.
//
// # Never serving reclaimed bytes
//
// [Cache.Get] goes through UMA's one acquire path: a chunk that was lazily freed is
// checked with mincore, touch-written and hashed against the checksum taken when it
// was marked (see package uma). A chunk the kernel took is refused with
// uma.ErrNoRehydrate: the entry is dropped, counted as reclaimed, and Get reports a
// miss, so the caller produces the sample again from its source. Bytes are copied
// out of the arena before the chunk is marked preemptible again.
//
// # Memory that is given back first
//
// The cache is outside any graph's byte budget. It is bounded by its own limit
// ([Cache.SetLimit], which may follow the cgroup's headroom), and [Cache.Shed] drops
// the coldest entries at once (MADV_DONTNEED): the first shed action under pressure.
//
// It does not own what is cached or when (pipelines decide: see the pipeline
// spec's resources.cache), nor reading or decoding.
package umacache
