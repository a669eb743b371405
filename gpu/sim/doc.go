// Package sim is a simulated [gpu.Device]: device memory taken from host
// memory up to a capacity, and one copy engine that moves each copy's bytes
// at a configured bandwidth after a fixed latency, in enqueue order. It lets
// the copy stages, their overlap with decoding and their memory be tested and
// measured on any machine. Everything it reports says "simulated": its
// [Device.Name], its errors and its [Stats].
//
// It follows the CUDA device's rules: only memory inside a live
// uma.Registration is registered or copied asynchronously, copies happen when
// the engine gets to them (so a host buffer reused too early is copied with
// its new bytes, and counted in Stats.ChangedInFlight), and freeing or
// unregistering memory that a pending copy uses is refused. With
// Config.Discard it keeps no device bytes, so a measurement of host memory
// sees only the loader's own.
//
// It does not model kernels, device-to-device copies or multiple copy
// engines.
package sim
