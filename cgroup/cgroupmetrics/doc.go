// Package cgroupmetrics exports a cgroup's resource use as Prometheus metrics, on pure
// cgroup v2 hosts and on v1/hybrid ones, reading the interface files at scrape time.
//
// # What it owns
//
// [Collector] reports one [cgroup.Group] (all names start with psiflow_cgroup_ and carry
// a const label cgroup="<group name>"): memory current, limit and peak; anonymous, file,
// shmem and kernel bytes from memory.stat; major faults, workingset refaults, pages
// scanned and reclaimed by kswapd and direct reclaim; memory.events (low, high, max, oom,
// oom_kill, oom_group_kill on v2; max from memory.failcnt and oom_kill on v1); the PSI
// stall totals of memory, cpu and io (the cgroup2 side, which hybrid hosts have too); CPU
// usage and bandwidth throttling from cpu.stat (and cpuacct.usage on v1); pids current,
// limit and pids.events max. [Host] reports the host's reclaim counters from /proc/vmstat
// (psiflow_host_memory_*), for v1 hosts whose memory.stat has no reclaim counters.
//
// A value the host does not offer (a file or a key missing for this layout, or no limit
// set) is left out of the scrape, never reported as 0, so a rule or a dashboard can tell
// "none" from "not known". A file that exists but cannot be read or parsed makes the
// scrape report an error for that metric, naming the file.
//
// PSI totals are read at most every [MinPSIInterval] (the kernel stops firing a cgroup's
// PSI triggers when its pressure file is read every few milliseconds; see LINUX-FACTS).
//
// # What it does not own
//
// Finding groups and the layout, writing limits and parsing every file it reports
// (cgroup's readers: ReadInt, ReadLimit, ReadKeyed, ReadMemoryStat, ReadPSI) belong to
// package cgroup; it imports nothing else of psiflow. Serving /metrics belongs to
// package metrics.
package cgroupmetrics
