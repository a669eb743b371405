//go:build linux

package pressure

// Tests that make real memory pressure in child processes inside their own,
// uniquely named cgroups. They do not run in parallel with each other (no
// t.Parallel): two of them at once would disturb each other's timings. Every cgroup
// is removed in t.Cleanup, also when a test fails; every child is killed there.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/kerneltest"
)

const (
	testFileEnv = "PSIFLOW_PRESSURE_TEST_FILE"
	// helperLifetime bounds a helper child even if the test that started it dies.
	helperLifetime = 90 * time.Second
	mib            = 1 << 20
)

// runTestHelper is the child side: "pread" reads a file with 4 goroutines in a loop,
// "hog" allocates and touches anonymous memory until the OOM killer ends it.
func runTestHelper(mode string) error {
	deadline := time.Now().Add(helperLifetime)
	switch mode {
	case "pread":
		path := os.Getenv(testFileEnv)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		size := st.Size()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, mib)
				off := int64(w) * size / 4
				for time.Now().Before(deadline) {
					if off >= size {
						off = 0
					}
					n, err := f.ReadAt(buf, off)
					if n == 0 && err != nil {
						off = 0
						continue
					}
					off += int64(n)
				}
			}()
		}
		wg.Wait()
		return nil
	case "hog":
		var keep [][]byte
		for time.Now().Before(deadline) {
			b, err := unix.Mmap(-1, 0, 16*mib, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return fmt.Errorf("mmap: %w", err)
			}
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
			if len(keep)*16 >= 4096 { // 4 GiB: far over any test limit
				time.Sleep(time.Until(deadline))
			}
		}
		return errors.New("hog was not OOM-killed")
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// newTestGroup creates a uniquely named cgroup with a memory limit, removed at cleanup.
func newTestGroup(t *testing.T, limit int64) *cgroup.Group {
	t.Helper()
	name := fmt.Sprintf("pressuretest-%s-%d", nameUnsafe.ReplaceAllString(t.Name(), "_"), os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, errors.ErrUnsupported) {
			kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
		}
		t.Fatalf("create cgroup %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("remove cgroup %s: %v", name, err)
		}
	})
	if limit > 0 {
		if err := g.SetMemoryMax(limit); err != nil {
			t.Fatalf("limit cgroup %s to %d bytes: %v", name, limit, err)
		}
	}
	return g
}

// uncachedFile writes a file of size bytes, syncs it and drops it from the page cache,
// so that reading it costs real I/O and page-cache charges.
func uncachedFile(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pressure.dat")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4*mib)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		buf[0]++
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise DONTNEED %s: %v", path, err)
	}
	return path
}

// child is a helper process; done is closed once it has been reaped, then err is its exit.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startHelper re-executes the test binary in a helper mode inside g. The child is
// killed and reaped at cleanup; its stderr is logged on failure.
func startHelper(t *testing.T, g *cgroup.Group, mode string, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), testHelperEnv+"="+mode), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := g.Start(cmd); err != nil {
		t.Fatalf("start helper %s in cgroup %s: %v", mode, g.Name(), err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Errorf("helper %s (pid %d) not reaped 30s after SIGKILL", mode, cmd.Process.Pid)
			return
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("helper %s stderr:\n%s", mode, stderr.String())
		}
	})
	return c
}

// monitorRun runs a monitor until the test ends; cancel is the context of the monitor
// and its source, cancelled at cleanup before the monitor is awaited.
func monitorRun(t *testing.T, ctx context.Context, cancel context.CancelFunc, m *Monitor) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("monitor: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("monitor still running 30s after cancel")
		}
	})
}

// TestTriggerFiresUnderRealPressure follows the recipe of shared/LINUX-FACTS.md: a
// child reading a 300 MiB uncached file in a 256 MiB cgroup stalls on reclaim; the
// trigger "some 100000 2000000" on the group's memory.pressure fires; the gate closes
// on that event and reopens once the pressure is gone.
func TestTriggerFiresUnderRealPressure(t *testing.T) {
	g := newTestGroup(t, 256*mib)
	path, err := g.PressurePath("memory")
	if err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "the kernel offers no memory.pressure for cgroup %s: %v", g.Name(), err)
	}
	file := uncachedFile(t, 300*mib)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	trig := Trigger{Stall: 100 * time.Millisecond, Window: 2 * time.Second}
	src, err := OpenTriggers(ctx, TriggerConfig{Path: path, Triggers: []Trigger{trig}})
	if err != nil {
		t.Fatal(err)
	}
	model, err := NewModel(ModelConfig{Hold: 3 * time.Second, MinDwell: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// One permit and no floor: a single cut at Some closes the gate.
	gate, err := NewGate(Policy{MaxPermits: 1, DisableMinDefault: true, Quiet: 500 * time.Millisecond, StepEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(time.Now())
	type seen struct {
		ev     Event
		level  Level
		closed bool
	}
	events := make(chan seen, 64)
	monitorRun(t, ctx, cancel, &Monitor{Source: src, Model: model, Gate: gate, Recorder: rec,
		OnEvent: func(ev Event, l Level) {
			select {
			case events <- seen{ev, l, gate.Limit() == 0}:
			default:
			}
		}})

	start := time.Now()
	reader := startHelper(t, g, "pread", testFileEnv+"="+file)
	var first seen
	select {
	case first = <-events:
	case <-reader.done:
		t.Fatalf("pread child exited early: %v", reader.err)
	case <-time.After(60 * time.Second):
		t.Fatalf("trigger %q on %s did not fire within 60s of real pressure (cgroup %s)", trig, path, g.Name())
	}
	t.Logf("trigger fired %s after the child started: %v", time.Since(start).Round(time.Millisecond), first.ev)
	if me, err := g.MemoryEvents(); err == nil {
		// Why memory.events max (v1 failcnt) does not assert Critical by default: it
		// counts every charge that met the limit, routine for a group full of page cache.
		t.Logf("memory events of %s so far: %+v", g.Name(), me)
	}
	if first.ev.Signal != SignalSome || first.level != LevelSome || !first.closed {
		t.Fatalf("first event %v: level %v, gate closed %v; want some, closed", first.ev, first.level, first.closed)
	}
	if gate.TryAcquire() {
		t.Fatal("gate admitted work under pressure")
	}

	// Clear the pressure: kill the reader, then the gate must reopen.
	reader.cmd.Process.Kill()
	<-reader.done
	cleared := time.Now()
	for gate.Limit() == 0 {
		if time.Since(cleared) > 30*time.Second {
			t.Fatalf("gate still closed 30s after the pressure stopped (level %v)", gate.Stats().Level)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("gate reopened %s after the child was killed", time.Since(cleared).Round(time.Millisecond))
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	if err := gate.Acquire(actx); err != nil {
		t.Fatalf("Acquire after the pressure cleared: %v", err)
	}
	gate.Release()
	d := rec.Snapshot(time.Now())
	if d.Levels[LevelSome].Entries == 0 || d.Signals[SignalSome] == 0 {
		t.Fatalf("recorder missed the pressure: %+v", d)
	}
	var report strings.Builder
	d.WriteReport(&report)
	t.Log("\n" + report.String())
	st := gate.Stats()
	if st.Decisions[DecisionStop] == 0 || st.Decisions[DecisionReopen] == 0 {
		t.Fatalf("gate decisions %v: want a stop and a reopen", st.Decisions)
	}
}

// TestVMPressureUnderRealPressure: cgroup v1 vmpressure delivers under the same load.
func TestVMPressureUnderRealPressure(t *testing.T) {
	g := newTestGroup(t, 256*mib)
	dir, err := g.V1Dir("memory")
	if err != nil {
		t.Skipf("no cgroup v1 memory hierarchy here (pure cgroup v2 host): %v", err)
	}
	file := uncachedFile(t, 300*mib)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src, err := OpenVMPressure(ctx, VMPressureConfig{Dir: dir, Levels: []Signal{SignalVMLow, SignalVMMedium, SignalVMCritical}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for range src.Events() {
		}
		if err := src.Err(); err != nil {
			t.Errorf("vmpressure source: %v", err)
		}
	})
	reader := startHelper(t, g, "pread", testFileEnv+"="+file)
	select {
	case ev, ok := <-src.Events():
		if !ok {
			t.Fatalf("vmpressure source ended: %v", src.Err())
		}
		t.Logf("vmpressure: %v", ev)
		if ev.Count == 0 || ev.Signal < SignalVMLow || ev.Signal > SignalVMCritical {
			t.Fatalf("bad vmpressure event %+v", ev)
		}
	case <-reader.done:
		t.Fatalf("pread child exited early: %v", reader.err)
	case <-time.After(60 * time.Second):
		t.Fatalf("no vmpressure event from %s within 60s of real pressure", dir)
	}
}

// TestOOMKillDetected: a child that allocates past a 64 MiB limit is OOM-killed
// (SIGKILL: there is no swap); the memory-events source counts it and the monitor goes
// Critical and sheds.
func TestOOMKillDetected(t *testing.T) {
	g := newTestGroup(t, 64*mib)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	read := func() (MemoryCounts, error) {
		ev, err := g.MemoryEvents()
		return MemoryCounts{High: ev.High, Max: ev.Max, OOM: ev.OOM, OOMKill: ev.OOMKill}, err
	}
	src, err := OpenMemoryEvents(ctx, MemoryEventsConfig{Name: g.Name(), Read: read, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	model, err := NewModel(ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := NewGate(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	shed := make(chan struct{}, 1)
	gate.OnShed("test", func(context.Context) error {
		select {
		case shed <- struct{}{}:
		default:
		}
		return nil
	})
	rec := NewRecorder(time.Now())
	kills := make(chan Event, 16)
	monitorRun(t, ctx, cancel, &Monitor{Source: src, Model: model, Gate: gate, Recorder: rec,
		OnEvent: func(ev Event, l Level) {
			if ev.Signal == SignalOOMKill {
				select {
				case kills <- ev:
				default:
				}
			}
		}})
	hog := startHelper(t, g, "hog")
	select {
	case <-hog.done:
		err := hog.err
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("hog exited with %v, want SIGKILL from the OOM killer", err)
		}
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("hog exited with %v, want SIGKILL from the OOM killer", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("hog in cgroup %s (64 MiB) not OOM-killed within 60s", g.Name())
	}
	select {
	case ev := <-kills:
		t.Logf("OOM kill detected: %v", ev)
	case <-time.After(30 * time.Second):
		t.Fatalf("OOM kill in cgroup %s not reported within 30s", g.Name())
	}
	select {
	case <-shed:
	case <-time.After(10 * time.Second):
		t.Fatal("gate did not shed on the OOM kill")
	}
	if d := rec.Snapshot(time.Now()); d.Signals[SignalOOMKill] == 0 || d.Levels[LevelCritical].Entries == 0 {
		t.Fatalf("recorder: %+v", d)
	}
}

// TestTriggerEndsWhenCgroupRemoved: after rmdir the kernel reports POLLERR and the
// source ends with an error naming the file.
func TestTriggerEndsWhenCgroupRemoved(t *testing.T) {
	name := fmt.Sprintf("pressuretest-removed-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			g.Remove()
		}
	})
	path, err := g.PressurePath("memory")
	if err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "no memory.pressure for %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := OpenTriggers(ctx, TriggerConfig{Path: path, Triggers: DefaultTriggers})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	select {
	case _, ok := <-src.Events():
		for ok {
			_, ok = <-src.Events()
		}
	case <-time.After(30 * time.Second):
		t.Fatal("trigger source still running 30s after its cgroup was removed")
	}
	if err := src.Err(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("source error = %v, want one naming %s", err, path)
	}
}

// TestVMPressureEndsWhenCgroupRemoved: removing a v1 memory cgroup signals its
// registered eventfds; the source notices the group is gone and ends with an error.
func TestVMPressureEndsWhenCgroupRemoved(t *testing.T) {
	name := fmt.Sprintf("pressuretest-vmremoved-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			g.Remove()
		}
	})
	dir, err := g.V1Dir("memory")
	if err != nil {
		t.Skipf("no cgroup v1 memory hierarchy here (pure cgroup v2 host): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := OpenVMPressure(ctx, VMPressureConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	deadline := time.After(30 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-src.Events():
		case <-deadline:
			t.Fatal("vmpressure source still running 30s after its cgroup was removed")
		}
	}
	if err := src.Err(); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("source error = %v, want one naming %s", err, dir)
	}
}
