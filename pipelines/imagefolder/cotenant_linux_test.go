//go:build linux

package imagefolder

// A real memory cgroup shared by the image-folder loader and a co-tenant standing for
// the trainer: the co-tenant ramps anonymous memory to 70% of the limit and holds it;
// the loader must finish and the co-tenant must not be OOM-killed. Both run as
// re-executions of this test binary, started blocked and released once their PIDs
// are in the cgroup (cgroup.Group.Start), so every page they touch is charged there.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/source/synth"
)

const (
	// cotenantBytesEnv, cotenantRampEnv: what the co-tenant holds and over how long it
	// gets there. folderEnv, modeEnv: the loader's folder and memory mode.
	cotenantBytesEnv = "PSIFLOW_COTENANT_BYTES"
	cotenantRampEnv  = "PSIFLOW_COTENANT_RAMP"
	folderEnv        = "PSIFLOW_LOADER_FOLDER"
	modeEnv          = "PSIFLOW_LOADER_MODE"
	noGateEnv        = "PSIFLOW_LOADER_NO_GATE"
	// policyEnv sets the loader's below-floor policy (default: pause).
	policyEnv = "PSIFLOW_LOADER_BELOW_FLOOR"
	// controlEnv set to "fixed" runs the test's loader as psiflow before it yielded to a co-tenant
	// (-memory fixed -pressure=false), by hand, to see the test fail without the
	// elastic runtime.
	controlEnv = "PSIFLOW_COTENANT_TEST_CONTROL"
	// helperLifetime bounds a helper even if the test that started it dies.
	helperLifetime = 5 * time.Minute
)

func init() {
	helpers["cotenant"] = cotenant
	helpers["loader"] = loaderChild
}

// loaderChild runs the pipeline for two epochs and prints "done ITEMS".
func loaderChild() error {
	over := []string{"epochs=2"}
	if m := os.Getenv(modeEnv); m != "" {
		over = append(over, "resources.memory_mode="+m)
	}
	if os.Getenv(noGateEnv) != "" {
		over = append(over, "resources.pressure=off")
	}
	if pol := os.Getenv(policyEnv); pol != "" {
		over = append(over, "resources.below_floor="+pol)
	}
	p, err := New(os.Getenv(folderEnv), over...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperLifetime)
	defer cancel()
	sum, err := pipelines.Run(ctx, p, pipelines.Hooks{
		Process: memory.LauncherProcess(), // the loader as the launcher runs it
		Info:    func(s string) { fmt.Fprintln(os.Stderr, "loader:", s) },
	})
	if err != nil {
		return err
	}
	fmt.Printf("done %d\n", sum.Items)
	return nil
}

// cotenant touches its bytes in 4 MiB steps spread over the ramp, says "held" on
// stdout, and holds them until stdin closes (the helper "cotenant").
func cotenant() error {
	total, err := strconv.ParseInt(os.Getenv(cotenantBytesEnv), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %w", cotenantBytesEnv, err)
	}
	ramp, err := time.ParseDuration(os.Getenv(cotenantRampEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", cotenantRampEnv, err)
	}
	mem, err := unix.Mmap(-1, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap %d bytes: %w", total, err)
	}
	const step = 4 << 20
	steps := (len(mem) + step - 1) / step
	start := time.Now()
	for i := range steps {
		for off := i * step; off < min(len(mem), (i+1)*step); off += 4096 {
			mem[off] = 1
		}
		time.Sleep(time.Until(start.Add(ramp * time.Duration(i+1) / time.Duration(steps))))
	}
	fmt.Println("held")
	done := make(chan struct{})
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				close(done)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(helperLifetime):
		return errors.New("not released within its lifetime")
	}
	sum := 0
	for off := 0; off < len(mem); off += 4096 {
		sum += int(mem[off])
	}
	if sum != (len(mem)+4095)/4096 {
		return fmt.Errorf("held memory changed: %d of %d pages set", sum, (len(mem)+4095)/4096)
	}
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// TestCotenantSurvivesLoader: 256 MiB cgroup, co-tenant at 70%, the elastic
// loader in the same cgroup for two epochs over a folder of JPEGs. Asserted: the
// loader finishes with every sample, the co-tenant is alive afterwards and exits
// cleanly, and the cgroup's oom_kill counter did not move. Not asserted: time.
func TestCotenantSurvivesLoader(t *testing.T) {
	skipUnlessRealCotenant(t)
	const limit = 256 << 20
	g, name := newLimitedGroup(t, limit)
	// 240 JPEGs of 640×480 (about 60–100 KB each): four batches of 64 per epoch.
	dir := filepath.Join(t.TempDir(), "class0")
	const files = 240
	if _, err := synth.JPEGFiles(dir, files, synth.Image{Width: 640, Height: 480, Noise: 24}, 9); err != nil {
		t.Fatal(err)
	}
	before, err := g.MemoryEvents()
	if err != nil {
		t.Fatal(err)
	}

	co := startChild(t, g, "cotenant", cotenantBytesEnv+"="+strconv.Itoa(limit*70/100), cotenantRampEnv+"=3s")
	loaderEnv := []string{folderEnv + "=" + filepath.Dir(dir)}
	if os.Getenv(controlEnv) == "fixed" {
		loaderEnv = append(loaderEnv, modeEnv+"=fixed", noGateEnv+"=1")
	}
	// The loader runs while the co-tenant ramps; if it finishes before the
	// co-tenant holds its share (a quiet machine), it runs again beside the
	// co-tenant at its full share, so the loader always runs under 70% for real.
	var loader *testChild
	for run := 1; ; run++ {
		heldBefore := false
		select {
		case <-co.held:
			heldBefore = true
		default:
		}
		loader = startChild(t, g, "loader", loaderEnv...)
		select {
		case <-loader.done:
		case <-co.done:
			t.Fatalf("the co-tenant ended while the loader ran: %v (%s)", co.err, co.stderr())
		case <-time.After(4 * time.Minute):
			t.Fatalf("the loader did not finish within 4 minutes in cgroup %s", name)
		}
		if loader.err != nil {
			t.Fatalf("the loader (run %d) failed: %v\n%s", run, describeExit(loader.err), loader.stderr())
		}
		if got := loader.lastLine(); got != fmt.Sprintf("done %d", 2*files) {
			t.Fatalf("loader (run %d) reported %q, want \"done %d\"", run, got, 2*files)
		}
		select {
		case <-co.done:
			t.Fatalf("the co-tenant ended before it was released: %v\n%s", describeExit(co.err), co.stderr())
		default:
		}
		if heldBefore {
			break
		}
		select {
		case <-co.held:
			t.Logf("loader run %d finished before the co-tenant held its %d MiB: running it again beside the full co-tenant", run, limit*70/100>>20)
		case <-co.done:
			t.Fatalf("the co-tenant ended before it held its share: %v\n%s", describeExit(co.err), co.stderr())
		case <-time.After(time.Minute):
			t.Fatalf("the co-tenant never reached its %d MiB", limit*70/100>>20)
		}
	}
	releaseCotenant(t, g, co, before.OOMKill)
	t.Logf("loader stderr:\n%s", loader.stderr())
}

// releaseCotenant closes the co-tenant's stdin and asserts that it exits cleanly with
// its memory intact and that g's oom_kill counter is still oomKills.
func releaseCotenant(t *testing.T, g *cgroup.Group, co *testChild, oomKills uint64) {
	t.Helper()
	co.stdin.Close()
	select {
	case <-co.done:
	case <-time.After(time.Minute):
		t.Fatal("the co-tenant did not exit within a minute of its release")
	}
	if co.err != nil {
		t.Fatalf("the co-tenant failed: %v\n%s", describeExit(co.err), co.stderr())
	}
	after, err := g.MemoryEvents()
	if err != nil {
		t.Fatal(err)
	}
	if after.OOMKill != oomKills {
		t.Fatalf("cgroup %s: oom_kill %d → %d", g.Name(), oomKills, after.OOMKill)
	}
}

// skipUnlessRealCotenant skips the real co-tenant tests under -short and -race.
func skipUnlessRealCotenant(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-cgroup test (about a minute on a loaded machine)")
	}
	if raceEnabled {
		t.Skip("under the race detector every process's memory grows several times (shadow memory), so a 256 MiB cgroup shared with a co-tenant holding most of it measures the detector, not the loader; run without -race (make test-cotenant)")
	}
}

// newLimitedGroup makes a memory cgroup limited to limit bytes for t, removed at
// its end; it skips t where the host refuses.
func newLimitedGroup(t *testing.T, limit int64) (*cgroup.Group, string) {
	t.Helper()
	name := fmt.Sprintf("imagefoldertest-%s-%d", unsafeName.ReplaceAllString(t.Name(), "_"), os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, cgroup.ErrNoController) {
			t.Skipf("the host refuses to create cgroup %s: %v", name, err)
		}
		t.Fatalf("create cgroup %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = g.Kill(10 * time.Second)
		if err := g.Remove(); err != nil {
			t.Errorf("remove cgroup %s: %v", name, err)
		}
	})
	if err := g.SetMemoryMax(limit); err != nil {
		if errors.Is(err, cgroup.ErrNoController) || errors.Is(err, os.ErrPermission) {
			t.Skipf("the host refuses a memory limit on cgroup %s: %v", name, err)
		}
		t.Fatal(err)
	}
	return g, name
}

// TestCotenantAt85PercentStopsLoader: 256 MiB cgroup, a co-tenant holding 85% of
// it (about 38 MiB left after the reserve is below the loader's floor). The elastic
// loader under -below-floor stop, started beside it, must stop at once with a
// message that names the memory left and its floor, and the co-tenant must be
// untouched (oom_kill unchanged, its memory intact when released). Not asserted:
// time. (The default, pausing, is TestCotenantSpikePausesLoader's.)
func TestCotenantAt85PercentStopsLoader(t *testing.T) {
	skipUnlessRealCotenant(t)
	const limit = 256 << 20
	g, name := newLimitedGroup(t, limit)
	dir := filepath.Join(t.TempDir(), "class0")
	if _, err := synth.JPEGFiles(dir, 64, synth.Image{Width: 640, Height: 480, Noise: 24}, 9); err != nil {
		t.Fatal(err)
	}
	before, err := g.MemoryEvents()
	if err != nil {
		t.Fatal(err)
	}
	co := startChild(t, g, "cotenant", cotenantBytesEnv+"="+strconv.Itoa(limit*85/100), cotenantRampEnv+"=1s")
	select {
	case <-co.held:
	case <-co.done:
		t.Fatalf("the co-tenant ended before it held its share: %v\n%s", describeExit(co.err), co.stderr())
	case <-time.After(time.Minute):
		t.Fatal("the co-tenant never reached its share")
	}
	loader := startChild(t, g, "loader", folderEnv+"="+filepath.Dir(dir), policyEnv+"=stop")
	select {
	case <-loader.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the loader neither stopped nor finished within 2 minutes in cgroup %s", name)
	}
	out := loader.lastLine()
	if loader.err == nil || !strings.Contains(out, "below its floor of") || !strings.Contains(out, "leaves the loader") {
		t.Fatalf("loader: exit %v, last line %q; want it stopped below its floor\n%s", describeExit(loader.err), out, loader.stderr())
	}
	releaseCotenant(t, g, co, before.OOMKill)
	t.Logf("loader: %s", out)
}

// testChild is a helper process inside the test cgroup.
type testChild struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	done  chan struct{} // closed once reaped; err is then its exit
	err   error
	held  chan struct{} // closed when the child printed "held"

	mu     sync.Mutex
	out    []string
	errOut strings.Builder
}

func (c *testChild) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errOut.Write(p)
}

func startChild(t *testing.T, g *cgroup.Group, mode string, env ...string) *testChild {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	c := &testChild{cmd: cmd, done: make(chan struct{}), held: make(chan struct{})}
	cmd.Stderr = c
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	if err := g.Start(cmd); err != nil {
		t.Fatalf("start %s in cgroup %s: %v", mode, g.Name(), err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.out = append(c.out, sc.Text())
			c.mu.Unlock()
			if sc.Text() == "held" {
				close(c.held)
			}
		}
		c.err = cmd.Wait() // after stdout is drained, as exec requires
		close(c.done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s (pid %d) not reaped 30s after SIGKILL", mode, cmd.Process.Pid)
		}
	})
	return c
}

func (c *testChild) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errOut.String()
}

// lastLine waits for the child's exit and returns its last line of output.
func (c *testChild) lastLine() string {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 {
		return ""
	}
	return c.out[len(c.out)-1]
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("%v (signal %v: SIGKILL in a memory cgroup means the OOM killer)", err, ws.Signal())
		}
	}
	return fmt.Sprint(err)
}
