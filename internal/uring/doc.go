// Package uring is a thin io_uring binding written directly on golang.org/x/sys/unix.
//
// It owns the ring itself: io_uring_setup, the three mmap'd regions (submission
// ring, completion ring, submission entries), preparing READ, READ_FIXED, READV,
// ASYNC_CANCEL and NOP entries, batched submission and completion reaping
// through io_uring_enter (with a timeout, [Ring.SubmitWait], so a waiter can
// look at its context), a completion eventfd waited on in Go's network
// poller ([Notifier]: the waiting goroutine parks instead of blocking a
// thread in the kernel), registration of buffers and files, and the opcode
// probe.
//
// It does not own policy: which backend to use, fallback to pread, buffer
// pools, retries of short reads or admission control live in package source.
//
// A [Ring] is not safe for concurrent use; psiflow gives each worker its own
// ring. The memory handed to the kernel (buffers, iovecs) must stay alive and
// unmoved until its completion is reaped: callers pass off-heap (mmap'd)
// buffers or keep a reference until then.
//
// Why not a library: github.com/pawelgaczynski/giouring go:linknames
// syscall.mmap and only links with -ldflags=-checklinkname=0 on Go ≥ 1.23,
// which would break `go install` and `go test` for every importer. The few
// hundred lines here are all psiflow needs and link without flags.
//
// On systems other than Linux every constructor returns [ErrUnsupported].
package uring
