package harness

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/pressure"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  chanMutex
	buf bytes.Buffer
}

type chanMutex chan struct{}

func (m chanMutex) lock()   { m <- struct{}{} }
func (m chanMutex) unlock() { <-m }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.lock()
	defer b.mu.unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.lock()
	defer b.mu.unlock()
	return b.buf.String()
}

func parseEvents(t *testing.T, s string) []protocol.Event {
	t.Helper()
	var evs []protocol.Event
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		ev, ok, err := protocol.Parse(sc.Bytes())
		if err != nil || !ok {
			t.Fatalf("bad co-tenant line %q: ok %v, %v", sc.Text(), ok, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestRunCoTenantRampsThenHolds(t *testing.T) {
	const n = 4<<20 + 1 // rounded up to whole pages
	const ramp = 600 * time.Millisecond
	out := &syncBuffer{mu: make(chanMutex, 1)}
	hr, hw := io.Pipe()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- RunCoTenant(context.Background(), CoTenantConfig{Bytes: n, Ramp: ramp}, hr, out) }()
	// It holds until its input closes: wait for the held line, then check it still runs.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"held"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no held event within 10 s; output %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	heldAfter := time.Since(start)
	select {
	case err := <-done:
		t.Fatalf("co-tenant returned %v while holding", err)
	case <-time.After(50 * time.Millisecond):
	}
	hw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if heldAfter < ramp {
		t.Errorf("held after %v, before the %v ramp was over", heldAfter, ramp)
	}
	evs := parseEvents(t, out.String())
	pages := (int64(n) + pageSize - 1) / pageSize
	last := evs[len(evs)-1]
	if last.Event != protocol.Held || last.Bytes != pages*pageSize {
		t.Fatalf("last event %+v, want held with %d bytes", last, pages*pageSize)
	}
	// Ramp events: increasing bytes and times, the bytes following the clock (paced),
	// at most one per tenth.
	var ramps []protocol.Event
	for _, ev := range evs[:len(evs)-1] {
		if ev.Event != protocol.Ramp {
			t.Fatalf("unexpected event %+v", ev)
		}
		ramps = append(ramps, ev)
	}
	// A loaded machine may skip some tenths (a late tick touches more at once), but
	// not all of them.
	if len(ramps) < 1 || len(ramps) > 9 {
		t.Fatalf("%d ramp events, want 1 to 9: %+v", len(ramps), ramps)
	}
	for i, ev := range ramps {
		if i > 0 && (ev.Bytes <= ramps[i-1].Bytes || ev.T < ramps[i-1].T) {
			t.Errorf("ramp event %d %+v does not follow %+v", i, ev, ramps[i-1])
		}
		// After t of the ramp, at most t/ramp of the bytes (plus a tick) are touched.
		if allowed := float64(n) * (ev.T + coTenantTick.Seconds()) / ramp.Seconds(); float64(ev.Bytes) > allowed+float64(pageSize) {
			t.Errorf("ramp event %+v: %d bytes touched by %.3f s, more than the pace allows (%.0f)", ev, ev.Bytes, ev.T, allowed)
		}
	}
}

func TestRunCoTenantStopsDuringRamp(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := RunCoTenant(ctx, CoTenantConfig{Bytes: 64 << 20, Ramp: time.Hour}, strings.NewReader(""), &out)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stop during the ramp took %v", took)
	}
	if strings.Contains(out.String(), `"held"`) {
		t.Errorf("held after a stop during an hour-long ramp: %q", out.String())
	}
}

func TestRunCoTenantAtOnce(t *testing.T) {
	var out bytes.Buffer
	if err := RunCoTenant(context.Background(), CoTenantConfig{Bytes: 1 << 20}, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	evs := parseEvents(t, out.String())
	if len(evs) != 1 || evs[0].Event != protocol.Held || evs[0].Bytes != 1<<20 {
		t.Fatalf("events %+v, want one held event of 1 MiB", evs)
	}
}

// A spike holds its peak for the hold, then falls to what it keeps after, and holds
// that until its input closes.
func TestRunCoTenantSpike(t *testing.T) {
	const peak, after = 8 << 20, 2<<20 + 1 // after is rounded up to whole pages
	const hold = 300 * time.Millisecond
	out := &syncBuffer{mu: make(chanMutex, 1)}
	hr, hw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunCoTenant(context.Background(), CoTenantConfig{Bytes: peak, Hold: hold, After: after}, hr, out)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"fell"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no fell event within 20 s; output %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("co-tenant returned %v after its fall, before its input closed", err)
	case <-time.After(50 * time.Millisecond):
	}
	hw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := parseEvents(t, out.String())
	if len(evs) != 2 || evs[0].Event != protocol.Held || evs[0].Bytes != peak || evs[1].Event != protocol.Fell {
		t.Fatalf("events %+v, want held at %d then fell", evs, peak)
	}
	keep := (int64(after) + pageSize - 1) / pageSize * pageSize
	if evs[1].Bytes != keep {
		t.Errorf("fell to %d bytes, want %d", evs[1].Bytes, keep)
	}
	if d := evs[1].T - evs[0].T; d < hold.Seconds() {
		t.Errorf("fell %.3f s after holding, before the %v hold was over", d, hold)
	}
}

// A stop during a spike's hold ends it without a fall.
func TestRunCoTenantStopsDuringSpike(t *testing.T) {
	var out bytes.Buffer
	err := RunCoTenant(context.Background(), CoTenantConfig{Bytes: 1 << 20, Hold: time.Hour, After: 4096}, strings.NewReader(""), &out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"fell"`) {
		t.Errorf("fell after a stop during an hour-long hold: %q", out.String())
	}
}

func TestRunCoTenantBadConfig(t *testing.T) {
	for _, c := range []CoTenantConfig{{Bytes: 0}, {Bytes: -1}, {Bytes: 1, Ramp: -time.Second},
		{Bytes: 1 << 20, Hold: -time.Second}, {Bytes: 1 << 20, After: 4096},
		{Bytes: 1 << 20, Hold: time.Second, After: 1 << 20}, {Bytes: 1 << 20, Hold: time.Second, After: -1}} {
		if err := RunCoTenant(context.Background(), c, strings.NewReader(""), io.Discard); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestParseCoTenantArgs(t *testing.T) {
	tests := []struct {
		args []string
		want CoTenantConfig
		err  string
	}{
		{args: []string{"-bytes", "150M", "-ramp", "5s"}, want: CoTenantConfig{Bytes: 150 << 20, Ramp: 5 * time.Second}},
		{args: []string{"-bytes", "4096"}, want: CoTenantConfig{Bytes: 4096, Ramp: 5 * time.Second}},
		{args: []string{"-bytes", "1GiB", "-ramp", "0s"}, want: CoTenantConfig{Bytes: 1 << 30}},
		{args: []string{}, err: "-bytes is required"},
		{args: []string{"-bytes", "lots"}, err: `-bytes "lots"`},
		{args: []string{"-bytes", "0"}, err: "positive size"},
		{args: []string{"-bytes", "1M", "-ramp", "-1s"}, err: "-ramp"},
		{args: []string{"-bytes", "1M", "extra"}, err: "unexpected arguments"},
		{args: []string{"-bytes", "100M", "-ramp", "1s", "-hold", "5s", "-after", "40M"}, want: CoTenantConfig{Bytes: 100 << 20, Ramp: time.Second, Hold: 5 * time.Second, After: 40 << 20}},
		{args: []string{"-bytes", "100M", "-hold", "5s", "-after", "100M"}, err: "after"},
		{args: []string{"-bytes", "100M", "-after", "40M"}, err: "needs -hold"},
		{args: []string{"-bytes", "100M", "-hold", "5s", "-after", "x"}, err: `-after "x"`},
		{args: []string{"-frob"}, err: "flag provided but not defined"},
	}
	for _, tt := range tests {
		got, err := ParseCoTenantArgs(tt.args, io.Discard)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one containing %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

func TestSteadyFluctuation(t *testing.T) {
	var pts []Point
	// Ramp from 0 to 100 over the first second, then alternate 90 and 110 for 2 s.
	for i := range 20 {
		pts = append(pts, Point{T: float64(i) * 0.05, Bytes: int64(i * 5)})
	}
	for i := range 40 {
		v := int64(90)
		if i%2 == 1 {
			v = 110
		}
		pts = append(pts, Point{T: 1 + float64(i)*0.05, Bytes: v})
	}
	f := SteadyFluctuation(pts, 1, 3)
	if f.N != 40 || math.Abs(f.Mean-100) > 1e-9 || math.Abs(f.CV-0.1) > 1e-9 {
		t.Errorf("steady window: %+v, want 40 samples, mean 100, CV 0.1", f)
	}
	// The ramp included makes it fluctuate much more.
	if all := SteadyFluctuation(pts, 0, 3); all.CV < 0.2 {
		t.Errorf("with the ramp: CV %v, want > 0.2", all.CV)
	}
	// Too few samples: no CV.
	if few := SteadyFluctuation(pts, 1, 1.2); few.N != 5 || few.CV != 0 {
		t.Errorf("short window: %+v, want 5 samples and no CV", few)
	}
	if none := SteadyFluctuation(nil, 0, 1); none.N != 0 || none.CV != 0 {
		t.Errorf("no samples: %+v", none)
	}
}

func TestSteadyWindow(t *testing.T) {
	var pts []Point
	for i := range 100 {
		v := int64(1000)
		if i < 40 {
			v = int64(i) // warm-up and ramp
		}
		pts = append(pts, Point{T: float64(i) * 0.05, Bytes: v})
	}
	arrived := []float64{0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5}
	// Warm-up of 2 batches ends at 1.0 s; the co-tenant held at 2.0 s.
	co := &coProc{held: 2 * time.Second}
	f := steadyWindow(pts, arrived, 2, co)
	if f.From != 2 || f.To != 4.5 || f.CV != 0 || f.N != 51 {
		t.Errorf("window %+v, want 2 s to 4.5 s, 51 samples, CV 0", f)
	}
	if f := steadyWindow(pts, arrived, 2, nil); f.From != 1 || f.CV == 0 {
		t.Errorf("alone: window %+v, want from the warm-up's end at 1 s, the ramp included", f)
	}
	if f := steadyWindow(pts, arrived, 2, &coProc{}); f.N != 0 {
		t.Errorf("co-tenant never held: %+v, want no steady state", f)
	}
	if f := steadyWindow(pts, nil, 2, nil); f.N != 0 {
		t.Errorf("no batches: %+v, want no steady state", f)
	}
}

func TestPSIDelta(t *testing.T) {
	a := pressure.PSI{Some: pressure.Stall{Total: time.Second}, Full: pressure.Stall{Total: 500 * time.Millisecond}}
	b := pressure.PSI{Some: pressure.Stall{Total: 3 * time.Second}, Full: pressure.Stall{Total: 1500 * time.Millisecond}}
	d := psiDelta(a, b, 10*time.Second, "x")
	if d.Some != 2*time.Second || d.Full != time.Second || math.Abs(d.SomePct-20) > 1e-9 || math.Abs(d.FullPct-10) > 1e-9 {
		t.Errorf("delta %+v, want 2 s (20%%) some, 1 s (10%%) full", d)
	}
	if d := psiDelta(b, a, time.Second, "x"); d.Some != 0 || d.Full != 0 {
		t.Errorf("totals that went down: %+v, want 0", d)
	}
	if d := psiDelta(a, b, 0, "x"); d.SomePct != 0 {
		t.Errorf("zero wall: %+v", d)
	}
}

// coRun is a synthetic run for summary tests.
func coRun(loader string, round int, share float64, wall time.Duration, outcome Outcome, fate CoTenantFate, full float64, cv float64) Result {
	r := Result{Loader: loader, Round: round, Limit: 256 << 20, Share: share, Wall: wall, Outcome: outcome,
		PSI: &PSITotals{SomePct: 2 * full, FullPct: full}, Steady: Fluctuation{CV: cv, N: 50}}
	r.SamplesPerSec = 1000 / wall.Seconds()
	if share > 0 {
		r.CoTenant = &CoTenantResult{Share: share, Fate: fate}
		if fate == CoOOMKilled {
			r.CoTenantOOMKills, r.OOMKills = 1, 1
		}
	}
	return r
}

func TestSummarizeCoTenant(t *testing.T) {
	runs := []Result{
		coRun("A", 0, 0, 10*time.Second, Finished, "", 0, 0.02),
		coRun("A", 0, 0.7, 30*time.Second, Finished, CoOOMKilled, 40, 0.2),
		coRun("B", 0, 0, 5*time.Second, Finished, "", 0, 0.01),
		coRun("B", 0, 0.7, 6*time.Second, Finished, CoSurvived, 1, 0.03),
		coRun("A", 1, 0, 20*time.Second, Finished, "", 0, 0.02),
		coRun("A", 1, 0.7, 30*time.Second, TimedOut, CoHarnessKilled, 80, 0.2),
		coRun("B", 1, 0, 4*time.Second, Finished, "", 0, 0.01),
		coRun("B", 1, 0.7, 8*time.Second, Finished, CoSurvived, 3, 0.05),
	}
	loaders := []Loader{{Name: "A", Argv: []string{"a"}}, {Name: "B", Argv: []string{"b"}}}
	sums := summarize(runs, loaders, []int64{256 << 20}, []Shape{{Kind: Alone}, {Kind: Ramp, Share: 0.7}}, "A")
	if len(sums) != 4 {
		t.Fatalf("%d summaries, want 4", len(sums))
	}
	get := func(loader string, share float64) Summary {
		for _, s := range sums {
			if s.Loader == loader && s.Share == share {
				return s
			}
		}
		t.Fatalf("no summary for %s at %v", loader, share)
		return Summary{}
	}
	a, b := get("A", 0.7), get("B", 0.7)
	if a.CoTenantOOMKilled != 1 || a.CoTenantHarnessKilled != 1 || a.Finished != 1 || a.LoaderOOMKills != 0 {
		t.Errorf("A at 70%%: %+v", a)
	}
	// A: round 0 only (round 1 timed out): 30/10.
	if a.Slowdown.N != 1 || a.Slowdown.Median != 3 {
		t.Errorf("A slowdown %+v, want 3 from one round", a.Slowdown)
	}
	// B: 6/5 and 8/4.
	if b.Slowdown.N != 2 || math.Abs(b.Slowdown.Min-1.2) > 1e-9 || b.Slowdown.Max != 2 {
		t.Errorf("B slowdown %+v, want 1.2 and 2", b.Slowdown)
	}
	if b.PSIFull.Median != 2 || b.Fluctuation.Max != 5 || b.CoTenantOOMKilled != 0 {
		t.Errorf("B PSI full %+v fluctuation %+v kills %d", b.PSIFull, b.Fluctuation, b.CoTenantOOMKilled)
	}
	if s := get("B", 0); s.Slowdown.N != 0 || s.Runs != 2 {
		t.Errorf("B alone: %+v", s)
	}
	rep := &Report{Baseline: "A", Loaders: loaders, Runs: runs, Summaries: sums, Shares: []float64{0, 0.7},
		CoTenant: &CoTenant{Argv: []string{"psiflow", "cotenant"}, Ramp: 5 * time.Second}}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 256 MiB | 70% | A | 1/2 | 1/2 | 0 | 3.00 | 0.33 | 0 | – | – | 120.0 (80.0–160.0) | 60.0 (40.0–80.0) | 20.0 (20.0–20.0) |",
		"| 256 MiB | 70% | B | 2/2 | 0/2 | 0 | 1.60 (1.20–2.00) | 0.67 (0.50–0.83) | 0 | – | – | 4.0 (2.0–6.0) | 2.0 (1.0–3.0) | 4.0 (3.0–5.0) |",
		"| 256 MiB | alone | B | 2/2 | – | 0 | 1.00 | 1.00 |",
		"| 256 MiB, 70% | B | 2/2 |",
		"- co-tenant: `psiflow cotenant -bytes SHARE×LIMIT -ramp 5s`",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	// A saved report reads back with the same summaries.
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(&js)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Summaries) != 4 || back.Summaries[1].Slowdown != sums[1].Slowdown || back.Summaries[3].CoTenantOOMKilled != sums[3].CoTenantOOMKilled {
		t.Errorf("read back summaries differ:\n%+v\n%+v", back.Summaries, sums)
	}
}

func TestCompareRejectsBadShares(t *testing.T) {
	l := []Loader{{Name: "A", Argv: []string{"a"}}}
	co := CoTenant{Argv: []string{"x"}}
	for _, p := range []Plan{
		{Loaders: l, Limits: []int64{1 << 28}, Shares: []float64{0, 1}, CoTenant: co},
		{Loaders: l, Limits: []int64{1 << 28}, Shares: []float64{-0.1}, CoTenant: co},
		{Loaders: l, Limits: []int64{1 << 28}, Shares: []float64{0.5, 0.5}, CoTenant: co},
		{Loaders: l, Limits: []int64{0, 1 << 28}, Shares: []float64{0.5}, CoTenant: co},
		{Loaders: l, Limits: []int64{1 << 28}, Shares: []float64{0.5}},
	} {
		if _, err := Compare(context.Background(), p, nil); err == nil {
			t.Errorf("plan with shares %v, limits %v accepted", p.Shares, p.Limits)
		}
	}
}

func TestMergeReports(t *testing.T) {
	loaders := []Loader{{Name: "A", Argv: []string{"a"}}, {Name: "B", Argv: []string{"b"}}}
	mk := func(runs ...Result) *Report {
		return &Report{Baseline: "A", Loaders: loaders, Rounds: 1, Runs: runs, Shares: []float64{0, 0.7},
			CoTenant: &CoTenant{Argv: []string{"c"}}}
	}
	r1 := mk(coRun("A", 0, 0, 10*time.Second, Finished, "", 0, 0), coRun("A", 0, 0.7, 20*time.Second, Finished, CoSurvived, 1, 0),
		coRun("B", 0, 0, 5*time.Second, Finished, "", 0, 0), coRun("B", 0, 0.7, 5*time.Second, Finished, CoOOMKilled, 1, 0))
	r2 := mk(coRun("A", 0, 0, 10*time.Second, Finished, "", 0, 0), coRun("A", 0, 0.7, 40*time.Second, Finished, CoSurvived, 1, 0),
		coRun("B", 0, 0, 5*time.Second, Finished, "", 0, 0), coRun("B", 0, 0.7, 10*time.Second, Finished, CoOOMKilled, 1, 0))
	m, err := MergeReports(r1, r2)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rounds != 2 || len(m.Runs) != 8 || m.Runs[4].Round != 1 {
		t.Fatalf("merged: %d rounds, %d runs, round of the 5th %d; want 2, 8, 1", m.Rounds, len(m.Runs), m.Runs[4].Round)
	}
	for _, s := range m.Summaries {
		switch {
		case s.Loader == "A" && s.Share == 0.7:
			if s.Slowdown.N != 2 || s.Slowdown.Min != 2 || s.Slowdown.Max != 4 {
				t.Errorf("A at 70%%: slowdown %+v, want 2 and 4 (per round)", s.Slowdown)
			}
		case s.Loader == "B" && s.Share == 0.7:
			if s.CoTenantOOMKilled != 2 || s.Runs != 2 {
				t.Errorf("B at 70%%: %d of %d co-tenants killed, want 2 of 2", s.CoTenantOOMKilled, s.Runs)
			}
		}
	}
	other := mk()
	other.Loaders = []Loader{{Name: "A", Argv: []string{"a"}}, {Name: "B", Argv: []string{"b", "-x"}}}
	if _, err := MergeReports(r1, other); err == nil || !strings.Contains(err.Error(), "loader 2") {
		t.Errorf("merging different commands: %v, want an error naming loader 2", err)
	}
	if _, err := MergeReports(); err == nil {
		t.Error("merging nothing succeeded")
	}
}
