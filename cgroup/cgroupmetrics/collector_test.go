package cgroupmetrics

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/psiflow/psiflow/cgroup"
)

const psiText = "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0.50 avg60=0.20 avg300=0.05 total=1250000\n"

// v2Files is a pure v2 group "job" with every controller enabled.
var v2Files = map[string]string{
	"cgroup.controllers":     "cpu io memory pids\n",
	"cgroup.subtree_control": "cpu io memory pids\n",
	"job/cgroup.procs":       "",
	"job/memory.current":     "104857600\n",
	"job/memory.max":         "268435456\n",
	"job/memory.peak":        "209715200\n",
	"job/memory.stat": "anon 52428800\nfile 41943040\nkernel 4194304\nshmem 1048576\npgmajfault 12\n" +
		"workingset_refault_anon 0\nworkingset_refault_file 345\npgscan_kswapd 1000\npgsteal_kswapd 900\npgscan_direct 50\npgsteal_direct 40\n",
	"job/memory.events":   "low 0\nhigh 7\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
	"job/memory.pressure": psiText,
	"job/cpu.pressure":    "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	"job/io.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=3000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\n",
	"job/cpu.max":         "50000 100000\n",
	"job/cpu.stat":        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 12\nthrottled_usec 750000\n",
	"job/pids.current":    "7\n",
	"job/pids.max":        "max\n",
	"job/pids.events":     "max 4\n",
}

// hybridFiles is this project's machine: v1 controllers, cgroup2 at unified/ with no
// controllers but memory.pressure and cpu.stat's usage.
var hybridFiles = map[string]string{
	"unified/cgroup.controllers":           "hugetlb\n",
	"unified/job/cgroup.procs":             "",
	"unified/job/memory.pressure":          psiText,
	"memory/job/cgroup.procs":              "",
	"memory/job/memory.usage_in_bytes":     "52428800\n",
	"memory/job/memory.limit_in_bytes":     "9223372036854771712\n",
	"memory/job/memory.max_usage_in_bytes": "62914560\n",
	"memory/job/memory.failcnt":            "17\n",
	"memory/job/memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
	"memory/job/memory.stat": "cache 1\nrss 2\ntotal_cache 41943040\ntotal_rss 10485760\ntotal_shmem 0\ntotal_pgmajfault 150\n" +
		"total_workingset_refault_anon 0\ntotal_workingset_refault_file 33935\n",
	"cpu/job/cgroup.procs":      "",
	"cpu/job/cpu.stat":          "nr_periods 10\nnr_throttled 2\nthrottled_time 1500000000\n",
	"cpuacct/job/cgroup.procs":  "",
	"cpuacct/job/cpuacct.usage": "3000000000\n",
	"pids/job/cgroup.procs":     "",
	"pids/job/pids.current":     "3\n",
	"pids/job/pids.max":         "100\n",
	"pids/job/pids.events":      "max 0\n",
}

func fakeGroup(t *testing.T, files map[string]string) *cgroup.Group {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := cgroup.OpenTree(root, cgroup.WithProc(filepath.Join(root, "proc")))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.Open("job")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// scrape gathers c and returns "name{labels}" -> value, with the cgroup label dropped.
func scrape(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.CollectAndLint(c); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", err, probs)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[key(mf.GetName(), m)] = value(m)
		}
	}
	return out
}

func key(name string, m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		if l.GetName() != "cgroup" {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
	}
	sort.Strings(ls)
	if len(ls) == 0 {
		return name
	}
	return name + "{" + strings.Join(ls, ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return -1
}

func check(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s missing", k)
		case g != v:
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, got[k])
		}
	}
}

func TestV2(t *testing.T) {
	got := scrape(t, New(fakeGroup(t, v2Files)))
	check(t, got, map[string]float64{
		"psiflow_cgroup_memory_current_bytes":                                      104857600,
		"psiflow_cgroup_memory_limit_bytes":                                        268435456,
		"psiflow_cgroup_memory_peak_bytes":                                         209715200,
		"psiflow_cgroup_memory_bytes{type=anon}":                                   52428800,
		"psiflow_cgroup_memory_bytes{type=file}":                                   41943040,
		"psiflow_cgroup_memory_bytes{type=kernel}":                                 4194304,
		"psiflow_cgroup_memory_bytes{type=shmem}":                                  1048576,
		"psiflow_cgroup_memory_major_faults_total":                                 12,
		"psiflow_cgroup_memory_workingset_refaults_total{type=anon}":               0,
		"psiflow_cgroup_memory_workingset_refaults_total{type=file}":               345,
		"psiflow_cgroup_memory_scanned_pages_total{reclaimer=kswapd}":              1000,
		"psiflow_cgroup_memory_reclaimed_pages_total{reclaimer=kswapd}":            900,
		"psiflow_cgroup_memory_scanned_pages_total{reclaimer=direct}":              50,
		"psiflow_cgroup_memory_reclaimed_pages_total{reclaimer=direct}":            40,
		"psiflow_cgroup_memory_events_total{event=low}":                            0,
		"psiflow_cgroup_memory_events_total{event=high}":                           7,
		"psiflow_cgroup_memory_events_total{event=max}":                            3,
		"psiflow_cgroup_memory_events_total{event=oom}":                            1,
		"psiflow_cgroup_memory_events_total{event=oom_kill}":                       1,
		"psiflow_cgroup_memory_events_total{event=oom_group_kill}":                 0,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=some,resource=memory}": 2.5,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=full,resource=memory}": 1.25,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=some,resource=cpu}":    1,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=full,resource=cpu}":    0,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=some,resource=io}":     3,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=full,resource=io}":     2,
		"psiflow_cgroup_cpu_usage_seconds_total":                                   2.5,
		"psiflow_cgroup_cpu_periods_total":                                         40,
		"psiflow_cgroup_cpu_throttled_periods_total":                               12,
		"psiflow_cgroup_cpu_throttled_seconds_total":                               0.75,
		"psiflow_cgroup_pids_current":                                              7,
		"psiflow_cgroup_pids_max_events_total":                                     4,
	})
}

func TestHybrid(t *testing.T) {
	got := scrape(t, New(fakeGroup(t, hybridFiles)))
	check(t, got, map[string]float64{
		"psiflow_cgroup_memory_current_bytes":                                      52428800,
		"psiflow_cgroup_memory_peak_bytes":                                         62914560,
		"psiflow_cgroup_memory_bytes{type=anon}":                                   10485760,
		"psiflow_cgroup_memory_bytes{type=file}":                                   41943040,
		"psiflow_cgroup_memory_bytes{type=shmem}":                                  0,
		"psiflow_cgroup_memory_major_faults_total":                                 150,
		"psiflow_cgroup_memory_workingset_refaults_total{type=anon}":               0,
		"psiflow_cgroup_memory_workingset_refaults_total{type=file}":               33935,
		"psiflow_cgroup_memory_events_total{event=max}":                            17,
		"psiflow_cgroup_memory_events_total{event=oom_kill}":                       2,
		"psiflow_cgroup_memory_under_oom":                                          0,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=some,resource=memory}": 2.5,
		"psiflow_cgroup_pressure_stalled_seconds_total{kind=full,resource=memory}": 1.25,
		"psiflow_cgroup_cpu_usage_seconds_total":                                   3,
		"psiflow_cgroup_cpu_periods_total":                                         10,
		"psiflow_cgroup_cpu_throttled_periods_total":                               2,
		"psiflow_cgroup_cpu_throttled_seconds_total":                               1.5,
		"psiflow_cgroup_pids_current":                                              3,
		"psiflow_cgroup_pids_limit":                                                100,
		"psiflow_cgroup_pids_max_events_total":                                     0,
	})
}

func TestBadFileIsAnError(t *testing.T) {
	files := map[string]string{}
	for k, v := range v2Files {
		files[k] = v
	}
	files["job/memory.stat"] = "anon twelve\n"
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(fakeGroup(t, files)))
	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "memory.stat line 1") {
		t.Fatalf("Gather error = %v, want one naming memory.stat line 1", err)
	}
	if len(mfs) == 0 {
		t.Error("one bad file dropped every other metric")
	}
}

func TestPSIReadAtMostEveryInterval(t *testing.T) {
	g := fakeGroup(t, v2Files)
	c := New(g)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	k := "psiflow_cgroup_pressure_stalled_seconds_total{kind=some,resource=memory}"
	if got := scrape(t, c)[k]; got != 2.5 {
		t.Fatalf("%s = %v", k, got)
	}
	if err := os.WriteFile(filepath.Join(g.V2Dir(), "memory.pressure"), []byte(strings.Replace(psiText, "total=2500000", "total=4000000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(MinPSIInterval / 2)
	if got := scrape(t, c)[k]; got != 2.5 {
		t.Errorf("within MinPSIInterval: %s = %v, want the cached 2.5", k, got)
	}
	now = now.Add(MinPSIInterval)
	if got := scrape(t, c)[k]; got != 4 {
		t.Errorf("after MinPSIInterval: %s = %v, want 4", k, got)
	}
}

func TestHost(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vmstat"), []byte("nr_free_pages 1\npgsteal_kswapd 5\npgscan_kswapd 9\npgsteal_direct 1\npgscan_direct 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, scrape(t, NewHost(dir)), map[string]float64{
		"psiflow_host_memory_scanned_pages_total{reclaimer=kswapd}":   9,
		"psiflow_host_memory_reclaimed_pages_total{reclaimer=kswapd}": 5,
		"psiflow_host_memory_scanned_pages_total{reclaimer=direct}":   2,
		"psiflow_host_memory_reclaimed_pages_total{reclaimer=direct}": 1,
	})
}

// TestSelf scrapes this process's real cgroup: memory use is always known on Linux
// (v2 memory.current or v1 memory.usage_in_bytes) and positive.
func TestSelf(t *testing.T) {
	g, err := cgroup.Self()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	got := scrape(t, New(g))
	if v := got["psiflow_cgroup_memory_current_bytes"]; v <= 0 {
		t.Errorf("memory_current_bytes = %v (present %v)", v, v != 0)
	}
	for k, v := range got {
		if v < 0 {
			t.Errorf("%s = %v < 0", k, v)
		}
	}
	t.Logf("%d series from cgroup %s (%s)", len(got), g.Name(), g.Layout())
}
