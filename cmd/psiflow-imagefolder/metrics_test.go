package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/metrics"
)

func TestMetricsFlag(t *testing.T) {
	root := writeFolder(t, 12)
	c, addr, err := parseCommand([]string{"-data", root, "-batch", "4", "-workers", "2", "-metrics", "127.0.0.1:0", "-resize", "48", "-crop", "32"})
	if err != nil || addr != "127.0.0.1:0" {
		t.Fatalf("parseCommand: %q, %v", addr, err)
	}
	set, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := runWith(ctx, c, protocol.NewEmitter(&out), set); err != nil {
		t.Fatal(err)
	}
	reg := set.Registry
	if n := testutil.ToFloat64(set.Decodes.Images()); n != 12 {
		t.Errorf("psiflow_decode_images_total = %v, want 12", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "psiflow_read_bytes_total" {
			for _, m := range mf.GetMetric() {
				found = found || m.GetCounter().GetValue() > 0
			}
		}
	}
	if !found {
		t.Error("no bytes read were counted")
	}
}
