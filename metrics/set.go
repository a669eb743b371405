package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/psiflow/psiflow/cgroup/cgroupmetrics"
)

// Set is one program's metrics: a registry with the Go runtime, process and cgroup
// collectors already in it, and the read and decode observers.
type Set struct {
	// Registry receives every psiflow collector; pass it to flow.WithRegistry,
	// memory.Config.Registerer and uma.Config.Registerer.
	Registry *prometheus.Registry
	// Reads is the observer for source.ReaderOptions.Observer.
	Reads *Reads
	// Decodes is the observer for decode.StageConfig.Observer.
	Decodes *Decodes
	// NoCgroup says why the cgroup metrics are absent (nil when present): no cgroups
	// on this host (not Linux) or the process's cgroup could not be found.
	NoCgroup error
}

// New returns a Set with the Go runtime (go_*), process (process_*), cgroup
// (psiflow_cgroup_*, psiflow_host_*), read and decode metrics registered.
func New() (*Set, error) {
	reg := prometheus.NewRegistry()
	s := &Set{Registry: reg}
	if err := register(reg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	s.NoCgroup = cgroupmetrics.RegisterSelf(reg)
	var err error
	if s.Reads, err = NewReads(reg); err != nil {
		return nil, err
	}
	if s.Decodes, err = NewDecodes(reg); err != nil {
		return nil, err
	}
	return s, nil
}

// Serve serves the Set's registry at http://addr/metrics; see [Serve].
func (s *Set) Serve(addr string) (*Server, error) { return Serve(addr, s.Registry) }

// register registers cs with reg, undoing what it did on the first failure.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("metrics: already registered with this registry: %w", err)
			}
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}
