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
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
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
)

func init() {
	helpers["spike-loader"] = spikeLoader
	helpers["spike-cotenant"] = func() error {
		return harness.CoTenantMain(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	}
}

// spikeLoader runs the pipeline as psiflow-imagefolder does (the launcher's
// process actions, the default below-floor policy) and speaks the harness's
// protocol: keyed batches, epoch ends, pauses and resumes.
func spikeLoader() error {
	c := DefaultConfig(os.Getenv(folderEnv))
	c.BatchSize = 32
	c.Process = memory.LauncherProcess()
	var err error
	if c.Epochs, err = strconv.Atoi(os.Getenv(spikeEpochsEnv)); err != nil {
		return fmt.Errorf("%s: %w", spikeEpochsEnv, err)
	}
	step, err := time.ParseDuration(os.Getenv(spikeStepEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", spikeStepEnv, err)
	}
	em := protocol.NewEmitter(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), helperLifetime)
	defer cancel()
	_, err = Run(ctx, c, Hooks{
		Consume: func(ctx context.Context, b *tensor.Batch) error {
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
		OnEpoch: func(n int, _ progress.Epoch) { _ = em.EndEpoch(n + 1) },
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
		os.Exit(protocol.ExitBelowFloor)
	}
	return err
}

// TestCotenantSpikePausesLoader: 256 MiB, a co-tenant spike to 90% for 5 s, then
// 40% until the loader ends. Asserted, from the harness's result: the loader
// paused at least once and finished (so it resumed), every sample of every epoch
// arrived exactly once, the co-tenant held its peak, fell and survived, and the
// cgroup counted no OOM kill. Not asserted: time.
func TestCotenantSpikePausesLoader(t *testing.T) {
	skipUnlessRealCotenant(t)
	if os.Geteuid() != 0 {
		t.Skip("the harness's cgroups need root")
	}
	const limit = 256 << 20
	const files, epochs = 240, 3
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
		Env: []string{helperEnv + "=spike-loader", folderEnv + "=" + filepath.Dir(dir), spikeStepEnv + "=250ms", spikeEpochsEnv + "=" + strconv.Itoa(epochs)},
	}, harness.Options{
		MemoryLimit: limit, Timeout: 4 * time.Minute, Timeline: true,
		GroupPrefix: "imagefoldertest-spike",
		CoTenant: &harness.CoTenant{
			Argv: []string{exe, "-test.run=^$"}, Env: []string{helperEnv + "=spike-cotenant"},
			Bytes: limit * 90 / 100, Share: 0.9, Ramp: 2 * time.Second,
			Hold: 5 * time.Second, After: limit * 40 / 100, AfterShare: 0.4,
		},
	})
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, os.ErrPermission) {
		t.Skipf("the host refuses the harness's cgroup: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
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
