package pause

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegister(t *testing.T) {
	c, err := New(Config{Floor: mib, Hysteresis: 1, Calm: Forever})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	unregister, err := Register(reg, c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.Observe(Reading{At: now.Add(-3 * time.Second)})
	c.Observe(Reading{At: now.Add(-time.Second), Current: 2 * mib})
	c.Observe(Reading{At: now.Add(-500 * time.Millisecond)}) // paused again, in progress
	want := `
# HELP psiflow_pauses_total Pauses of the loader below its floor.
# TYPE psiflow_pauses_total counter
psiflow_pauses_total 2
# HELP psiflow_paused 1 while the loader is paused because its cgroup leaves it less than its floor.
# TYPE psiflow_paused gauge
psiflow_paused 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "psiflow_pauses_total", "psiflow_paused"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "psiflow_paused_seconds_total" {
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v < 2.5 || v > 60 {
				t.Errorf("paused seconds %v, want 2 s of the first pause and 0.5 s or more of the second", v)
			}
		}
	}
	if _, err := Register(reg, c); err == nil {
		t.Error("registering twice succeeded")
	}
	unregister()
	if _, err := Register(reg, c); err != nil {
		t.Errorf("after unregister: %v", err)
	}
}
