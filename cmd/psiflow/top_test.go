package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/metrics"
)

// fam builds a family of one counter or gauge per label set.
func fam(name string, gauge bool, samples map[string]float64) *dto.MetricFamily {
	f := &dto.MetricFamily{Name: &name}
	for ls, v := range samples {
		m := &dto.Metric{}
		if ls != "" {
			for _, kv := range strings.Split(ls, ",") {
				k, val, _ := strings.Cut(kv, "=")
				m.Label = append(m.Label, &dto.LabelPair{Name: &k, Value: &val})
			}
		}
		if gauge {
			m.Gauge = &dto.Gauge{Value: &v}
		} else {
			m.Counter = &dto.Counter{Value: &v}
		}
		f.Metric = append(f.Metric, m)
	}
	return f
}

func scrapeOf(at time.Time, fams ...*dto.MetricFamily) scrape {
	s := scrape{at: at, fam: map[string]*dto.MetricFamily{}}
	for _, f := range fams {
		s.fam[f.GetName()] = f
	}
	return s
}

func TestTopViewRatesAndBottleneck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	dec, rd, snk := "graph=g,kind=stage,stage=decode", "graph=g,kind=source,stage=read", "graph=g,kind=sink,stage=consume"
	workers := fam("psiflow_stage_workers", true, map[string]float64{dec: 4, rd: 1, snk: 1})
	a := scrapeOf(t0,
		fam("psiflow_decode_images_total", false, map[string]float64{"": 1000}),
		fam("psiflow_read_bytes_total", false, map[string]float64{"backend=io_uring": 1 << 20, "backend=pread": 0}),
		workers,
		fam("psiflow_stage_items_out_total", false, map[string]float64{dec: 1000, rd: 1000}),
		fam("psiflow_stage_items_in_total", false, map[string]float64{snk: 10}),
		fam("psiflow_stage_busy_seconds_total", false, map[string]float64{dec: 10, rd: 1, snk: 0}),
		fam("psiflow_cgroup_pressure_stalled_seconds_total", false, map[string]float64{"kind=full,resource=memory": 5}),
	)
	b := scrapeOf(t0.Add(2*time.Second),
		fam("psiflow_decode_images_total", false, map[string]float64{"": 1400}),
		fam("psiflow_read_bytes_total", false, map[string]float64{"backend=io_uring": 5 << 20, "backend=pread": 0}),
		workers,
		fam("psiflow_stage_items_out_total", false, map[string]float64{dec: 1400, rd: 1410}),
		fam("psiflow_stage_items_in_total", false, map[string]float64{snk: 16}),
		fam("psiflow_stage_busy_seconds_total", false, map[string]float64{dec: 16, rd: 1.5, snk: 0.1}),
		fam("psiflow_budget_in_use_bytes", true, map[string]float64{"graph=g": 8 << 20}),
		fam("psiflow_budget_limit_bytes", true, map[string]float64{"graph=g": 32 << 20}),
		fam("psiflow_pressure_level", true, map[string]float64{"": 2}),
		fam("psiflow_cgroup_memory_current_bytes", true, map[string]float64{"cgroup=x": 192 << 20}),
		fam("psiflow_cgroup_memory_limit_bytes", true, map[string]float64{"cgroup=x": 256 << 20}),
		fam("psiflow_cgroup_pressure_stalled_seconds_total", false, map[string]float64{"kind=full,resource=memory": 5.5}),
	)
	v := buildView(a, b)
	if v.samplesPerSec != 200 || v.readBps != 2<<20 {
		t.Errorf("samples/s %v, read B/s %v; want 200 and %d", v.samplesPerSec, v.readBps, 2<<20)
	}
	if v.bottleneck != "decode" {
		t.Errorf("bottleneck %q, want decode (busy 6 s over 2 s on 4 workers = 75%%)", v.bottleneck)
	}
	if len(v.stages) != 3 || v.stages[0].name != "read" || v.stages[2].name != "consume" {
		t.Fatalf("stages %+v: want read, decode, consume", v.stages)
	}
	if d := v.stages[1]; d.busy != 0.75 || d.outPerSec != 200 {
		t.Errorf("decode row %+v", d)
	}
	if c := v.stages[2]; c.outPerSec != 3 {
		t.Errorf("sink rate %v batches/s, want 3", c.outPerSec)
	}
	if got := v.psi["memory full"]; got != 0.25 {
		t.Errorf("memory full pressure %v, want 0.25", got)
	}
	var out bytes.Buffer
	v.write(&out, "http://x/metrics")
	for _, want := range []string{"200 samples/s", "read 2 MiB/s", "bottleneck decode", "budget   8 MiB / 32 MiB (25%)",
		"pressure full", "memory   192 MiB of 256 MiB (75%)", "memory full 25.0%", "decode *"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("view lacks %q:\n%s", want, out.String())
		}
	}
	// A counter that went down (a new graph for the next epoch) counts from zero.
	c := scrapeOf(t0.Add(3*time.Second), fam("psiflow_decode_images_total", false, map[string]float64{"": 50}))
	if v := buildView(b, c); v.samplesPerSec != 50 {
		t.Errorf("after a reset: %v samples/s, want 50", v.samplesPerSec)
	}
}

func TestTopOnceAgainstAnEndpoint(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := flow.New("scraped", flow.WithBudget(1<<20))
	flow.Collect(flow.FromSlice(g, "src", []int{1, 2, 3}), "sink", new([]int))
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(g.Collector())
	srv, err := metrics.Serve("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"top", "-once", "-interval", "50ms", srv.Addr()}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"psiflow top  " + srv.URL(), "budget   0 B / 1 MiB (0%)", "STAGE", "src", "sink"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Error("escape codes written to a non-terminal")
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"top", "-once", "127.0.0.1:1"}); code == 0 || !strings.Contains(out.String(), "127.0.0.1:1") {
		t.Errorf("top on a closed port: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"top"}); code == 0 || !strings.Contains(out.String(), "one address") {
		t.Errorf("top without an address: exit %d: %s", code, out.String())
	}
}
