package demo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunDeliversEverySampleInOrder(t *testing.T) {
	cfg := Config{Items: 500, ItemBytes: 4096, Workers: 3, BatchSize: 16, Budget: 20 * 4096 * 5, Seed: 7}
	var snaps int
	sum, err := Run(context.Background(), cfg, time.Millisecond, func(Snapshot) { snaps++ })
	if err != nil {
		t.Fatal(err)
	}
	// A batch waits at most 50 ms for its samples: on a loaded machine some are
	// short, so 32 (500/16 rounded up) is the least, not the exact count.
	if sum.Items != 500 || sum.Batches < 32 || sum.Batches > 500 || sum.Bytes != 500*4096 {
		t.Fatalf("summary %+v, want 500 items in at least 32 batches", sum)
	}
	if sum.Peak > cfg.Budget || sum.Peak == 0 {
		t.Fatalf("peak budget %d of %d", sum.Peak, cfg.Budget)
	}
	if len(sum.Stages) != 4 {
		t.Fatalf("stages %+v", sum.Stages)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := DefaultConfig()
	cfg.Items = 1 << 30
	cfg.ItemBytes = 1024
	cfg.Budget = 1 << 20
	_, err := Run(ctx, cfg, time.Millisecond, func(s Snapshot) {
		if s.Items > 100 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Items = 0 }, "items 0"},
		{func(c *Config) { c.ItemBytes = 1 }, "item size 1"},
		{func(c *Config) { c.Workers = 0 }, "workers 0"},
		{func(c *Config) { c.BatchSize = 0 }, "batch size 0"},
		{func(c *Config) { c.Budget = 10 }, "budget 10 bytes"},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v; want %q", err, tc.want)
		}
	}
}
