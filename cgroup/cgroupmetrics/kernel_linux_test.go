package cgroupmetrics

import (
	"fmt"
	"os"
	"testing"

	"github.com/psiflow/psiflow/cgroup"
)

// TestRealGroupWithLimit creates a real cgroup with a memory limit and reads it back
// through the collector, on whatever layout this host has.
func TestRealGroupWithLimit(t *testing.T) {
	name := fmt.Sprintf("cgroupmetrics-test-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		t.Skipf("cannot create cgroup %s here: %v", name, err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("remove cgroup %s: %v", name, err)
		}
	})
	if err := g.SetMemoryMax(256 << 20); err != nil {
		t.Skipf("no memory controller for %s: %v", name, err)
	}
	got := scrape(t, New(g))
	if v, ok := got["psiflow_cgroup_memory_limit_bytes"]; !ok || v != 256<<20 {
		t.Errorf("memory_limit_bytes = %v (present %v), want %d", v, ok, 256<<20)
	}
	if v, ok := got["psiflow_cgroup_memory_current_bytes"]; !ok || v < 0 {
		t.Errorf("memory_current_bytes = %v (present %v)", v, ok)
	}
	if _, ok := got["psiflow_cgroup_memory_events_total{event=oom_kill}"]; !ok {
		t.Error("no oom_kill counter")
	}
	t.Logf("%d series for %s (%s)", len(got), g.Name(), g.Layout())
}
