//go:build linux

package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

type result struct {
	name  string
	bytes int64 // bytes read by the last run
	gbps  []float64
	cpuGB []float64 // CPU seconds per GB
}

func (r *result) add(bytes int64, wall, cpu time.Duration) {
	r.bytes = bytes
	gb := float64(bytes) / 1e9
	r.gbps = append(r.gbps, gb/wall.Seconds())
	r.cpuGB = append(r.cpuGB, cpu.Seconds()/gb)
}

func med(v []float64) (m, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2], s[0], s[len(s)-1]
}

type caseReport struct {
	name string
	res  []*result
}

func summarize(cases []caseReport) {
	fmt.Println("## goals")
	for _, c := range cases {
		var bestFio, bestOurs *result
		var bestFioV, bestOursV float64
		for _, r := range c.res {
			m, _, _ := med(r.gbps)
			switch {
			case strings.HasPrefix(r.name, "fio"):
				if m > bestFioV {
					bestFio, bestFioV = r, m
				}
			case strings.Contains(r.name, "io_uring"):
				if m > bestOursV {
					bestOurs, bestOursV = r, m
				}
			}
		}
		if bestOurs != nil && bestFio != nil {
			ratio := bestOursV / bestFioV
			fmt.Printf("%-20s throughput: best psiflow io_uring (%s) %.2f GB/s = %.2f× best fio (%s, %.2f GB/s): goal ≥ 0.9× %s\n",
				c.name, bestOurs.name, bestOursV, ratio, bestFio.name, bestFioV, verdict(ratio >= 0.9))
			// On a shared, CPU-bound machine throughput follows the CPU share a
			// reader gets; bytes per CPU-second compare the work each one does.
			uc, _, _ := med(bestOurs.cpuGB)
			fc, _, _ := med(bestFio.cpuGB)
			fmt.Printf("%-20s efficiency: %.1f GB per CPU-second vs %.1f for that fio engine (%.2f×)\n", c.name, 1/uc, 1/fc, fc/uc)
		}
		chainedGoal(c)
		// CPU per GB: each io_uring contender against the pread one in the same mode.
		for _, u := range c.res {
			if strings.HasPrefix(u.name, "fio") || !strings.Contains(u.name, "io_uring") {
				continue
			}
			direct := strings.Contains(u.name, "O_DIRECT")
			for _, p := range c.res {
				if strings.HasPrefix(p.name, "fio") || !strings.Contains(p.name, "pread") || strings.Contains(p.name, "O_DIRECT") != direct {
					continue
				}
				uc, _, _ := med(u.cpuGB)
				pc, _, _ := med(p.cpuGB)
				fmt.Printf("%-20s CPU: %s %.3f s/GB vs %s %.3f s/GB: goal below pread %s\n", c.name, u.name, uc, p.name, pc, verdict(uc < pc))
			}
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

// chainedGoal prints, for the small-file case, the per-round ratios of the
// chained io_uring contender against the best fio engine of the same round
// (throughput, goal ≥ 1.0×) and against the pread contender of the same mode
// (CPU per GB, goal ≤ 0.7×), buffered and O_DIRECT.
func chainedGoal(c caseReport) {
	for _, mode := range []string{"", " O_DIRECT"} {
		var chained, pread, kernelWait *result
		var fios []*result
		for _, r := range c.res {
			if strings.HasSuffix(r.name, "O_DIRECT") != (mode != "") {
				continue
			}
			switch {
			case strings.Contains(r.name, "io_uring chained"):
				chained = r
			case strings.Contains(r.name, "io_uring kernel-wait chained"):
				kernelWait = r
			case strings.Contains(r.name, "pread") && !strings.HasPrefix(r.name, "fio"):
				pread = r
			case strings.HasPrefix(r.name, "fio"):
				fios = append(fios, r)
			}
		}
		if chained == nil || pread == nil {
			continue
		}
		var tput, cpu []float64
		for i := range chained.gbps {
			cpu = append(cpu, chained.cpuGB[i]/pread.cpuGB[i])
			best := 0.0
			for _, f := range fios {
				best = max(best, f.gbps[i])
			}
			if best > 0 {
				tput = append(tput, chained.gbps[i]/best)
			}
		}
		name := "buffered"
		if mode != "" {
			name = "O_DIRECT"
		}
		if len(tput) > 0 {
			m, lo, hi := med(tput)
			fmt.Printf("%-20s chained %s: throughput ÷ best fio of the same round %.2f× [%.2f–%.2f]: goal ≥ 1.0× %s\n", c.name, name, m, lo, hi, verdict(m >= 1))
		}
		m, lo, hi := med(cpu)
		fmt.Printf("%-20s chained %s: CPU per GB ÷ pread's of the same round %.2f× [%.2f–%.2f]: goal ≤ 0.7× %s\n", c.name, name, m, lo, hi, verdict(m <= 0.7))
		if kernelWait != nil {
			var kw, kwCPU []float64
			for i := range chained.gbps {
				kw = append(kw, chained.gbps[i]/kernelWait.gbps[i])
				kwCPU = append(kwCPU, chained.cpuGB[i]/kernelWait.cpuGB[i])
			}
			m, lo, hi := med(kw)
			cm, clo, chi := med(kwCPU)
			kp := make([]float64, len(kernelWait.cpuGB))
			for i := range kp {
				kp[i] = kernelWait.cpuGB[i] / pread.cpuGB[i]
			}
			pm, plo, phi := med(kp)
			fmt.Printf("%-20s chained %s, poller wait ÷ kernel wait, same round: throughput %.2f× [%.2f–%.2f], CPU per GB %.2f× [%.2f–%.2f]; kernel wait's CPU per GB ÷ pread's %.2f× [%.2f–%.2f]\n",
				c.name, name, m, lo, hi, cm, clo, chi, pm, plo, phi)
		}
	}
}
