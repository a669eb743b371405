// Package source reads training data: the io_uring reader and its pread
// fallback, datasets (files, WebDataset tar shards, Arrow IPC and Parquet),
// sharding by rank, seeded shuffling and exact resume.
//
// # Readers
//
// A [Reader] reads files into caller-provided buffers: [Reader.Submit] queues
// reads, [Reader.Reap] collects completions. [NewReader] picks the backend:
// io_uring when the kernel allows it, else pread, logging the reason once
// (log/slog) and reporting it through [IOStatus] for `psiflow doctor`.
// PSIFLOW_IO=pread (or [ReaderOptions.Backend]) forces the fallback. The
// io_uring reader owns one ring: use one Reader per worker, since a ring
// completes cached reads inline on the core that submits them. It batches
// submissions up to the queue depth, registers the buffer provider's memory
// once (READ_FIXED), can register files, resubmits short reads and
// EINTR/EAGAIN, reads with O_DIRECT when asked (unaligned requests fall back
// to a buffered descriptor of the same file), and drops the page cache of
// [0, end read) after a file is consumed when [ReaderOptions.DropCache] is set.
// A failed read is a [*ReadError] naming the path and the offset.
//
// Every dataset file is opened with O_NONBLOCK and kept only when fstat
// says it is a regular file: a named pipe, socket or device put in place of
// a listed file is refused with an error wrapping [ErrNotRegular] that names
// it, and never blocks the open. Reads stay cancellable: [Reader.Reap]
// returns when its context ends, even with reads in flight (the io_uring
// reader waits in the kernel in slices of 50 ms; pread reads in pieces of
// 4 MiB), and Close cancels what is in flight (IORING_OP_ASYNC_CANCEL) and
// waits until the kernel has let go of every buffer.
//
// The ring is a thin binding written on golang.org/x/sys/unix
// (internal/uring: io_uring_setup, the mmap'd rings, READ, READ_FIXED, READV,
// registered buffers and files, the opcode probe). We chose it over
// github.com/pawelgaczynski/giouring, which go:linknames syscall.mmap and
// links only with -ldflags=-checklinkname=0 on Go ≥ 1.23, and over
// github.com/godzie44/go-uring, which links but brings a reactor and
// abstractions psiflow does not use; about 450 lines give exactly what the
// reader needs, with no link flags and no cgo.
//
// # Admission and buffers
//
// Reads are admitted in two phases through a [Gate] (pressure's gate or
// flow's): a permit, then a [Buffer] from a [BufferProvider], then the
// submission; the permit is released when the read completes ([Admit],
// [Request.Permit]). The default provider is [Pool], page-aligned slots in one
// mmap'd region registered with every ring; UMA can provide buffers through
// the same two-method interface. A [Budget] (flow.Budget) is charged for each
// sample's bytes until [Sample.Release].
//
// # Datasets
//
// [Files] ([NewFiles], [Glob], [Dir]) yields one [Sample] per file;
// [TarShards] groups consecutive tar members by key (the path up to the first
// dot of the base name) into samples with several fields; [Tables] yields
// [Batch]es of Parquet row groups or Arrow IPC record batches, projected onto
// named columns. Every dataset is iterated one epoch per [Iterator] with
// [Options]: rank and world size (RANK and WORLD_SIZE from the environment
// by default, as torchrun sets them), a seed for the per-epoch shard order
// and a bounded shuffle buffer, and [Options.Resume] with a [Position] — a
// small JSON-marshalable checkpoint — to get exactly the elements not yet
// returned. Bad input (missing or unreadable file, truncated tar, corrupt
// table) fails the iteration with an error naming the file and offset, or
// with [Options.Skip] is counted and skipped up to [Options.MaxSkips].
//
// # Hostile input
//
// No size read from a file is trusted: a tar member's size is checked against
// the bytes left in the shard and [Options.MaxMember] before anything is
// allocated, a shard without its end-of-archive marker is an error, and
// Parquet and Arrow footers are checked against the file. With Skip, a tar
// member over the limit is dropped alone and a corrupt header is passed over
// to the next valid one ([ValidTarHeader]); [LossReporter] says how many bytes
// were lost. [Dir] follows symlinks with loop detection, matches extensions
// in any case and returns [ErrEmptyDataset] rather than an empty dataset.
// docs/HOSTILE-INPUT.md has the table of inputs tried.
//
// # What this package does not own
//
// Decoding (stage/decode), memory ownership (uma), pressure levels and the
// gate (pressure), and graph wiring (flow; package source/flowsrc adapts
// datasets into flow sources). Synthetic datasets are written by source/synth.
package source
