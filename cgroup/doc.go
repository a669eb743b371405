// Package cgroup controls Linux cgroups through their interface files, with one API for
// both layouts: pure cgroup v2 (what most hosts and container runtimes use) and v1 or
// hybrid hosts (v1 controllers, plus cgroup2 at /sys/fs/cgroup/unified for per-cgroup
// PSI).
//
// # What it owns
//
//   - Finding the layout ([DetectLayout], [OpenTree]) and the calling process's groups
//     ([Self]), and the effective memory limit of the process ([SelfMemoryLimit]).
//   - Creating and removing child groups ([New], [Group.Remove], [Group.Kill],
//     [Tree.RemoveStale] for groups of dead processes) and starting a program inside one
//     so that its memory is charged there from its first page ([Group.Start]).
//   - Limits: memory max/high, cpu quota and weight, io weight and throttling, pids.
//   - Statistics: memory usage, peak, memory.stat and events, cpu.stat throttling,
//     pids.current, pids.max and pids.events.
//   - The one set of readers of cgroup and /proc memory files, one per format, for both
//     layouts ([ReadInt], [ReadLimit], [ReadKeyed], [ReadMemoryStat],
//     [ReadProcSizes], [ReadPSI]; [Group.File] finds a group's file): every malformed
//     line is a [*ParseError] naming the file and the line. pressure's headroom and
//     cgroup/cgroupmetrics read through them.
//   - An adaptive cpu quota controller ([QuotaController]), a pids.events watcher
//     ([WatchPids]) and a child subreaper for launchers ([Reaper]).
//
// Each operation picks the file that exists for the group: the v2 spelling
// (memory.max, cpu.max, cpu.weight, io.weight, io.max, pids.max) where the controller is
// enabled on the cgroup2 side, else the v1 one (memory.limit_in_bytes, cpu.cfs_quota_us,
// cpu.shares, blkio.*, pids.max). Operations whose controller is missing fail with an
// error wrapping [ErrNoController] that names the group and the files looked for.
//
// # Nothing outlives its owner
//
// [Group.Start] gives the child PR_SET_PDEATHSIG (SIGKILL). [Tree.New] records the
// creating process on every directory of the group ([OwnerXattr], PID and start time);
// [Tree.RemoveOrphans] removes, killing what is inside, the groups whose recorded owner
// is gone. [Group.Watch] starts a watchdog process that removes the group as soon as
// its owner dies without calling [Watchdog.Stop], grandchildren included.
//
// # Re-executed helpers
//
// The blocked start of [Group.Start] and the watchdog of [Group.Watch] re-execute the
// running binary, which runs the helper from [RunHelper]: call it (or reexec.Init,
// which also runs pressure's helper) first thing in main and TestMain. The package
// has no init function; without the call those two refuse with [ErrNoHelper].
//
// # What it does not own
//
// PSI triggers, v1 vmpressure and what pressure means belong to package pressure,
// which asks this package for paths ([Group.PressurePath], [Group.V1Dir]) and for the
// PSI file format ([ReadPSI]). The package knows nothing of graphs or stages.
//
// # Why not containerd/cgroups
//
// containerd/cgroups/v3 keeps v1 and v2 as two different APIs, lacks pids.events and PSI
// triggers, reads no memory PSI on hybrid hosts, and pulls in dbus, go-systemd and
// cilium/ebpf for what are plain text-file writes. Its parsers were a useful reference.
//
// # Testing
//
// A [Tree] can be opened at any directory ([OpenTree]) so that the parsers and the
// per-layout file choices are tested against fake trees of both layouts in a temporary
// directory; the real-kernel tests create uniquely named groups and remove them.
package cgroup
