package harness

import "time"

// Outcome is how a run ended.
type Outcome string

// Outcomes.
const (
	// Finished: the loader wrote a done event without error and exited with status 0.
	Finished Outcome = "finished"
	// TimedOut: the run passed Options.Timeout and its group was killed.
	TimedOut Outcome = "timeout"
	// OOMKilled: the kernel's OOM killer killed a process of the group and the loader
	// did not finish.
	OOMKilled Outcome = "oom-killed"
	// Stopped: the loader stopped on its own because its cgroup left it less than its
	// floor (exit status [protocol.ExitBelowFloor], psiflow's -below-floor stop), with no OOM
	// kill of its own: it yielded to the co-tenant with a message instead of dying.
	Stopped Outcome = "stopped"
	// Failed: the loader exited without finishing for another reason.
	Failed Outcome = "failed"
)

// Point is one memory sample.
type Point struct {
	// T is seconds since the run started.
	T float64 `json:"t"`
	// Bytes is the group's memory.current (v1: memory.usage_in_bytes).
	Bytes int64 `json:"bytes"`
}

// Result is one run of one loader.
type Result struct {
	// Loader is the loader's name; Round its round in a comparison (0 for a single run).
	Loader string `json:"loader"`
	Round  int    `json:"round"`
	// Limit is the memory limit in bytes (0: unconstrained); Cold whether the page cache
	// of the data was dropped first.
	Limit int64 `json:"limit_bytes"`
	Cold  bool  `json:"cold"`
	Warm  bool  `json:"warm"`
	// Group is the cgroup the run used (removed afterwards).
	Group string `json:"group"`
	// Start is when the loader was started; Wall the time until it exited (or was
	// killed), start-up included.
	Start time.Time     `json:"start"`
	Wall  time.Duration `json:"wall_ns"`
	// Outcome is how the run ended; Detail says more when it did not finish (exit
	// status, the done event's error, the last line of standard error).
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail,omitempty"`
	// Said is what the loader said about why it did not finish: its done event's
	// error, else the last line of its standard error ("" when it finished or said
	// nothing). A loader that stopped below its floor names the limit and the
	// floor there.
	Said string `json:"said,omitempty"`
	// ExitCode is the loader's exit status, or -1 when it was killed by a signal.
	ExitCode int `json:"exit_code"`
	// Metrics are computed from the batch events (see [Measure]).
	Metrics
	// DoneSamples is the loader's own total from its done event (-1 without one).
	DoneSamples int64 `json:"done_samples"`
	// PeakBytes is the group's peak memory: the larger of PeakFile and PeakSampled.
	PeakBytes int64 `json:"peak_bytes"`
	// PeakFile is the kernel's own peak counter (v1 memory.max_usage_in_bytes, v2
	// memory.peak), 0 where the kernel has none; PeakSource names the file, or
	// "memory.current samples".
	PeakFile   int64  `json:"peak_file_bytes"`
	PeakSource string `json:"peak_source"`
	// PeakSampled is the largest memory.current sample.
	PeakSampled int64 `json:"peak_sampled_bytes"`
	// OOMKills counts processes of the group killed by the OOM killer, the co-tenant's
	// included.
	OOMKills uint64 `json:"oom_kills"`
	// LoaderOOMKills counts those that were the loader's (OOMKills minus the
	// co-tenant's); CoTenantOOMKills is 1 when the OOM killer chose the co-tenant
	// (the co-tenant process, or a trainer's own process).
	LoaderOOMKills   uint64 `json:"loader_oom_kills"`
	CoTenantOOMKills uint64 `json:"cotenant_oom_kills"`
	// CoTenant is what became of the co-tenant process (nil without one); Share
	// repeats its share of the limit (its peak for a spike, a trainer's ballast; 0
	// alone) and Shape the run's co-tenant cell ([Shape].String; "" from a single
	// [Run] without Options.Shape).
	CoTenant *CoTenantResult `json:"cotenant,omitempty"`
	Share    float64         `json:"cotenant_share"`
	Shape    string          `json:"cotenant_shape,omitempty"`
	// Ballast is a trainer's ballast in bytes (Options.Ballast); TrainerOOMKilled is
	// true when the OOM killer took the trainer's own process (then counted in
	// CoTenantOOMKills).
	Ballast          int64 `json:"ballast_bytes,omitempty"`
	TrainerOOMKilled bool  `json:"trainer_oom_killed,omitempty"`
	// Pauses counts the loader's pauses below its floor and Paused adds up their
	// time, from its pause and resume events (see [Pauses]).
	Pauses int           `json:"pauses"`
	Paused time.Duration `json:"paused_ns"`
	// Keys says whether every delivered sample arrived exactly once (see [KeyCheck]).
	Keys KeyCheck `json:"keys"`
	// PSI is the group's memory stall over the run, from memory.pressure at the start
	// and when the loader ended (nil where the group has no such file; PSIError says
	// why).
	PSI      *PSITotals `json:"psi,omitempty"`
	PSIError string     `json:"psi_error,omitempty"`
	// Steady is the fluctuation of memory.current in the run's steady state: from the
	// end of the warm-up (and the co-tenant's ramp) to the loader's last batch.
	Steady Fluctuation `json:"steady"`
	// Leftover counts processes still in the group after the loader exited (killed
	// by the harness).
	Leftover int `json:"leftover_processes"`
	// Ignored counts standard-output lines that were not protocol lines.
	Ignored int `json:"ignored_lines"`
	// Memory is the sampled usage when Options.Timeline is set.
	Memory []Point `json:"memory,omitempty"`
	// StderrTail is the end of the loader's standard error.
	StderrTail string `json:"stderr_tail,omitempty"`
}
