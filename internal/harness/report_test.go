package harness

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSummarizeAndMarkdown(t *testing.T) {
	runs := []Result{
		{Loader: "dataloader", Outcome: Finished, Metrics: Metrics{SamplesPerSec: 580, P50: 100 * time.Millisecond, P99: 300 * time.Millisecond}, PeakBytes: 230 << 20},
		{Loader: "dataloader", Round: 1, Outcome: Finished, Metrics: Metrics{SamplesPerSec: 600, P50: 110 * time.Millisecond, P99: 340 * time.Millisecond}, PeakBytes: 236 << 20},
		{Loader: "psiflow", Outcome: Finished, Metrics: Metrics{SamplesPerSec: 900}, PeakBytes: 100 << 20},
		{Loader: "psiflow", Round: 1, Outcome: Finished, Metrics: Metrics{SamplesPerSec: 880}, PeakBytes: 110 << 20},
		{Loader: "dataloader", Limit: 192 << 20, Outcome: TimedOut, PeakBytes: 192 << 20},
		{Loader: "dataloader", Limit: 192 << 20, Round: 1, Outcome: OOMKilled, OOMKills: 2, PeakBytes: 192 << 20},
		{Loader: "psiflow", Limit: 192 << 20, Outcome: Finished, Metrics: Metrics{SamplesPerSec: 850}, PeakBytes: 150 << 20},
		{Loader: "psiflow", Limit: 192 << 20, Round: 1, Outcome: Failed, PeakBytes: 50 << 20},
	}
	loaders := []Loader{{Name: "dataloader", Argv: []string{"python3", "dataloader.py"}}, {Name: "psiflow", Argv: []string{"loader"}}}
	sums := summarize(runs, loaders, []int64{0, 192 << 20}, []Shape{{Kind: Alone}}, "dataloader")
	if len(sums) != 4 {
		t.Fatalf("%d summaries, want 4", len(sums))
	}
	if s := sums[1]; s.SpeedRatio != 890.0/590 || s.PeakRatio != 105.0/233 {
		t.Errorf("psiflow ratios %v %v, want %v %v", s.SpeedRatio, s.PeakRatio, 890.0/590, 105.0/233)
	}
	if r := sums[1].RoundRatios; r.N != 2 || r.Min != 880.0/600 || r.Max != 900.0/580 {
		t.Errorf("psiflow per-round ratios %+v, want 880/600 and 900/580", r)
	}
	if s := sums[2]; s.Finished != 0 || s.TimedOut != 1 || s.OOMKilled != 1 || s.OOMKills != 2 || s.SamplesPerSec.N != 0 || s.Peak.N != 2 {
		t.Errorf("dataloader at 192 MiB = %+v", s)
	}
	if s := sums[3]; s.SpeedRatio != 0 || s.Finished != 1 || s.Runs != 2 {
		t.Errorf("psiflow at 192 MiB = %+v, want no speed ratio against a baseline that never finished", s)
	}
	rep := &Report{Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Host: "h", CPUs: 2, Rounds: 2, Warmup: 3, Timeout: time.Minute,
		Cold: true, Baseline: "dataloader", Loaders: loaders, Runs: runs, Summaries: sums}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"2026-01-02 03:04 UTC on h (2 CPUs): 2 round(s)", "cold (page cache",
		"| none | dataloader | 2/2 | 590 (580–600) | 1.00 | 105 (100–110) | 320 (300–340) | 233 (230–236) | 1.00 | 0 |",
		"| none | psiflow | 2/2 | 890 (880–900) | 1.51 (1.47–1.55) |",
		"| 192 MiB | dataloader | 0/2 (1 timed out, 1 OOM-killed) | DNF | – | DNF | DNF | 192 (192–192) | 1.00 | 2 |",
		"| 192 MiB | psiflow | 1/2 (1 failed) | 850 | – |",
		"- dataloader: `python3 dataloader.py`",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != len(runs) || back.Summaries[1].SpeedRatio != sums[1].SpeedRatio || back.Runs[5].Outcome != OOMKilled {
		t.Errorf("JSON round trip lost data: %+v", back.Summaries)
	}
	// ReadReport recomputes the summaries from the runs alone.
	var stripped bytes.Buffer
	rep.Summaries = nil
	if err := rep.WriteJSON(&stripped); err != nil {
		t.Fatal(err)
	}
	again, err := ReadReport(&stripped)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Summaries) != 4 || again.Summaries[1].RoundRatios != sums[1].RoundRatios || again.Summaries[3].Limit != 192<<20 {
		t.Errorf("ReadReport summaries %+v, want %+v", again.Summaries, sums)
	}
	if _, err := ReadReport(strings.NewReader("{")); err == nil {
		t.Error("ReadReport accepted broken JSON")
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "none"}, {-1, "none"}, {256 << 20, "256 MiB"}, {2 << 30, "2 GiB"}, {1000, "1000 B"}} {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestWriteSVG(t *testing.T) {
	mem := func(peak int64) []Point {
		return []Point{{T: 0, Bytes: 0}, {T: 1, Bytes: peak / 2}, {T: 2, Bytes: peak}}
	}
	rep := &Report{
		Loaders: []Loader{{Name: "dataloader"}, {Name: "psi<flow>"}},
		Runs: []Result{
			{Loader: "dataloader", Limit: 256 << 20, Outcome: TimedOut, Memory: mem(256 << 20)},
			{Loader: "psi<flow>", Limit: 256 << 20, Outcome: Finished, Memory: mem(60 << 20)},
			{Loader: "psi<flow>", Limit: 0, Outcome: Finished, Memory: mem(70 << 20)},
			{Loader: "dataloader", Limit: 0, Outcome: Finished},
		},
	}
	var b bytes.Buffer
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<svg", "limit 256 MiB", "limit none", "psi&lt;flow&gt; r0: finished", "dataloader r0: timeout", "stroke-dasharray", "<circle"} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(s, "<polyline"); n != 3 {
		t.Errorf("%d lines drawn, want 3 (the run without a series is left out)", n)
	}
	if err := (&Report{Runs: []Result{{Loader: "x"}}}).WriteSVG(&b); err == nil {
		t.Error("a report without memory series drew a plot")
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.3: 0.3, 1: 1, 1.1: 1.2, 3: 3, 7: 8, 201.6: 250, 19.5: 20, 9: 10} {
		if got := niceCeil(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
