//go:build linux

package pressure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

// drain waits for a source to end after cancel and returns its error.
func drain(t *testing.T, s Source) error {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-s.Events():
			if !ok {
				return s.Err()
			}
		case <-deadline:
			t.Fatalf("source %q still running 10s after cancel", s.Describe())
		}
	}
}

func selfPSIOrSkip(t *testing.T) string {
	t.Helper()
	path, reason := SelfPressurePath("memory")
	if _, err := ReadPSI(path); err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "no PSI here (%s): %v", reason, err)
	}
	return path
}

func TestOpenTriggersEndsOnCancel(t *testing.T) {
	path := selfPSIOrSkip(t)
	ctx, cancel := context.WithCancel(context.Background())
	src, err := OpenTriggers(ctx, TriggerConfig{Path: path, Triggers: DefaultTriggers})
	if err != nil {
		t.Fatal(err)
	}
	if d := src.Describe(); !strings.Contains(d, `"some 100000 2000000"`) || !strings.Contains(d, path) {
		t.Fatalf("Describe = %q", d)
	}
	cancel()
	if err := drain(t, src); err != nil {
		t.Fatalf("Err after cancel = %v, want nil", err)
	}
}

func TestOpenTriggersValidatesFirst(t *testing.T) {
	path := selfPSIOrSkip(t)
	if priv, _ := HasCapSysResource(); priv {
		t.Skip("process holds CAP_SYS_RESOURCE: any window is allowed")
	}
	_, err := OpenTriggers(context.Background(), TriggerConfig{Path: path, Triggers: []Trigger{{Stall: 50 * time.Millisecond, Window: time.Second}}})
	if !errors.Is(err, ErrNeedsPrivilege) || !strings.Contains(err.Error(), "multiple of 2s") {
		t.Fatalf("1s window without UserNS: %v", err)
	}
	_, err = OpenTriggers(context.Background(), TriggerConfig{Path: path, Triggers: []Trigger{{Stall: 3 * time.Second, Window: 2 * time.Second}}})
	if err == nil || !strings.Contains(err.Error(), "exceeds the window") {
		t.Fatalf("stall over window: %v", err)
	}
}

// TestKernelRefusesWhatValidateRefuses writes a trigger Validate rejects straight to the
// kernel, to show the rule is the kernel's: EINVAL, explained.
func TestKernelRefusesWhatValidateRefuses(t *testing.T) {
	path := selfPSIOrSkip(t)
	if priv, _ := HasCapSysResource(); priv {
		t.Skip("process holds CAP_SYS_RESOURCE: the kernel accepts any window")
	}
	fd, err := openTriggerFD(path, Trigger{Stall: 50 * time.Millisecond, Window: time.Second})
	if err == nil {
		closeFD(fd)
		t.Fatal("kernel accepted a 1s window from a process without CAP_SYS_RESOURCE")
	}
	if !strings.Contains(err.Error(), "invalid argument") || !strings.Contains(err.Error(), "multiple of 2s") {
		t.Fatalf("error = %v, want EINVAL with the rule", err)
	}
}

func TestShortWindowThroughUserNS(t *testing.T) {
	path := selfPSIOrSkip(t)
	ok, reason := ProbeShortWindows(context.Background(), path)
	if !ok {
		t.Skipf("short windows unavailable here: %s", reason)
	}
	t.Logf("short windows: %s", reason)
	ctx, cancel := context.WithCancel(context.Background())
	src, err := OpenTriggers(ctx, TriggerConfig{Path: path, UserNS: true, Triggers: []Trigger{{Full: true, Stall: 50 * time.Millisecond, Window: 500 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	if priv, _ := HasCapSysResource(); !priv && !strings.Contains(src.Describe(), "user namespace") {
		t.Fatalf("Describe = %q, want the user namespace named", src.Describe())
	}
	cancel()
	if err := drain(t, src); err != nil {
		t.Fatal(err)
	}
}

func TestOpenVMPressureEndsOnCancel(t *testing.T) {
	dir, err := SelfMemoryV1Dir()
	if err != nil {
		t.Skipf("no cgroup v1 memory controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	src, err := OpenVMPressure(ctx, VMPressureConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src.Describe(), "medium,critical") {
		t.Fatalf("Describe = %q", src.Describe())
	}
	cancel()
	if err := drain(t, src); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVMPressure(context.Background(), VMPressureConfig{Dir: dir, Levels: []Signal{SignalSome}}); err == nil {
		t.Fatal("vmpressure accepted a PSI signal as a level")
	}
	if _, err := OpenVMPressure(context.Background(), VMPressureConfig{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "memory.pressure_level") {
		t.Fatalf("vmpressure on a non-cgroup dir: %v", err)
	}
}

// TestOpenFallsBack checks the order trigger → vmpressure → poller and that each
// refusal carries its reason.
func TestOpenFallsBack(t *testing.T) {
	selfPSIOrSkip(t)
	tests := []struct {
		name     string
		cfg      OpenConfig
		kinds    []string
		rejected []string
	}{
		{"defaults", OpenConfig{}, []string{"psi-trigger"}, nil},
		{"no triggers", OpenConfig{DisableTriggers: true}, []string{"vmpressure", "psi-poll"}, []string{"psi-trigger: disabled"}},
		{"neither", OpenConfig{DisableTriggers: true, DisableVMPressure: true}, []string{"psi-poll"}, []string{"psi-trigger: disabled", "vmpressure: disabled"}},
	}
	noBackstop, cancel := context.WithCancel(context.Background())
	if o, err := Open(noBackstop, OpenConfig{BackstopInterval: -1}); err == nil {
		if o.Backstop {
			t.Error("BackstopInterval -1 opened a backstop")
		}
		cancel()
		_ = drain(t, o.Source)
	} else {
		cancel()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			o, err := Open(ctx, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ok := false
			for _, k := range tt.kinds {
				ok = ok || o.Kind == k
			}
			if !ok {
				t.Errorf("Kind = %q, want one of %v (rejected %v)", o.Kind, tt.kinds, o.Rejected)
			}
			all := strings.Join(o.Rejected, "\n")
			for _, r := range tt.rejected {
				if !strings.Contains(all, r) {
					t.Errorf("Rejected %v lacks %q", o.Rejected, r)
				}
			}
			if o.Kind == "psi-poll" && !strings.Contains(o.Source.Describe(), "disabled") {
				t.Errorf("poller Describe %q lacks the reasons", o.Source.Describe())
			}
			// The totals are polled beside triggers and vmpressure, never twice.
			if o.Backstop != (o.Kind != "psi-poll") {
				t.Errorf("Kind %q with Backstop %v (rejected %v)", o.Kind, o.Backstop, o.Rejected)
			}
			if o.Backstop && !strings.Contains(o.Source.Describe(), "backstop") {
				t.Errorf("Describe %q does not name the backstop", o.Source.Describe())
			}
			cancel()
			if err := drain(t, o.Source); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSelfPaths(t *testing.T) {
	dir, err := SelfCgroupV2Dir()
	if err != nil {
		t.Skipf("no cgroup v2: %v", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || !filepath.IsAbs(dir) {
		t.Fatalf("SelfCgroupV2Dir = %q: not a directory (%v)", dir, err)
	}
	if !fileExists(filepath.Join(dir, "cgroup.procs")) {
		t.Fatalf("SelfCgroupV2Dir = %q has no cgroup.procs", dir)
	}
	if v1, err := SelfMemoryV1Dir(); err == nil {
		if !fileExists(filepath.Join(v1, "memory.limit_in_bytes")) {
			t.Fatalf("SelfMemoryV1Dir = %q has no memory.limit_in_bytes", v1)
		}
	}
}

// TestUserNSHelperNeedsRunHelper: in a program that never called RunHelper the helper
// is not started (it would be the whole program again): the trigger fails with
// ErrNoHelper, naming the file, and works again once RunHelper was called.
func TestUserNSHelperNeedsRunHelper(t *testing.T) {
	helperCalled.Store(false)
	defer RunHelper() // TestMain called it; restore that
	path := t.TempDir() + "/memory.pressure"
	_, err := openTriggerInUserNS(context.Background(), path, Trigger{Stall: 50 * time.Millisecond, Window: MinWindow})
	if !errors.Is(err, ErrNoHelper) || !strings.Contains(err.Error(), path) {
		t.Fatalf("without RunHelper: %v, want ErrNoHelper naming %s", err, path)
	}
	RunHelper()
	if _, err = openTriggerInUserNS(context.Background(), path, Trigger{Stall: 50 * time.Millisecond, Window: MinWindow}); errors.Is(err, ErrNoHelper) {
		t.Fatalf("after RunHelper: %v", err)
	}
}

// TestUserNSHelperReportsErrors: the helper's failure comes back as an error that
// names the file and the kernel's reason, not as a hang or a bare exit status.
func TestUserNSHelperReportsErrors(t *testing.T) {
	selfPSIOrSkip(t)
	if ok, reason := ProbeShortWindows(context.Background(), ""); !ok {
		t.Skipf("user-namespace helper unavailable here: %s", reason)
	}
	missing := t.TempDir() + "/memory.pressure"
	_, err := openTriggerInUserNS(context.Background(), missing, Trigger{Stall: 50 * time.Millisecond, Window: MinWindow})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("helper error = %v, want one naming %s and ENOENT", err, missing)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := openTriggerInUserNS(ctx, missing, Trigger{Stall: 50 * time.Millisecond, Window: MinWindow}); err == nil {
		t.Fatal("helper succeeded with a cancelled context")
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BenchmarkTriggerSourceEnd measures how long a source of the default trigger
// pair takes to end once its context is cancelled (every graph's monitor ends so,
// once per epoch): the kernel waits for an RCU grace period in each trigger's close.
func BenchmarkTriggerSourceEnd(b *testing.B) {
	path, reason := SelfPressurePath("memory")
	if _, err := ReadPSI(path); err != nil {
		b.Skipf("no PSI here (%s): %v", reason, err)
	}
	var ending time.Duration
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		src, err := OpenTriggers(ctx, TriggerConfig{Path: path, Triggers: DefaultTriggers})
		if err != nil {
			cancel()
			b.Skipf("psi triggers refused here: %v", err)
		}
		t0 := time.Now()
		cancel()
		for range src.Events() {
		}
		ending += time.Since(t0)
		if err := src.Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ending.Microseconds())/float64(b.N)/1000, "ms-to-end/op")
}
