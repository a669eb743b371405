// Package h2d moves batches from host to device: a staging [Ring] of
// registered UMA memory that batches are collated straight into, copies on
// streams used in turn, and a device memory [Quota]; and the graph stages
// built on them (pin, host-to-device copy, mark-preemptible).
//
// # The staging ring
//
// The ring is one UMA arena cut into slots of the largest batch, sized by
// the byte budget. A slot is registered with the device (and recorded as
// registered in UMA's ledger) the first time it is used and stays
// registered while the ring streams, so a steady pipeline registers nothing
// per batch: a copy costs one asynchronous copy, one event record and one
// event wait. Free registered slots are reused warmest first. When a copy
// has completed, the slot's chunk is COPIED_GPU. The ring keeps registered
// as many slots as it had in use at once over its recent acquisitions (at
// least Config.KeepRegistered); a slot returned beyond that follows the
// post-GPU policy ([AfterCopy]): unregistered from the device and in the
// ledger, then marked PREEMPTIBLE (MADV_FREE) or EVICTED. So a burst keeps
// its slots while it lasts, and a pipeline that slows down gives the idle
// ones back. Memory a device has registered is never madvised. Untouched
// slots cost nothing.
//
// # Device memory
//
// Batches land in slot-sized device buffers from a pool; the pool grows
// under a [Quota] and a copy waits while it is full (psiflow_gpu_quota_*).
//
// It does not own the devices (gpu/cuda, gpu/sim), UMA, or graphs.
package h2d
