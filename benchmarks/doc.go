// Package benchmarks is the home of psiflow's whole-graph benchmarks: loaders run side
// by side, in fresh memory-limited cgroups, by the same harness.
//
// # Layout
//
//   - [github.com/psiflow/psiflow/benchmarks/protocol]: the JSON-lines progress protocol
//     every loader speaks on its standard output, and an emitter for Go loaders.
//   - [github.com/psiflow/psiflow/benchmarks/harness]: runs loader commands in memory-limited
//     cgroups with a wall-clock timeout, measures throughput, batch latency, cgroup
//     peak memory and OOM kills, alternates loaders over rounds and reports Markdown
//     tables and JSON. The launcher's "psiflow bench" command is its front end.
//   - benchmarks/peers: loaders written for other frameworks (dataloader.py: PyTorch's
//     DataLoader), speaking the same protocol.
//   - benchmarks/loaders: psiflow loader programs used in comparisons.
//
// This package itself holds no code; it only documents the tree.
package benchmarks
