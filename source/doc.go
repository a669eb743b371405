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
// A file dataset read with io_uring reads each whole file of up to 4 MiB by
// its path with one chained submission ([Status.Chain]): an open into a
// direct descriptor (a slot of the ring's file table) linked to the read,
// where a descriptor costs open, fstat, fcntl, read and close system calls
// (the slot's next open replaces the file; closing the reader drops the rest); the admission takes the file's type and size from one stat by path.
// A short read, EINTR or EAGAIN, or an O_DIRECT open the file system refuses
// is finished on a descriptor of its own; the iterator counts each path
// ([ReadPathReporter]), with the reason of the first fallback. Kernels
// without direct descriptors (before 5.15), the pread backend, DropCache
// without Direct (fadvise needs a descriptor), network and user-space file
// systems and [ReaderOptions.SeparateCalls] read on descriptors.
//
// Every dataset file is opened with O_NONBLOCK and kept only when fstat
// says it is a regular file: a named pipe, socket or device put in place of
// a listed file is refused with an error wrapping [ErrNotRegular] that names
// it, and never blocks the open. Reads stay cancellable: [Reader.Reap]
// returns when its context ends, even with reads in flight (the io_uring
// reader waits in slices of 50 ms, parked in Go's network poller on an
// eventfd the ring signals, and reaps the completions from the shared ring
// without a system call, or, with [ReaderOptions.KernelWait] or before
// Linux 5.8, blocked in io_uring_enter; pread reads in pieces of 4 MiB),
// and Close cancels what is in flight (IORING_OP_ASYNC_CANCEL) and
// waits until the kernel has let go of every buffer. [ReaderOptions.Faults]
// is the readers' system-call seam for tests (package source/readfault
// injects EIO, short reads, EINTR and files swapped for named pipes).
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
// [Options]: rank and world size, a seed for the per-epoch order and a
// bounded shuffle buffer, and [Options.Resume] with a [Position] — a small
// JSON-marshalable checkpoint — to get exactly the elements not yet
// returned. Bad input (missing or unreadable file, truncated tar, corrupt
// table) fails the iteration with an error naming the file and offset, or
// with [Options.Skip] is counted and skipped up to [Options.MaxSkips], or
// under [Options.SkipPolicy] (the decode stage's [stage.SkipPolicy]).
//
// # Sharding and shuffling
//
// Files are dealt to ranks as PyTorch's DistributedSampler deals them. Each
// epoch has one global order: a permutation of the whole dataset per (seed,
// epoch) with [Options.Shuffle], else the base order. Rank r of w reads its
// positions r, r+w, r+2w, …; every rank reads the same count, ⌈n/w⌉ with the
// remainder padded by repeating the epoch's first entries (as
// DistributedSampler with drop_last=False: up to w−1 samples are read twice
// an epoch), or ⌊n/w⌋ with [Options.DropLast] (up to w−1 are not read that
// epoch). Across ranks, every sample is read exactly once per epoch apart
// from that remainder, in a different order every epoch. [Share] is one
// rank's part; [Sample.Index] names each sample's place in the dataset, the
// same in every epoch, for per-sample randomness. The permutation is
// evaluated one position at a time (a keyed Feistel network, cycle-walked
// into [0, n)): it holds no table, costs about 130 ns of CPU a sample (a
// Fisher–Yates table: 60 ns an entry and 5 MB for 1.28 M), and a resume
// at any offset starts at once.
//
// A file epoch's position is global: the number of entries of the epoch's
// order that all ranks together have consumed ([Position.Consumed]: rank r of
// w at its k-th entry from offset s stands at s+k·w). Data-parallel ranks
// advance in lockstep (one batch each per step), so the positions they take
// at the same step are equal, and a resume under another world size deals
// the rest of the epoch, from that offset, among the new ranks: the union is
// still every sample once, the padding or cut applied to what remains. This is
// the rule of Grain's and MosaicML Streaming's elastic resumption. A rank
// resumed from its own older position under the same world size reads exactly
// what it had not read. With a shuffle buffer the order within the rank is
// mixed across offsets, so such an epoch resumes only under the same rank and
// world size. Tar shards and tables are dealt by shard (rank r reads every
// w-th shard of the epoch's shard order) and resume under the same rank and
// world size. A sharded dataset with fewer samples (files) or shards than
// ranks is an error naming the rank, the world size and the dataset's size.
//
// The library never reads the environment: WorldSize 0 is 1. [EnvSharding]
// (and [LocalRank]) read RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them,
// the one place psiflow does; front-ends call it and pass its result.
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
