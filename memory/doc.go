// Package memory is psiflow's memory runtime: what a loader's graphs run under
// so that the loader stays inside its cgroup beside the process it shares it
// with (the trainer), in one of two modes, [Elastic] (the default) and [Fixed].
//
// A graph takes the runtime once, flow.New(name, flow.WithRuntime(rt)) (or
// [NewGraph], for a graph that owns a runtime of its own), and Graph.Run does
// the rest: the graph draws on the runtime's byte budget, its
// sources take permits from the pressure gate and read into the runtime's read
// buffers, the headroom sampler runs exactly as long as the graph, the pressure
// monitor from the first graph until [Runtime.Close] (between epochs too), and
// every graph after the first is the next epoch (the previous graph's garbage is
// collected and the registered read pool resized first).
//
// # What it owns
//
//   - The byte budget of a run's graphs ([Runtime.Budget]), following the
//     cgroup's headroom ([pressure.Headroom]: the limit minus what the others
//     hold unreclaimable, projected ahead, minus a reserve) between the loader's
//     floor and a maximum; the default budget of a graph ([DefaultByteBudget]:
//     a quarter of the cgroup memory limit).
//   - The pressure gate and its monitor ([GateConfig]): PSI levels become
//     permits at the sources; at Critical the shed actions run.
//   - The read buffers every source reads into ([ReadBuffers]): a small
//     registered pool sized to the reads in flight plus an unregistered spill
//     pool that pressure switches reads to and that is given back
//     (MADV_DONTNEED) at Critical and while the loader holds more than its
//     allowance; the registered pool is re-registered smaller at the next epoch
//     after pressure, and revoked at a pause's start ([ReadBuffers.Revoke]: the
//     readers unregister it once their reads in flight are done).
//   - The decode-worker limit ([Workers], [Narrow]): narrowed at Some and Full
//     and while the loader holds more than its allowance, restored after.
//   - Below its floor the run stops with a [*BelowFloorError] ([StopBelowFloor]).
//   - The shed actions, each counted in psiflow_shed_action_runs_total and
//     psiflow_shed_action_freed_bytes_total (label action), and the
//     psiflow_elastic_* gauges; more are registered with [Runtime.OnShed].
//   - The actions on the whole process ([ProcessActions]: the Go memory limit
//     following the budget, the OOM preference, the locked program text), off
//     unless asked for: a library does not change the program it runs in; the
//     launcher asks for all of them ([LauncherProcess]).
//   - Package [github.com/psiflow/psiflow/memory/pause]: the pause decision
//     below the floor.
//
// # What it does not own
//
// The graph (package flow, which knows the runtime only as its flow.Runtime
// interface), PSI, the level model and the gate's policy (package pressure,
// which knows no graph), UMA's ledger (package uma), reading (package source)
// and the pipelines themselves (package pipelines builds one runtime per run).
package memory
