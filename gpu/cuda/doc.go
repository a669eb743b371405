// Package cuda is a [gpu.Device] for NVIDIA GPUs through the CUDA driver API,
// loaded at run time from libcuda.so.1 with purego: no cgo, so psiflow builds
// with CGO_ENABLED=0 and runs where no driver is installed (Open then returns
// an error wrapping [gpu.ErrNoDriver]).
//
// # Calls
//
// Open calls cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet,
// cuDeviceGetName and cuDevicePrimaryCtxRetain; the device then uses
// cuMemAlloc_v2/cuMemFree_v2, cuMemHostRegister_v2/cuMemHostUnregister,
// cuStreamCreate (non-blocking)/cuStreamSynchronize/cuStreamDestroy_v2,
// cuMemcpyHtoDAsync_v2, cuMemcpyDtoH_v2 (copy-back verification),
// cuEventCreate/cuEventRecord/cuEventSynchronize/cuEventElapsedTime/
// cuEventDestroy_v2, cuMemGetInfo_v2, and cuGetErrorName/cuGetErrorString
// to name every failure ([Error]). Entry points are looked up with Dlsym when
// the library is loaded: a driver that lacks one is an error naming it, not
// purego.RegisterLibFunc's panic.
//
// # Threads
//
// A CUDA context is current per OS thread. Every call that needs the
// context runs on a goroutine locked to its thread with the primary context
// current: one for control (allocation, registration, events, synchronous
// copies), one per [Stream] (its copies and records, which the stream's
// creator thread alone issues), and one that waits for events. The
// goroutines never unlock their threads, so the threads exit with them on
// Close.
//
// # Host memory
//
// Only UMA arena memory inside a live uma.Registration is registered or
// copied asynchronously: [Device.Register] and [Stream.CopyToDevice] refuse
// anything else (the Go heap above all, which the collector may move or
// reuse while the device reads it) with a [*gpu.MemoryError], before the
// driver sees it. While the registration lasts, UMA never madvises the
// memory away. Synchronous copies back to the host ([Device.CopyToHost]) may
// use any memory.
//
// # Loading
//
// [Config.Library] names the library (tests point it at the fake driver of
// internal/fakecuda); empty means libcuda.so.1 through the dynamic
// loader's path. [DefaultConfig] is the one place the binding reads the
// environment: [EnvLibrary].
//
// It does not own device selection for pipelines (package gpu), the copy
// stages, or NVML (package gpu/nvml).
package cuda
