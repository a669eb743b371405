// Package elastic is the memory runtime of psiflow's shipped pipelines: it makes a
// loader yield memory to the process it shares its cgroup with (the trainer).
//
// # What it owns
//
//   - The byte budget of a run's graphs, following the cgroup's headroom
//     ([pressure.Headroom]: the limit minus what the others hold unreclaimable,
//     projected ahead, minus a reserve) between the loader's floor and a maximum,
//     and announcing once when the headroom falls below the floor and when it
//     comes back.
//   - The read buffers ([ReadBuffers]): a small registered pool sized to the reads in
//     flight plus an unregistered spill pool that pressure switches reads to and
//     that is given back (MADV_DONTNEED) at Critical and while the loader holds
//     more than its allowance; the registered pool is
//     re-registered smaller at the next epoch after pressure.
//   - The decode-worker limit ([Workers], [Narrow]): narrowed at Some and Full and
//     while the loader holds more than its allowance, restored after.
//   - The Go heap bound: debug.SetMemoryLimit follows the budget and the allowance,
//     and debug.FreeOSMemory runs at Critical and while the loader is over its
//     allowance (at most every 500 ms).
//   - Below its floor the run stops with a [*BelowFloorError] ([StopBelowFloor]).
//   - The shed actions registered on the pressure gate, each counted in
//     psiflow_shed_action_runs_total and psiflow_shed_action_freed_bytes_total
//     (label action), and the psiflow_elastic_* gauges.
//   - [Fixed] mode, psiflow as it was before (64 MiB registered pool, a quarter of
//     the limit as the budget, nothing given back), for benchmarks.
//
// # What it does not own
//
// The graph (package flow), the gate and its level model (package pressure, wired
// to graphs by flow/throttle), UMA's ledger (package uma), reading (package source)
// and the pipelines themselves (pipelines/imagefolder uses this package).
package elastic
