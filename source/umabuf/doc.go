// Package umabuf lets package source's readers read into memory owned by the
// Unified Memory Authority: a [Provider] adapts a registered uma.Pool to
// source.BufferProvider, so the pool's memory is registered once with every
// io_uring ring (reads use READ_FIXED) and every buffer is a UMA byte lease
// that shows up in UMA's ledger and metrics.
//
// The pool must be made with uma.ArenaOptions{Registered: true}: registration
// pins the pool's pages, so UMA must never trim or shed that memory, and only
// registered pools hand out their region. The pool must be dedicated to the
// provider: every allocation is a multiple of source.Align, which keeps every
// buffer aligned for O_DIRECT.
//
// It owns only the adaptation; reading is package source's, memory
// accounting package uma's.
package umabuf
