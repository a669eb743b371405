package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves a registry's metrics at /metrics for Prometheus to scrape.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// serveMetrics listens on addr (host:port; port 0 picks one) and serves reg
// at /metrics until Close.
func serveMetrics(addr string, reg *prometheus.Registry) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// URL is where the metrics are served.
func (m *metricsServer) URL() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// Close stops the server and waits for it to end.
func (m *metricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
