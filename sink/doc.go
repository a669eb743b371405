// Package sink is where batches go at the end of a graph: [Null] (counts and
// drops, for benchmarks), [Arrow] (an Arrow IPC file, or an IPC stream to a Unix
// socket), [Parquet] (a folder of Parquet files) and [Torch] (batches written
// into shared memory and handed over a Unix socket to the Python module in the
// repository's python/psiflow, which yields them as numpy arrays or torch
// tensors without copying the pixel bytes).
//
// # The contract
//
// Every sink is a [Sink]: Consume is called with each [tensor.Batch] from one
// goroutine (a flow.Sink's function, or pipelines.Hooks.Batches) and must be
// done with the batch's memory when it returns, because the graph releases the
// batch then; Close ends the sink, telling a remote consumer why (a nil cause is
// a clean end) and returning what failed. Close is safe to call more than once
// and after a failed Consume; after Close every goroutine a sink started has
// ended and every descriptor it opened is closed.
//
// # The PyTorch consumer
//
// [Torch] listens on a Unix socket (SOCK_SEQPACKET) and accepts one consumer.
// At the first batch it creates one memfd of Slots × SlotBytes bytes (by default
// both sized from that batch: see TorchConfig.Slots), maps it
// and passes the descriptor with SCM_RIGHTS. A collate stage given the sink
// as its destination (tensor.CollateInto with [Torch.Lend]) writes each
// batch straight into a free slot, which Consume announces without a copy;
// any other batch is copied once into a free slot. Each is announced with a
// small JSON header; the
// Python side makes numpy views of the slot (np.frombuffer on its own mapping:
// no copy) and sends the slot back when it is done with it (at the next
// iteration, or an explicit release). At most Slots batches are outstanding:
// when all are in Python, Consume waits, which backpressures the graph through
// its bounded queues. The bytes of outstanding batches are held in a
// [flow.Budget] (the sink's own, or one passed in) until Python releases them.
// A consumer that closes the connection ends Consume with [ErrConsumerClosed]
// (a clean stop); one that disappears without closing (a crash, kill -9) ends it
// with an error saying so; a Go-side failure passed to Close reaches Python as
// an exception carrying its message. The wire format is in docs/SINK.md.
//
// # What it does not own
//
// Building graphs (package flow), the pipelines that produce batches (package
// pipelines), the batch type and collation (package tensor), reading the
// files back (package source reads Arrow IPC files and Parquet), and choosing a
// sink from a pipeline file (the YAML registry in package pipelines).
package sink
