package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pressure"
)

// Host rows of "psiflow doctor": cgroups (100s), pressure signals (200s), memory
// features (300s), io_uring (400s) and NVML (600s). The probes are real: they create
// and remove a cgroup, write PSI triggers, register a vmpressure event, call
// io_uring_setup and userfaultfd, and madvise a scratch page, each undone at once.
func init() {
	for _, c := range []hostCheck{
		{100, "cgroup layout", probeCgroupLayout},
		{101, "cgroup control", probeCgroupControl},
		{102, "memory limit", probeMemoryLimit},
		{200, "PSI", probePSI},
		{201, "PSI trigger 2 s window", func(ctx context.Context) (bool, string) { return probePSITrigger(2000000) }},
		{202, "PSI trigger 500 ms window", func(ctx context.Context) (bool, string) { return probePSITrigger(500000) }},
		{203, "PSI short windows via user namespace", func(ctx context.Context) (bool, string) { return pressure.ProbeShortWindows(ctx, "") }},
		{204, "cgroup v1 vmpressure", probeVMPressure},
		{300, "memlock limit", probeMemlock},
		{301, "MADV_FREE", probeMadvFree},
		{302, "userfaultfd", probeUserfaultfd},
		{400, "io_uring", probeIOUring},
		{600, "NVML", probeNVML},
	} {
		registerCheck(c)
	}
}

func probeCgroupLayout(ctx context.Context) (bool, string) {
	tree, err := cgroup.DefaultTree()
	if err != nil {
		return false, err.Error()
	}
	switch tree.Layout() {
	case cgroup.LayoutV2:
		return true, fmt.Sprintf("v2 (unified at %s)", tree.V2Root())
	case cgroup.LayoutHybrid:
		return true, fmt.Sprintf("hybrid (v1 controllers under %s, cgroup2 at %s for per-cgroup PSI)", tree.Root(), tree.V2Root())
	case cgroup.LayoutV1:
		return true, "v1 only (no cgroup2 mount: no per-cgroup PSI; vmpressure only)"
	}
	return false, "unknown layout"
}

// probeCgroupControl creates a uniquely named group, reports which controls it offers
// and where, and removes it.
func probeCgroupControl(ctx context.Context) (bool, string) {
	g, err := cgroup.New("doctor-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		return false, err.Error()
	}
	defer g.Remove()
	var have, lack []string
	note := func(name string, err error) {
		if err != nil {
			lack = append(lack, name)
		} else {
			have = append(have, name)
		}
	}
	_, _, err = g.MemoryLimit()
	note("memory", err)
	_, _, _, err = g.CPUMax()
	note("cpu quota", err)
	_, err = g.CPUWeight()
	note("cpu weight", err)
	_, err = g.IOWeight()
	note("io weight", err)
	_, err = g.PidsCurrent()
	note("pids", err)
	_, err = g.PressurePath("memory")
	note("memory.pressure", err)
	detail := "can create " + g.Name() + ": " + strings.Join(have, ", ")
	if len(lack) > 0 {
		detail += "; missing: " + strings.Join(lack, ", ")
	}
	return len(lack) == 0 || (len(have) > 0 && !contains(lack, "memory")), detail
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func probeMemoryLimit(ctx context.Context) (bool, string) {
	limit, src, err := cgroup.SelfMemoryLimit()
	if err != nil {
		return false, err.Error()
	}
	b, err := memory.ByteBudget(limit, 0)
	if err != nil {
		return false, fmt.Sprintf("%s from %s: %v", bytesize.Human(limit), src, err)
	}
	return true, fmt.Sprintf("%s from %s; default byte budget %s (a quarter)", bytesize.Human(limit), src, bytesize.Human(b))
}
