package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeFiles is a fake cgroup tree: path (relative to the tree root) -> content. A path
// ending in "/" is an empty directory.
type fakeFiles map[string]string

// Fixture text as the kernel writes it (Linux 6.x), for a group "psiflow/job" and a
// process in "app" (v2: "/user.slice/app").
var (
	fakeV2 = fakeFiles{
		"cgroup.controllers":                    "cpuset cpu io memory hugetlb pids rdma misc\n",
		"cgroup.subtree_control":                "cpu memory pids\n",
		"user.slice/memory.max":                 "8589934592\n",
		"user.slice/app/memory.max":             "max\n",
		"user.slice/app/memory.pressure":        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"psiflow/cgroup.controllers":            "cpu io memory pids\n",
		"psiflow/cgroup.subtree_control":        "cpu io memory pids\n",
		"psiflow/job/cgroup.controllers":        "cpu io memory pids\n",
		"psiflow/job/cgroup.procs":              "",
		"psiflow/job/cgroup.kill":               "",
		"psiflow/job/memory.max":                "max\n",
		"psiflow/job/memory.high":               "max\n",
		"psiflow/job/memory.current":            "1048576000\n",
		"psiflow/job/memory.events":             "low 1\nhigh 22\nmax 3\noom 2\noom_kill 1\noom_group_kill 0\n",
		"psiflow/job/memory.pressure":           "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"psiflow/job/cpu.max":                   "max 100000\n",
		"psiflow/job/cpu.weight":                "100\n",
		"psiflow/job/cpu.stat":                  "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 12\nthrottled_usec 750000\nnr_bursts 0\nburst_usec 0\n",
		"psiflow/job/io.weight":                 "default 100\n",
		"psiflow/job/io.max":                    "",
		"psiflow/job/pids.max":                  "max\n",
		"psiflow/job/pids.current":              "7\n",
		"psiflow/job/pids.events":               "max 4\n",
		"proc/self/cgroup":                      "0::/user.slice/app\n",
		"proc/meminfo":                          "MemTotal:       24576000 kB\nMemFree:        1000 kB\n",
		"user.slice/app/cgroup.controllers":     "cpu io memory pids\n",
		"user.slice/app/cgroup.subtree_control": "\n",
		"psiflow/job/cgroup.subtree_control":    "\n",
		"user.slice/cgroup.subtree_control":     "memory\n",
		"user.slice/cgroup.controllers":         "cpu io memory pids\n",
		"psiflow/job/io.pressure":               "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"psiflow/job/cpu.pressure":              "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"user.slice/app/cgroup.procs":           "1234\n",
		"user.slice/app/memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"user.slice/app/cpu.stat":               "usage_usec 1\n",
		"user.slice/app/memory.current":         "4096\n",
	}

	// fakeHybrid is this project's machine: v1 controllers in their own hierarchies
	// (cpu and cpuacct separate), cgroup2 at unified/ with only hugetlb.
	fakeHybrid = fakeFiles{
		"unified/cgroup.controllers":                         "hugetlb\n",
		"unified/cgroup.subtree_control":                     "\n",
		"unified/psiflow/cgroup.controllers":                 "\n",
		"unified/psiflow/cgroup.subtree_control":             "\n",
		"unified/psiflow/job/cgroup.procs":                   "",
		"unified/psiflow/job/cgroup.kill":                    "",
		"unified/psiflow/job/cgroup.controllers":             "\n",
		"unified/psiflow/job/memory.pressure":                "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"unified/psiflow/job/cpu.stat":                       "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
		"unified/app/memory.pressure":                        "",
		"memory/app/memory.limit_in_bytes":                   "268435456\n",
		"memory/memory.limit_in_bytes":                       "9223372036854771712\n",
		"memory/psiflow/job/cgroup.procs":                    "",
		"memory/psiflow/job/memory.limit_in_bytes":           "9223372036854771712\n",
		"memory/psiflow/job/memory.soft_limit_in_bytes":      "9223372036854771712\n",
		"memory/psiflow/job/memory.usage_in_bytes":           "52428800\n",
		"memory/psiflow/job/memory.failcnt":                  "17\n",
		"memory/psiflow/job/memory.oom_control":              "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"memory/psiflow/job/memory.pressure_level":           "",
		"memory/psiflow/job/cgroup.event_control":            "",
		"cpu/psiflow/job/cgroup.procs":                       "",
		"cpu/psiflow/job/cpu.cfs_quota_us":                   "-1\n",
		"cpu/psiflow/job/cpu.cfs_period_us":                  "100000\n",
		"cpu/psiflow/job/cpu.shares":                         "1024\n",
		"cpu/psiflow/job/cpu.stat":                           "nr_periods 40\nnr_throttled 12\nthrottled_time 750000000\nnr_bursts 0\nburst_time 0\n",
		"cpuacct/psiflow/job/cgroup.procs":                   "",
		"cpuacct/psiflow/job/cpuacct.usage":                  "2500000000\n",
		"pids/psiflow/job/cgroup.procs":                      "",
		"pids/psiflow/job/pids.max":                          "max\n",
		"pids/psiflow/job/pids.current":                      "7\n",
		"pids/psiflow/job/pids.events":                       "max 4\n",
		"blkio/psiflow/job/cgroup.procs":                     "",
		"blkio/psiflow/job/blkio.throttle.read_bps_device":   "",
		"blkio/psiflow/job/blkio.throttle.read_iops_device":  "",
		"blkio/psiflow/job/blkio.throttle.write_bps_device":  "",
		"blkio/psiflow/job/blkio.throttle.write_iops_device": "",
		"blkio/psiflow/job/blkio.bfq.weight":                 "default 100\n",
		"cpuset/":                                            "",
		"systemd/":                                           "",
		"proc/self/cgroup":                                   "9:name=systemd:/\n8:pids:/\n7:blkio:/\n4:memory:/app\n2:cpuacct:/\n1:cpu:/\n0::/app\n",
		"proc/meminfo":                                       "MemTotal:       24576000 kB\n",
	}
)

// fakeV1 is fakeHybrid without the cgroup2 mount, with cpu and cpuacct co-mounted.
func fakeV1() fakeFiles {
	f := fakeFiles{}
	for k, v := range fakeHybrid {
		switch {
		case len(k) > 8 && k[:8] == "unified/":
		case len(k) > 4 && k[:4] == "cpu/":
			f["cpu,cpuacct/"+k[4:]] = v
		case len(k) > 8 && k[:8] == "cpuacct/":
			f["cpu,cpuacct/"+k[8:]] = v
		default:
			f[k] = v
		}
	}
	f["proc/self/cgroup"] = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n4:memory:/app\n2:cpu,cpuacct:/\n"
	return f
}

// buildFake writes files under a new temporary directory and returns the tree root
// (the fake proc is at <root>/proc).
func buildFake(t *testing.T, files fakeFiles) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if p[len(p)-1] == '/' {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// openFake builds a fake tree and opens it and its group "psiflow/job".
func openFake(t *testing.T, files fakeFiles) (*Tree, *Group, string) {
	t.Helper()
	root := buildFake(t, files)
	tree, err := OpenTree(root, WithProc(filepath.Join(root, "proc")))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.Open("psiflow/job")
	if err != nil {
		t.Fatal(err)
	}
	return tree, g, root
}

func readFake(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
