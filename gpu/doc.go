// Package gpu is where batches leave the host: the [Device] interface that
// psiflow copies to, and (in subpackages) its implementations and the stages
// that use it.
//
// A [Device] allocates and frees device memory, registers host memory for
// DMA once and copies from it asynchronously on [Stream]s, records and waits
// for [Event]s, and reports its memory. Implementations:
//
//   - gpu/cuda: NVIDIA GPUs through the CUDA driver API, loaded at run time
//     with purego (CGO_ENABLED=0 builds; no driver is [ErrNoDriver]);
//   - gpu/sim: a simulated device, host memory with a capacity and a
//     bandwidth model, labelled "simulated" in everything it reports.
//
// # Host memory
//
// Only UMA arena memory inside a live uma.Registration is registered with a
// device or copied asynchronously ([CheckHost]): the Go heap is refused with
// a [*MemoryError], because the collector may reuse memory that the device
// still reads, and UMA never gives registered chunks back to the kernel
// (a device pins pages as they are at registration). Registration happens
// once per staging buffer, not per batch.
//
// # Errors
//
// [ErrNoDriver] (no driver library on this host), [ErrNoDevice] (a driver but
// no such device), [ErrOutOfMemory] and [ErrClosed] are matched with
// errors.Is; implementations wrap them with the call and the device's name.
//
// The package owns the interface and the rules above. It does not own the
// driver bindings (gpu/cuda), NVML monitoring (gpu/nvml), UMA's ledger
// (package uma), or graphs (the copy stages live on the graph side).
package gpu
