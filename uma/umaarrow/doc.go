// Package umaarrow is an Apache Arrow memory.Allocator whose buffers live in
// a UMA pool, so that Arrow arrays, IPC readers and Parquet decoders allocate
// from memory the Unified Memory Authority accounts for and can trim.
//
// It owns only the adapter: 64-byte aligned, zeroed allocations from a
// [uma.Pool], growth by reallocation, and a fall-back to the Go heap when the
// pool is full (Arrow's Allocator interface cannot return an error; the
// fall-backs are counted). It does not own the pool's lifetime, leases or
// preemption (package uma does), nor Arrow itself. It lives apart from uma so
// that plain users of uma do not depend on Arrow.
package umaarrow
