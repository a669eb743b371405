package uma

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestDefaultChunkSize(t *testing.T) {
	tests := []struct{ mem, want int64 }{
		{0, 2 << 20},
		{1 << 30, 2 << 20},
		{16 << 30, 4 << 20},
		{24 << 30, 4 << 20},
		{32 << 30, 8 << 20},
		{1 << 40, 64 << 20},
	}
	for _, tt := range tests {
		if got := DefaultChunkSize(tt.mem); got != tt.want {
			t.Errorf("DefaultChunkSize(%d) = %d, want %d", tt.mem, got, tt.want)
		}
	}
}

func TestStartupValidation(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name           string
		stable, pinned int64
		limit          int64
		wantErr        []string
	}{
		{"fits", 10 * gib, 2 * gib, 16 * gib, nil},
		{"exactly fits", 14 * gib, 2 * gib, 16 * gib, nil},
		{"pinned pools push it over", 15 * gib, 2 * gib, 16 * gib,
			[]string{"stable bytes 16106127360 (15 GiB)", "memory limit 17179869184 (16 GiB, from memory.max)", "pinned pools 2147483648 (2 GiB)", "= 15032385536 (14 GiB)"}},
		{"negative", -1, 0, 16 * gib, []string{"must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{StableBytes: tt.stable, PinnedPoolBytes: tt.pinned,
				MemoryLimit: func() (int64, string, error) { return tt.limit, "memory.max", nil }})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	_, err := New(Config{MemoryLimit: func() (int64, string, error) { return 0, "", errors.New("no /proc") }})
	if err == nil || !strings.Contains(err.Error(), "no /proc") {
		t.Errorf("limit error not wrapped: %v", err)
	}
}

// TestStartupValidationDefaultsToHostMemory: without Config.MemoryLimit UMA validates
// against the host's physical memory (it reads no cgroup) and says so; the caller's
// limit, when given, is the one used.
func TestStartupValidationDefaultsToHostMemory(t *testing.T) {
	u, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	limit, src := u.MemoryLimit()
	total, err := hostMemory()
	if err != nil || limit <= 0 || limit > total || !strings.Contains(src, "sysinfo totalram") {
		t.Fatalf("limit %d from %q; want at most the host's %d (%v) from sysinfo", limit, src, total, err)
	}
	if _, err := New(Config{StableBytes: limit + 1}); !errors.Is(err, ErrDoesNotFit) || !strings.Contains(err.Error(), src) {
		t.Errorf("stable tier above the host's memory: %v", err)
	}
	given := func() (int64, string, error) { return 64 << 20, "the caller's cgroup", nil }
	if _, err := New(Config{StableBytes: 65 << 20, MemoryLimit: given}); !errors.Is(err, ErrDoesNotFit) || !strings.Contains(err.Error(), "the caller's cgroup") {
		t.Errorf("stable tier above the caller's limit: %v", err)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

func value(ms []*dto.Metric, label string) float64 {
	for _, m := range ms {
		if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.Registerer = reg
	u, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil {
		t.Error("a second UMA on the same registerer was accepted")
	}
	var src patternRehydrate
	a, err := u.NewArena("m", 4*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	s, err := a.AcquireStable(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkPreemptible(ctx, 1); err != nil {
		t.Fatal(err)
	}
	takeByKernel(t, u, a.span(1))
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkPreemptible(ctx, 0.5); err != nil {
		t.Fatal(err)
	}
	m := gather(t, reg)
	cs := float64(u.ChunkSize())
	checks := []struct {
		name, label string
		want        float64
	}{
		{"psiflow_uma_stable_bytes", "total", float64(cfg.StableBytes)},
		{"psiflow_uma_stable_bytes", "used", cs},
		{"psiflow_uma_preemptible_bytes", "total", 3 * cs},
		{"psiflow_uma_preemptible_bytes", "marked", 2 * cs},
		{"psiflow_uma_chunks", "PREEMPTIBLE", 2},
		{"psiflow_uma_chunks", "STABLE", 1},
		{"psiflow_uma_chunks", "HOT", 1},
		{"psiflow_uma_bytes", "PREEMPTIBLE", 2 * cs},
		{"psiflow_uma_bytes", "STABLE", cs},
		{"psiflow_uma_bytes", "HOT", cs},
		{"psiflow_uma_bytes", "EVICTED", 0},
		{"psiflow_uma_faults_total", "", 1},
		{"psiflow_uma_faults_per_second", "", 1.0 / 60},
		{"psiflow_uma_rehydrations_total", "", 5},
		{"psiflow_uma_rehydrate_seconds", "", 5},
		{"psiflow_uma_enable_preemptible", "", 1},
		{"psiflow_uma_mlock_enabled", "", 1},
		{"psiflow_uma_leases", "stable", 1},
	}
	for _, c := range checks {
		if got := value(m[c.name], c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	if _, ok := m["psiflow_uma_ledger_version"]; !ok {
		t.Error("no psiflow_uma_ledger_version")
	}
	u.SetPreemptible(false)
	if got := value(gather(t, reg)["psiflow_uma_enable_preemptible"], ""); got != 0 {
		t.Errorf("enable_preemptible after SetPreemptible(false) = %v", got)
	}
	s.Release()
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if len(gather(t, reg)) != 0 {
		t.Error("Close left metrics registered")
	}
}

func TestCloseWithLeases(t *testing.T) {
	u, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	a, err := u.NewArena("busy", u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Lease(context.Background(), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = u.Close()
	if !errors.Is(err, ErrLeased) || !strings.Contains(err.Error(), `"busy" holds 1 byte`) {
		t.Fatalf("Close with a lease: %v", err)
	}
	l.Release()
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lease(context.Background(), 0, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("lease after close: %v", err)
	}
	if _, err := u.NewArena("x", 1, ArenaOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("arena after close: %v", err)
	}
}
