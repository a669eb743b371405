package pause

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers psiflow_paused (1 while paused), psiflow_pauses_total and
// psiflow_paused_seconds_total (the pause in progress included) of c with reg, and
// returns a function that unregisters them. A collector already registered by the
// same controller's earlier run is an error.
func Register(reg prometheus.Registerer, c *Controller) (unregister func(), err error) {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "psiflow_paused",
			Help: "1 while the loader is paused because its cgroup leaves it less than its floor."}, func() float64 {
			if c.Paused() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "psiflow_pauses_total",
			Help: "Pauses of the loader below its floor."}, func() float64 {
			n, _ := c.Stats(time.Now())
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "psiflow_paused_seconds_total",
			Help: "Seconds the loader was paused below its floor, the pause in progress included."}, func() float64 {
			_, d := c.Stats(time.Now())
			return d.Seconds()
		}),
	}
	var done []prometheus.Collector
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, errors.Join(errors.New("pause: register metrics"), err)
		}
		done = append(done, col)
	}
	return func() {
		for _, d := range done {
			reg.Unregister(d)
		}
	}, nil
}
