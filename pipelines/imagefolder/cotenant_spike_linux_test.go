//go:build linux

package imagefolder

// A trainer's peak in a real memory cgroup, run by the benchmark harness
// (internal/harness): a co-tenant rises to 90% of 256 MiB, holds it for 5 s and
// falls back to 40%, while the elastic loader with the launcher's defaults runs
// beside it. Both are re-executions of this test binary, started blocked and
// moved into the harness's cgroup before they run.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/tensor"
)

const (
	// spikeStepEnv is how long the spike loader's consumer takes per batch (a
	// training step), so that the loader is still running when the spike comes.
	spikeStepEnv = "PSIFLOW_SPIKE_STEP"
	// spikeEpochsEnv is the spike loader's number of epochs.
	spikeEpochsEnv = "PSIFLOW_SPIKE_EPOCHS"
	// spikePauseTimeoutEnv, when set, is the spike loader's pause timeout.
	spikePauseTimeoutEnv = "PSIFLOW_SPIKE_PAUSE_TIMEOUT"
	// spikeNoRoomEnv, when set, is the spike loader's resources.no_room.
	spikeNoRoomEnv = "PSIFLOW_SPIKE_NO_ROOM"
)

func init() {
	helpers["spike-loader"] = spikeLoader
	helpers["spike-cotenant"] = func() error {
		return harness.CoTenantMain(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	}
}

// spikeLoader runs the pipeline as psiflow-imagefolder does (the launcher's
// process actions, the default below-floor policy) in file order, and speaks the
// harness's protocol: keyed batches, epoch ends, pauses and resumes. A key that
// does not come after the one before it in its epoch ends the run with an error
// (the folder's one class, named by index, is read in name order).
func spikeLoader() error {
	over := []string{"batch.size=32", "decode.ordered=true", "epochs=" + os.Getenv(spikeEpochsEnv)}
	step, err := time.ParseDuration(os.Getenv(spikeStepEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", spikeStepEnv, err)
	}
	if v := os.Getenv(spikePauseTimeoutEnv); v != "" {
		over = append(over, "resources.pause_timeout="+v)
	}
	if v := os.Getenv(spikeNoRoomEnv); v != "" {
		over = append(over, "resources.no_room="+v)
	}
	p, err := New(os.Getenv(folderEnv), over...)
	if err != nil {
		return err
	}
	em := protocol.NewEmitter(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), helperLifetime)
	defer cancel()
	var mu sync.Mutex
	last := "" // the epoch's last key so far
	_, err = pipelines.Run(ctx, p, pipelines.Hooks{
		Process: memory.LauncherProcess(),
		Batches: func(ctx context.Context, b *tensor.Batch) error {
			mu.Lock()
			for _, k := range b.Keys {
				if k <= last {
					mu.Unlock()
					return fmt.Errorf("order: key %q delivered after %q", k, last)
				}
				last = k
			}
			mu.Unlock()
			if err := em.BatchKeys(b.Keys); err != nil {
				return err
			}
			select { // the training step
			case <-time.After(step):
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		},
		OnEpoch: func(n int, _ progress.Epoch) {
			mu.Lock()
			last = ""
			mu.Unlock()
			_ = em.EndEpoch(n + 1)
		},
		OnPause: func(ev pause.Event) {
			switch ev.Kind {
			case pause.Paused:
				_ = em.Emit(protocol.Event{Event: protocol.Pause})
			case pause.Resumed:
				_ = em.Emit(protocol.Event{Event: protocol.Resume})
			}
		},
		Info: func(s string) { fmt.Fprintln(os.Stderr, "loader:", s) },
	})
	_ = em.Done(err)
	if errors.Is(err, memory.ErrBelowFloor) {
		fmt.Fprintln(os.Stderr, "loader:", err) // as the front-ends say it
		os.Exit(protocol.ExitBelowFloor)
	}
	return err
}

// TestCotenantSpikePausesLoader: 256 MiB, a co-tenant spike to 90% for 5 s, then
// 40% until the loader ends. Asserted, from the harness's result: the loader
// paused at least once and finished (so it resumed), every sample of every epoch
// arrived exactly once and in file order (the loader ends with an error on a key
// out of order), the co-tenant held its peak, fell and survived, and the cgroup
// counted no OOM kill. Not asserted: time. The loader stays paused where the
// others leave it no room (resources.no_room: stay): at 90% of 256 MiB the
// default leaves during the ramp, which cannot yet be told from one that goes
// on past what the paused loader fits beside (TestCotenantSpikeBeyondFitLeaves).
func TestCotenantSpikePausesLoader(t *testing.T) {
	skipUnlessRealCotenant(t)
	if os.Geteuid() != 0 {
		t.Skip("the harness's cgroups need root")
	}
	const limit = 256 << 20
	const files, epochs = 240, 3
	res := runSpike(t, limit, 90, files, epochs, 5*time.Second, "", "stay")
	t.Logf("outcome %s in %v, %d pauses (%v), keys %+v, OOM kills %d, co-tenant %+v\nloader stderr:\n%s",
		res.Outcome, res.Wall, res.Pauses, res.Paused, res.Keys, res.OOMKills, res.CoTenant, res.StderrTail)
	c := res.CoTenant
	if c == nil || c.Held == 0 || c.Fell == 0 || c.Fate != harness.CoSurvived {
		t.Fatalf("co-tenant %+v: want it to hold its peak, fall and survive", c)
	}
	if res.OOMKills != 0 {
		t.Fatalf("%d OOM kills in the group (the loader's %d, the co-tenant's %d)", res.OOMKills, res.LoaderOOMKills, res.CoTenantOOMKills)
	}
	if res.Outcome != harness.Finished {
		t.Fatalf("loader %s (%s): want it to finish", res.Outcome, res.Detail)
	}
	if res.Pauses < 1 {
		t.Fatalf("the loader never paused beside a co-tenant at 90%% of %d MiB", limit>>20)
	}
	if ok, known := res.Keys.ExactlyOnce(); !ok || !known || res.Keys.Delivered != files*epochs || res.Keys.Complete != epochs {
		t.Fatalf("keys %+v: want %d samples, every one of %d epochs exactly once", res.Keys, files*epochs, epochs)
	}
}

// TestCotenantSpikeBeyondFitLeaves: the co-tenant rises to 96% of 256 MiB
// and holds it for a minute: less than the paused loader's own resident set
// is left beside it (in the spike grid at 95% the OOM killer then chose the
// co-tenant, whose resident set, its mapped binary included, outscored the
// loader's oom_score_adj 1000). Asserted: the co-tenant survived, no OOM
// kill of it (the harness ends it with the loader, before its peak: the
// loader leaves during the ramp); the loader paused, then left on its own
// with exit status 3 and the message naming the limit, the others' memory
// and its own. The loader itself is not OOM-killed either, except after its
// decision to leave (the kernel's choice on a loaded machine: see below).
func TestCotenantSpikeBeyondFitLeaves(t *testing.T) {
	skipUnlessRealCotenant(t)
	if os.Geteuid() != 0 {
		t.Skip("the harness's cgroups need root")
	}
	const limit = 256 << 20
	res := runSpike(t, limit, 96, 240, 3, time.Minute, "", "")
	t.Logf("outcome %s (%s) in %v, exit %d, %d pauses (%v), OOM kills %d, co-tenant %+v\nloader stderr:\n%s",
		res.Outcome, res.Detail, res.Wall, res.ExitCode, res.Pauses, res.Paused, res.OOMKills, res.CoTenant, res.StderrTail)
	// The harness ends the co-tenant with the loader: it survived if it was
	// not OOM-killed before.
	if c := res.CoTenant; c == nil || c.Fate != harness.CoSurvived || res.CoTenantOOMKills != 0 {
		t.Fatalf("co-tenant %+v, %d OOM kills of it: want it to survive", c, res.CoTenantOOMKills)
	}
	// The loader decides to leave with a margin of 8 MiB and 60 ms of the
	// co-tenant's growth; where the machine runs it late it may still be
	// exiting when the co-tenant takes the rest, and the kernel OOM-kills it
	// (its oom_score_adj is 1000: it goes first). That is the kernel's call, so
	// a kill of the loader is accepted after its leave line, never before it
	// and never of the co-tenant (a longer look-ahead for late readings was
	// tried and made the loader leave where both fitted, at 85% of 1 GiB).
	if res.OOMKills != 0 {
		if res.OOMKills != res.LoaderOOMKills || !strings.Contains(res.StderrTail, "left after a pause of") {
			t.Fatalf("%d OOM kills in the group (the loader's %d): want the loader to leave on its own", res.OOMKills, res.LoaderOOMKills)
		}
		t.Logf("the kernel OOM-killed the loader after it decided to leave (a loaded machine ran its exit late): %d kills", res.OOMKills)
		return
	}
	if res.Outcome != harness.Stopped || res.ExitCode != protocol.ExitBelowFloor {
		t.Fatalf("loader %s, exit status %d (%s): want it to leave, exit status %d", res.Outcome, res.ExitCode, res.Detail, protocol.ExitBelowFloor)
	}
	if res.Pauses < 1 {
		t.Fatalf("the loader left without pausing first")
	}
	for _, want := range []string{"left after a pause of", "of its limit of 256 MiB", "which leaves", "less than the paused loader's own"} {
		if !strings.Contains(res.StderrTail, want) {
			t.Errorf("the loader's stderr does not say %q", want)
		}
	}
}

// TestCotenantPauseTimeoutStops: the same co-tenant holds 90% of 256 MiB for a
// minute while the loader's pause timeout is 2 s (resources.no_room: stay, so
// that the timeout ends it, not the lack of room). Asserted: the loader paused,
// then stopped on its own with exit status 3 and the message naming the pause
// and the memory left; no OOM kill, the co-tenant survived.
func TestCotenantPauseTimeoutStops(t *testing.T) {
	skipUnlessRealCotenant(t)
	if os.Geteuid() != 0 {
		t.Skip("the harness's cgroups need root")
	}
	const limit = 256 << 20
	res := runSpike(t, limit, 90, 240, 3, time.Minute, "2s", "stay")
	t.Logf("outcome %s (%s) in %v, exit %d, %d pauses (%v), OOM kills %d, co-tenant %+v\nloader stderr:\n%s",
		res.Outcome, res.Detail, res.Wall, res.ExitCode, res.Pauses, res.Paused, res.OOMKills, res.CoTenant, res.StderrTail)
	if res.OOMKills != 0 {
		t.Fatalf("%d OOM kills in the group (the loader's %d, the co-tenant's %d)", res.OOMKills, res.LoaderOOMKills, res.CoTenantOOMKills)
	}
	if res.Outcome != harness.Stopped || res.ExitCode != protocol.ExitBelowFloor {
		t.Fatalf("loader %s, exit status %d (%s): want it stopped below its floor, exit status %d", res.Outcome, res.ExitCode, res.Detail, protocol.ExitBelowFloor)
	}
	if res.Pauses < 1 {
		t.Fatalf("the loader stopped without pausing first")
	}
	for _, want := range []string{"stopped after a pause of", "longer than the pause timeout of 2s", "the cgroup (", "below its floor of"} {
		if !strings.Contains(res.StderrTail, want) {
			t.Errorf("the loader's stderr does not say %q", want)
		}
	}
	if c := res.CoTenant; c == nil || c.Held == 0 || c.Fate != harness.CoSurvived {
		t.Fatalf("co-tenant %+v: want it to reach its peak and survive", c)
	}
}

// runSpike runs the spike loader over files JPEGs for epochs epochs beside a
// co-tenant that rises to percent% of limit in 2 s, holds it for hold and falls to 40%,
// with the given pause timeout and no_room ("": the defaults), through the harness.
func runSpike(t *testing.T, limit int64, percent, files, epochs int, hold time.Duration, pauseTimeout, noRoom string) harness.Result {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "class0")
	if _, err := synth.JPEGFiles(dir, files, synth.Image{Width: 640, Height: 480, Noise: 24}, 9); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Run(context.Background(), harness.Loader{
		Name: "loader",
		Argv: []string{exe, "-test.run=^$"},
		// 24 batches of 32 at 250 ms a step: the loader is still running when the
		// co-tenant reaches its peak, 2 s after the start, however fast the machine.
		Env: []string{"PSIFLOW_ELASTIC_TRACE=" + os.Getenv("PSIFLOW_ELASTIC_TRACE"), "GODEBUG=" + os.Getenv("GODEBUG"), helperEnv + "=spike-loader", folderEnv + "=" + filepath.Dir(dir), spikeStepEnv + "=250ms", spikeEpochsEnv + "=" + strconv.Itoa(epochs), spikePauseTimeoutEnv + "=" + pauseTimeout, spikeNoRoomEnv + "=" + noRoom},
	}, harness.Options{
		MemoryLimit: limit, Timeout: 4 * time.Minute, Timeline: true,
		GroupPrefix: "imagefoldertest-spike",
		CoTenant: &harness.CoTenant{
			Argv: []string{exe, "-test.run=^$"}, Env: []string{helperEnv + "=spike-cotenant"},
			Bytes: limit * int64(percent) / 100, Share: float64(percent) / 100, Ramp: 2 * time.Second,
			Hold: hold, After: limit * 40 / 100, AfterShare: 0.4,
		},
	})
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, os.ErrPermission) {
		t.Skipf("the host refuses the harness's cgroup: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}
