//go:build linux

package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/internal/kerneltest"
)

var unsafeTest = regexp.MustCompile(`[^A-Za-z0-9_.]+`)

// testOptions returns options whose groups are named after the test, and skips where
// cgroups cannot be created.
func testOptions(t *testing.T) Options {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.Cgroups, "creating cgroups needs root")
	}
	if _, err := cgroup.DetectLayout(); err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "no cgroups: %v", err)
	}
	return Options{GroupPrefix: testPrefix + "-" + unsafeTest.ReplaceAllString(t.Name(), "_"), Timeout: 30 * time.Second}
}

// skipNoMemoryController skips a test whose group cannot take a memory limit (a pure v2
// host that does not delegate the memory controller), and fails it on other errors.
func skipNoMemoryController(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, cgroup.ErrNoController) {
		kerneltest.Skip(t, kerneltest.Cgroups, "no memory controller for the group: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// assertRemoved fails the test when any directory of the run's group is still there.
func assertRemoved(t *testing.T, group string) {
	t.Helper()
	if group == "" {
		t.Fatal("result names no group")
	}
	for _, pat := range []string{"/sys/fs/cgroup/*/" + cgroup.DefaultParent + "/" + group, "/sys/fs/cgroup/" + cgroup.DefaultParent + "/" + group} {
		m, _ := filepath.Glob(pat)
		if len(m) > 0 {
			t.Errorf("group %s left behind: %v", group, m)
		}
	}
}

func TestRunFinished(t *testing.T) {
	o := testOptions(t)
	o.Warmup = 2
	res, err := Run(context.Background(), fake("fast", "emit:12:64:0.01"), o)
	if err != nil {
		t.Fatal(err)
	}
	assertRemoved(t, res.Group)
	if res.Outcome != Finished || res.ExitCode != 0 {
		t.Fatalf("outcome %s (exit %d, %s), want finished", res.Outcome, res.ExitCode, res.Detail)
	}
	// 10 measured batches of 64 over 10 gaps of 10 ms: 6400 samples/s exactly.
	if res.Batches != 12 || res.Samples != 12*64 || res.DoneSamples != 12*64 || res.Warmup != 2 {
		t.Errorf("batches %d samples %d done %d warm-up %d, want 12, 768, 768, 2", res.Batches, res.Samples, res.DoneSamples, res.Warmup)
	}
	if d := res.SamplesPerSec - 6400; d > 1e-6 || d < -1e-6 {
		t.Errorf("samples/s = %v, want 6400", res.SamplesPerSec)
	}
	if res.P50 != 10*time.Millisecond || res.P99 != 10*time.Millisecond {
		t.Errorf("p50 %v p99 %v, want 10ms", res.P50, res.P99)
	}
	if res.Ignored != 1 {
		t.Errorf("ignored %d lines, want the 1 log line", res.Ignored)
	}
	if res.OOMKills != 0 || res.Leftover != 0 {
		t.Errorf("OOM kills %d, leftover %d; want none", res.OOMKills, res.Leftover)
	}
}

func TestRunChargesMemoryToGroup(t *testing.T) {
	o := testOptions(t)
	o.MemoryLimit = 512 << 20
	o.Timeline = true
	res, err := Run(context.Background(), fake("alloc", "alloc:96"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	if res.Outcome != Finished {
		t.Fatalf("outcome %s (%s), want finished", res.Outcome, res.Detail)
	}
	if res.PeakBytes < 96<<20 || res.PeakBytes > o.MemoryLimit {
		t.Errorf("peak %d bytes (%s), want between 96 MiB and the 512 MiB limit", res.PeakBytes, res.PeakSource)
	}
	if res.PeakSampled <= 0 || len(res.Memory) == 0 {
		t.Errorf("no memory samples (peak sampled %d, %d points)", res.PeakSampled, len(res.Memory))
	}
	if res.Limit != o.MemoryLimit {
		t.Errorf("result limit %d, want %d", res.Limit, o.MemoryLimit)
	}
}

func TestRunOOMKilled(t *testing.T) {
	o := testOptions(t)
	o.MemoryLimit = 96 << 20
	res, err := Run(context.Background(), fake("hog", "alloc:1024"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	if res.Outcome != OOMKilled || res.OOMKills == 0 {
		t.Fatalf("outcome %s with %d OOM kills (%s), want oom-killed", res.Outcome, res.OOMKills, res.Detail)
	}
	if res.ExitCode != -1 {
		t.Errorf("exit code %d, want -1 (killed by a signal)", res.ExitCode)
	}
	if res.PeakBytes > o.MemoryLimit+(1<<20) || res.PeakBytes < o.MemoryLimit/2 {
		t.Errorf("peak %d bytes, want near the %d limit", res.PeakBytes, o.MemoryLimit)
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	o := testOptions(t)
	o.Timeout = time.Second
	start := time.Now()
	res, err := Run(context.Background(), fake("hang", "hang"), o)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	assertRemoved(t, res.Group)
	if res.Outcome != TimedOut || !strings.Contains(res.Detail, "did not finish") {
		t.Fatalf("outcome %s (%s), want timeout", res.Outcome, res.Detail)
	}
	if took > o.Timeout+killGrace {
		t.Errorf("run took %v with a %v timeout", took, o.Timeout)
	}
	if res.Wall < o.Timeout {
		t.Errorf("wall %v shorter than the timeout %v", res.Wall, o.Timeout)
	}
	if res.Batches != 1 {
		t.Errorf("batches %d, want the 1 reported before hanging", res.Batches)
	}
}

func TestRunCanceled(t *testing.T) {
	o := testOptions(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	o.Stderr = &stderr
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = Run(ctx, fake("hang", "hang"), o)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(killGrace + 5*time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	assertRemoved(t, res.Group)
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		name, mode string
		exit       int
		want       Outcome
		detail     []string
	}{
		{name: "exit status", mode: "fail", exit: 4, want: Failed, detail: []string{"exit status 4", "no done event", "stderr: boom"}},
		{name: "done with error", mode: "doneerr", exit: 0, want: Failed, detail: []string{"loader error: no such dataset"}},
		{name: "stopped below its floor", mode: "belowfloor", exit: protocol.ExitBelowFloor, want: Stopped, detail: []string{"loader error: stopped: the cgroup leaves the loader"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			var stderr bytes.Buffer
			o.Stderr = &stderr
			res, err := Run(context.Background(), fake("f", tt.mode), o)
			if err != nil {
				t.Fatal(err)
			}
			assertRemoved(t, res.Group)
			if res.Outcome != tt.want || res.ExitCode != tt.exit {
				t.Fatalf("outcome %s exit %d (%s), want %s with %d", res.Outcome, res.ExitCode, res.Detail, tt.want, tt.exit)
			}
			for _, d := range tt.detail {
				if !strings.Contains(res.Detail, d) {
					t.Errorf("detail %q lacks %q", res.Detail, d)
				}
			}
			if !strings.Contains(stderr.String(), res.StderrTail) {
				t.Errorf("stderr copy %q lacks the tail %q", stderr.String(), res.StderrTail)
			}
		})
	}
}

func TestRunKillsLeftovers(t *testing.T) {
	o := testOptions(t)
	start := time.Now()
	res, err := Run(context.Background(), fake("orphan", "orphan"), o)
	if err != nil {
		t.Fatal(err)
	}
	assertRemoved(t, res.Group)
	if res.Outcome != Finished {
		t.Fatalf("outcome %s (%s), want finished", res.Outcome, res.Detail)
	}
	if res.Leftover < 1 {
		t.Errorf("leftover %d, want the orphaned child counted", res.Leftover)
	}
	if took := time.Since(start); took > drainGrace {
		t.Errorf("run took %v: the orphan holding stdout was not killed promptly", took)
	}
}

func TestRunBadCommand(t *testing.T) {
	o := testOptions(t)
	_, err := Run(context.Background(), Loader{Name: "missing", Argv: []string{"/nonexistent/loader"}}, o)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("error %v, want one naming the loader", err)
	}
	if _, err := Run(context.Background(), Loader{Name: "empty"}, o); err == nil {
		t.Fatal("empty command accepted")
	}
}

func TestCompareAlternates(t *testing.T) {
	o := testOptions(t)
	o.Warmup = 1
	var seen []string
	rep, err := Compare(context.Background(), Plan{
		Loaders: []Loader{fake("A", "emit:6:64:0.01"), fake("B", "emit:6:64:0.02")},
		Limits:  []int64{0, 256 << 20},
		Rounds:  2,
		Options: o,
	}, func(r Result) { seen = append(seen, r.Loader) })
	skipNoMemoryController(t, err)
	want := "A B B A A B B A"
	if got := strings.Join(seen, " "); got != want {
		t.Errorf("run order %q, want %q", got, want)
	}
	if len(rep.Summaries) != 4 {
		t.Fatalf("%d summaries, want 4", len(rep.Summaries))
	}
	for _, s := range rep.Summaries {
		if s.Runs != 2 || s.Finished != 2 {
			t.Errorf("%s at %d: %d/%d finished, want 2/2", s.Loader, s.Limit, s.Finished, s.Runs)
		}
		wantRatio := 1.0
		if s.Loader == "B" {
			wantRatio = 0.5
		}
		if r := s.RoundRatios; r.N != 2 || r.Min < wantRatio-1e-9 || r.Max > wantRatio+1e-9 {
			t.Errorf("%s at %d: per-round ratios %+v, want 2 of %v", s.Loader, s.Limit, r, wantRatio)
		}
		if d := s.SpeedRatio - wantRatio; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s at %d: speed ratio %v, want %v", s.Loader, s.Limit, s.SpeedRatio, wantRatio)
		}
	}
	for _, r := range rep.Runs {
		assertRemoved(t, r.Group)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| none | B | 2/2 | 3200 (3200–3200) | 0.50 (0.50–0.50) | 20 (20–20) |", "| 256 MiB | A | 2/2 | 6400 (6400–6400) | 1.00 | 10 (10–10) |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md.String())
		}
	}
}

// BenchmarkRunOverhead measures what the harness adds to a run: creating the group,
// the blocked start, reading the output, the final reads and removing the group, with a
// loader that exits at once.
func BenchmarkRunOverhead(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("creating cgroups needs root")
	}
	l := Loader{Name: "true", Argv: []string{"/bin/sh", "-c", `echo '{"event":"done","t":0}'`}}
	o := Options{GroupPrefix: testPrefix + "-bench"}
	for b.Loop() {
		res, err := Run(context.Background(), l, o)
		if err != nil || res.Outcome != Finished {
			b.Fatalf("%v %s %s", err, res.Outcome, res.Detail)
		}
	}
}
