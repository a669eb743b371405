package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/metrics"
)

// serveMetrics serves g at http://addr/metrics until Close (see metrics.Serve).
func serveMetrics(addr string, g prometheus.Gatherer) (*metrics.Server, error) {
	return metrics.Serve(addr, g)
}
