package pressure

import "time"

// VMPressureConfig configures [OpenVMPressure] (cgroup v1 memory.pressure_level).
type VMPressureConfig struct {
	// Dir is the cgroup's directory in the v1 memory hierarchy, e.g.
	// /sys/fs/cgroup/memory/psiflow/job. Empty means the calling process's own v1
	// memory cgroup ([SelfMemoryV1Dir]).
	Dir string
	// Levels to listen to: any of SignalVMLow, SignalVMMedium, SignalVMCritical.
	// Default medium and critical ("low" fires thousands of times per second as soon
	// as reclaim runs, which is normal for a cgroup full of page cache).
	Levels []Signal
	// Mode is "", "local" or "hierarchy" (the kernel's optional ",mode" suffix).
	Mode string
	// MinInterval is the shortest time between two events of one level; notifications
	// in between are coalesced into the next event's Count. Default 100ms.
	MinInterval time.Duration
	// Buffer is the capacity of the events channel (default 16).
	Buffer int
}

func vmLevelName(s Signal) string {
	switch s {
	case SignalVMLow:
		return "low"
	case SignalVMMedium:
		return "medium"
	case SignalVMCritical:
		return "critical"
	}
	return ""
}
