package cgroupmetrics_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/cgroup/cgroupmetrics"
)

// Register a collector over a cgroup and scrape it. Here the cgroup is a fake v2 tree;
// a program uses cgroupmetrics.RegisterSelf(reg) for its own cgroup.
func Example() {
	root, _ := os.MkdirTemp("", "cgroupmetrics-example")
	defer os.RemoveAll(root)
	files := map[string]string{
		"cgroup.controllers": "cpu io memory pids\n",
		"job/memory.current": "104857600\n",
		"job/memory.max":     "max\n", // unlimited: no psiflow_cgroup_memory_limit_bytes
		"job/memory.events":  "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\noom_group_kill 0\n",
	}
	for p, s := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(s), 0o644)
	}
	tree, err := cgroup.OpenTree(root)
	if err != nil {
		panic(err)
	}
	g, err := tree.Open("job")
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	if err := cgroupmetrics.Register(reg, g); err != nil {
		panic(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if mf.GetName() == "psiflow_cgroup_memory_events_total" && m.GetLabel()[1].GetValue() != "oom_kill" {
				continue
			}
			fmt.Println(mf.GetName(), v)
		}
	}
	// Output:
	// psiflow_cgroup_memory_current_bytes 1.048576e+08
	// psiflow_cgroup_memory_events_total 1
}
