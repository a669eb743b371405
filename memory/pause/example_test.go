package pause_test

import (
	"fmt"
	"time"

	"github.com/psiflow/psiflow/memory/pause"
)

// A trainer's peak: the cgroup leaves the loader 12 MiB for 5 s, then 90 MiB;
// the loader resumes once that has lasted pause.DefaultCalm.
func ExampleController() {
	c, err := pause.New(pause.Config{Floor: 32 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := pause.NewGate(nil)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i, left := range []int64{90 << 20, 12 << 20, 12 << 20, 90 << 20, 90 << 20} {
		ev, ok := c.Observe(pause.Reading{At: t0.Add(time.Duration(i) * 2500 * time.Millisecond), Current: left,
			Limit: 256 << 20, Others: 256<<20 - 16<<20 - left, Reserve: 16 << 20})
		if !ok {
			continue
		}
		switch ev.Kind {
		case pause.Paused:
			g.Pause()
		case pause.Resumed:
			g.Resume()
		}
		fmt.Println(ev.Message())
	}
	n, d := c.Stats(t0.Add(10 * time.Second))
	fmt.Println(n, "pause,", d, "paused; gate paused now:", g.Paused())
	// Output:
	// paused: the cgroup leaves the loader 12 MiB (limit 256 MiB − others 228 MiB − reserve 16 MiB), below its floor of 32 MiB: no reads until it leaves 40 MiB, or its floor for 1s; a pause longer than 10m0s ends the run
	// resumed after a pause of 7.5s: the cgroup leaves the loader 90 MiB (limit 256 MiB − others 150 MiB − reserve 16 MiB), above its floor of 32 MiB
	// 1 pause, 7.5s paused; gate paused now: false
}
