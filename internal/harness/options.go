package harness

import (
	"io"
	"time"
)

// Defaults for [Options].
const (
	// DefaultTimeout bounds a run when Options.Timeout is zero.
	DefaultTimeout = 10 * time.Minute
	// DefaultSampleInterval is how often memory.current is sampled (20 Hz).
	DefaultSampleInterval = 50 * time.Millisecond
	// DefaultGroupPrefix starts the names of the cgroups the harness creates.
	DefaultGroupPrefix = "bench"
	// killGrace is how long the harness waits for a killed group to empty.
	killGrace = 10 * time.Second
	// drainGrace is how long output pipes may stay open after the group was emptied.
	drainGrace = 5 * time.Second
	// stderrTail is how many bytes of a loader's standard error a result keeps.
	stderrTail = 2048
)

// BallastArg is the placeholder in a loader's arguments that a run replaces with
// Options.Ballast in bytes ("0" without a trainer shape).
const BallastArg = "{ballast}"

// Loader is a program that loads a dataset and speaks package
// [github.com/psiflow/psiflow/internal/harness/protocol] on its standard output.
type Loader struct {
	// Name labels the loader in reports ("dataloader", "psiflow").
	Name string `json:"name"`
	// Argv is the command: the program (looked up in PATH when it has no slash) and its
	// arguments.
	Argv []string `json:"argv"`
	// Env is added to the harness's own environment ("KEY=value").
	Env []string `json:"env,omitempty"`
	// Dir is the working directory ("" for the harness's).
	Dir string `json:"dir,omitempty"`
}

// Options configure runs.
type Options struct {
	// MemoryLimit is the cgroup's hard memory limit in bytes; 0 or less runs
	// unconstrained (the group still measures peak memory and OOM kills).
	MemoryLimit int64
	// Timeout bounds a run's wall-clock time from its start; when it passes, every
	// process in the group is killed and the run reported as [TimedOut]. Zero means
	// [DefaultTimeout].
	Timeout time.Duration
	// Warmup is the number of leading batches left out of throughput and latency.
	Warmup int
	// Cold drops the page cache of Data before each run (see [DropCache]); the
	// loader's reads then come from the disk and their page cache is charged to the
	// run's group.
	Cold bool
	// Warm reads Data before each run (see [WarmCache]), so the loader finds it in the
	// page cache, charged to the harness's cgroup rather than the run's: the loader's
	// peak then excludes the dataset's cache. Cold wins when both are set.
	Warm bool
	// Data lists the dataset's files, for Cold and Warm.
	Data []string
	// Prewarm, if set, is a command (program and arguments) run to its end before each
	// run, outside the run's cgroup (in the harness's), after Cold or Warm: the files it
	// reads (a runtime's shared libraries and modules, as "python3 -c 'import torch'"
	// reads) are then in the page cache, charged to the harness's cgroup, and every
	// loader that maps them starts from the same state. Without it a run's peak holds
	// those pages only when the host evicted them since the last run, which varies with
	// the order of runs and the host's reclaim. Its standard output is discarded.
	Prewarm []string
	// SampleInterval is how often memory.current is sampled (DefaultSampleInterval when
	// zero).
	SampleInterval time.Duration
	// GroupPrefix starts the names of the run groups (DefaultGroupPrefix when empty).
	// Names are "<prefix>-<loader>-<seq>-<pid>", so that cgroup.Tree.RemoveStale(prefix)
	// sweeps the groups of a harness that was killed.
	GroupPrefix string
	// Stderr, if set, receives a copy of the loader's standard error.
	Stderr io.Writer
	// Timeline keeps the sampled memory usage of each run in Result.Memory.
	Timeline bool
	// CoTenant, if set with positive Bytes, is started in the run's group just before
	// the loader (blocked until it is in the group, like the loader), ramps its memory
	// and holds it until the loader has ended; see [CoTenant] and Result.CoTenant.
	CoTenant *CoTenant
	// Ballast is a trainer's ballast in bytes: [BallastArg] in the loader's arguments
	// becomes this number. When it is positive the loader command is a trainer (a
	// training loop consuming the batches, [Trainer]) that holds it: an OOM kill of
	// the loader's own process is then the trainer's, counted as the co-tenant's,
	// and the loader's kills are those of its other processes.
	Ballast int64
	// Shape labels the run's co-tenant cell in results ([Shape].String; set by
	// [Compare]).
	Shape string
}
