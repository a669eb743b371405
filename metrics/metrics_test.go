package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/source"
)

func TestReads(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := metrics.NewReads(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveRead(source.BackendURing, 100, 20*time.Microsecond, nil)
	r.ObserveRead(source.BackendURing, 50, 3*time.Millisecond, nil)
	r.ObserveRead(source.BackendPread, 0, time.Millisecond, errors.New("EIO"))
	want := `
# HELP psiflow_read_bytes_total Bytes read from files and shards, by reader backend.
# TYPE psiflow_read_bytes_total counter
psiflow_read_bytes_total{backend="io_uring"} 150
psiflow_read_bytes_total{backend="pread"} 0
# HELP psiflow_read_errors_total Reads that failed, by reader backend.
# TYPE psiflow_read_errors_total counter
psiflow_read_errors_total{backend="io_uring"} 0
psiflow_read_errors_total{backend="pread"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "psiflow_read_bytes_total", "psiflow_read_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r.Latency(), "psiflow_read_duration_seconds"); n != 2 {
		t.Errorf("latency series %d, want one per backend", n)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", err, probs)
	}
	if _, err := metrics.NewReads(reg); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("second NewReads on one registry: %v", err)
	}
}

func TestDecodes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d, err := metrics.NewDecodes(reg)
	if err != nil {
		t.Fatal(err)
	}
	d.ObserveDecode(1000, 3*224*224, time.Millisecond, nil)
	d.ObserveDecode(500, 0, time.Millisecond, errors.New("truncated"))
	want := `
# HELP psiflow_decode_errors_total Images that failed to decode (stopped the stage, or were skipped under a skip policy).
# TYPE psiflow_decode_errors_total counter
psiflow_decode_errors_total 1
# HELP psiflow_decode_images_total Images decoded and transformed.
# TYPE psiflow_decode_images_total counter
psiflow_decode_images_total 1
# HELP psiflow_decode_input_bytes_total Encoded bytes of every image given to a decode stage.
# TYPE psiflow_decode_input_bytes_total counter
psiflow_decode_input_bytes_total 1500
# HELP psiflow_decode_output_bytes_total Tensor bytes produced by decode stages.
# TYPE psiflow_decode_output_bytes_total counter
psiflow_decode_output_bytes_total 150528
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "psiflow_decode_errors_total", "psiflow_decode_images_total",
		"psiflow_decode_input_bytes_total", "psiflow_decode_output_bytes_total"); err != nil {
		t.Error(err)
	}
}

func TestServeAndClose(t *testing.T) {
	set, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	set.Reads.ObserveRead(source.BackendPread, 4096, time.Millisecond, nil)
	srv, err := set.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`psiflow_read_bytes_total{backend="pread"} 4096`, "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if set.NoCgroup == nil && !strings.Contains(string(body), "psiflow_cgroup_memory_current_bytes{") {
		t.Error("scrape lacks the cgroup's memory")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(srv.URL()); err == nil {
		t.Error("still serving after Close")
	}
	if _, err := metrics.Serve("256.0.0.1:1", set.Registry); err == nil || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Errorf("bad address: %v", err)
	}
}

// The data-path cost of metrics: one read and one decode observed per sample.
func BenchmarkObserveRead(b *testing.B) {
	r, err := metrics.NewReads(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.ObserveRead(source.BackendURing, 110_000, 40*time.Microsecond, nil)
		}
	})
}

func BenchmarkObserveDecode(b *testing.B) {
	d, err := metrics.NewDecodes(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d.ObserveDecode(110_000, 3*224*224, time.Millisecond, nil)
		}
	})
}

// BenchmarkScrape is the cost of one scrape of a Set (Go runtime, process and cgroup
// collectors, reads and decodes), paid on the scraping goroutine, not the data path.
func BenchmarkScrape(b *testing.B) {
	set, err := metrics.New()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := set.Registry.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
