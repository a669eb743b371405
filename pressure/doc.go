// Package pressure turns the kernel's memory-pressure signals into a level and the
// level into permits.
//
// # What it owns
//
//   - Reading PSI files: /proc/pressure/{memory,io,cpu} and any cgroup v2
//     *.pressure file ([Parse], [ReadPSI]), through cgroup's one parser of the format
//     (cgroup.ParsePSI), whose types [PSI] and [Stall] it names.
//   - Pressure sources behind one interface, [Source], that deliver [Event]s on a
//     channel: PSI triggers ([OpenTriggers]), cgroup v1 vmpressure
//     ([OpenVMPressure]), a polling fallback on stall totals ([OpenPoller]) and a
//     memory-events watcher ([OpenMemoryEvents]). [Open] picks the best source the
//     host allows and says why it did not pick the others.
//   - The level model ([Model]): Normal, Some, Full and Critical, with enter and
//     exit thresholds, a hold time and a minimum dwell (hysteresis).
//   - The [Recorder]: time share, entries and mean duration per level, exported as
//     Prometheus metrics and as a text report.
//   - The [Gate]: permits derived from the level by a documented [Policy]
//     (multiplicative cut on Some, stop on Full, stop and shed on Critical, additive
//     recovery after a quiet period). It satisfies flow's gate contract
//     structurally (Acquire(ctx) error, Release()) without importing flow.
//   - [Monitor], which runs a source into a model, a gate and a recorder.
//   - [ThresholdsFor], which derives trigger thresholds from a target IOPS and a
//     reclaim latency.
//
// # What it does not own
//
// Graphs: package memory's runtime plugs the gate and its monitor into flow
// graphs, and sizes a graph's byte budget. cgroup control (creating groups,
// limits) lives in package cgroup. Shedding itself (UMA eviction,
// page-cache drop, pool shrink) belongs to whoever registers a shed callback with
// [Gate.OnShed].
//
// # Kernel rules followed
//
// A PSI trigger is "some|full <stall_us> <window_us>" written to a pressure file
// opened O_RDWR|O_NONBLOCK, one trigger per file descriptor, waited on with poll
// for POLLPRI only (POLLIN is always set). The window must lie in 500 ms..10 s and
// the stall must not exceed it; without CAP_SYS_RESOURCE the window must be a
// multiple of 2 s. Inside a user namespace the opener holds that capability, so
// shorter windows are opened through a re-executed helper where the kernel allows
// it ([ProbeShortWindows]); this is detected, never assumed. The helper is the running
// binary again, run from [RunHelper] (or reexec.Init) called first thing in main and
// TestMain; the package has no init function, and without the call such triggers fail
// with [ErrNoHelper]. Reading a pressure
// file often stops its triggers, so the poller refuses intervals under 100 ms.
package pressure
