// Package harness runs data loaders side by side under the same memory limit and
// reports what each achieved: throughput, batch latency, the cgroup's peak memory and
// OOM kills, alone or next to a co-tenant that takes a share of the limit.
//
// # How a run works
//
// [Run] creates a fresh cgroup (package
// [github.com/psiflow/psiflow/cgroup]), sets its hard memory limit if one is
// given, and starts the loader command blocked, moving it into the group before it
// executes, so that everything the loader and its children allocate (page cache
// included) is charged to the group. While it runs, the harness reads the loader's
// progress lines (package [github.com/psiflow/psiflow/internal/harness/protocol]) and samples
// memory.current at 20 Hz. When the timeout passes, every process of the group is
// killed and the run is reported as [TimedOut]: a loader that thrashes at its limit
// ends within the timeout instead of never. After the loader exits, leftover processes
// are killed, the peak is read (v1 memory.max_usage_in_bytes, v2 memory.peak, or the
// largest sample where the kernel keeps no peak), OOM kills are counted (v2
// memory.events oom_kill, v1 memory.oom_control oom_kill) and the group is removed,
// also when the run failed.
//
// [Measure] turns batch events into samples per second (after a warm-up of N batches)
// and p50/p99 of the gaps between batches: the time the consumer waited for each.
//
// # Side by side
//
// [Compare] runs a [Plan]: every loader at every limit for R rounds, alternating the
// order each round (A B, B A, …), and summarises each loader and limit with the median
// and range of each metric and its ratios to a baseline loader. A [Report] is written
// as Markdown ([Report.WriteMarkdown], for docs/BENCHMARKS.md), JSON
// ([Report.WriteJSON], every run included) or an SVG plot of each run's memory use over
// time ([Report.WriteSVG], with Options.Timeline). Cold runs drop the page cache of the data
// files before each run ([DropCache]).
//
// # A co-tenant
//
// The loader shares its memory limit with a training process in real use. With
// Options.CoTenant, [Run] starts a co-tenant in the run's group just before the loader,
// blocked until its PID is in the group's cgroup.procs (charges do not move with a
// process), with a pipe as standard input. The co-tenant ([RunCoTenant]; "psiflow
// cotenant" runs it) touches its bytes of anonymous memory evenly over its ramp and
// holds them until the harness closes that pipe when the loader has ended. Each run
// then reports:
//
//   - what became of the co-tenant ([CoTenantFate]): a SIGKILL the harness did not send,
//     with the group's OOM-kill counter up, is the OOM killer's; the harness notes
//     whether the co-tenant was already dead (or a zombie) before its own SIGKILL at a
//     timeout, so that the two are told apart, and the loader's OOM kills are the
//     group's minus the co-tenant's;
//   - the growth of the group's memory.pressure some and full totals from the start to
//     the loader's end, as a share of the wall time ([PSITotals]);
//   - the fluctuation of memory.current in steady state, stddev/mean of the samples from
//     the end of the warm-up and of the co-tenant's ramp to the last batch
//     ([SteadyFluctuation]).
//
// [Plan].Shares runs every loader at every share of the limit in every round (share 0:
// alone), the loaders alternating, and each summary gives the loader's wall time over
// its own alone run in the same round.
//
// # Co-tenant shapes
//
// A cell of a comparison is a [Shape] ([ParseShape] reads "alone", "ramp:0.7",
// "spike:0.9/5s/0.4", "trainer:0.7"; [Plan].Shapes):
//
//   - [Ramp]: the co-tenant process above, rising to a share and holding it;
//   - [Spike]: the same process rises to a peak, holds it for a while and gives memory
//     back down to a lower share at once (MADV_DONTNEED), as a trainer's evaluation or
//     checkpoint peaks and falls back; the run reports when it held and when it fell,
//     and the summary counts the runs whose wall time stayed within the alone run's
//     plus [SpikeSlack] × the hold;
//   - [Trainer]: no co-tenant process; the loader command is a training loop that
//     consumes the batches (benchmarks/peers/trainer.py, fed by psiflow's Python loader
//     or by torch's DataLoader) and holds its own ballast: [BallastArg] in its
//     arguments becomes share × the limit in bytes. An OOM kill of that process (a
//     SIGKILL the harness did not send, with the group's counter up) is the trainer's,
//     counted as the co-tenant's; the loader's kills are those of its other processes
//     (psiflow serve, the DataLoader's workers).
//
// # What each run checks
//
// Besides throughput and memory, a run reads the loader's optional protocol lines: its
// pauses below its floor (pause and resume events, added up by [Pauses]) and the keys
// of its batches, from which [CheckKeys] tells whether every sample of every epoch
// arrived exactly once: nothing twice, nothing skipped ([KeyCheck]).
//
// The launcher's "psiflow bench" command is the front end.
//
// # What it does not own
//
// The loaders themselves (benchmarks/peers and the comparison commands
// under cmd/), the memory runtime whose pauses it counts, and the cgroup file formats
// (package cgroup).
//
// # Platform
//
// Runs need Linux cgroups and root (or a delegated cgroup subtree); elsewhere [Run]
// fails with cgroup.ErrUnsupported. Measure, Summarize and the reports are portable.
package harness
