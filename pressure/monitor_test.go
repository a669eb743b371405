package pressure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeSource is a Source fed by the test.
type fakeSource struct {
	ch  chan Event
	err error
}

func newFakeSource() *fakeSource           { return &fakeSource{ch: make(chan Event)} }
func (f *fakeSource) Events() <-chan Event { return f.ch }
func (f *fakeSource) Err() error           { return f.err }
func (f *fakeSource) Describe() string     { return "fake" }

// TestMonitorClosesAndRecovers drives a monitor with fake time: a full trigger stops
// the gate, the level falls after Hold, and permits come back additively after Quiet.
func TestMonitorClosesAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newFakeSource()
		model, _ := NewModel(ModelConfig{Hold: 4 * time.Second, MinDwell: time.Second})
		gate, _ := NewGate(Policy{MaxPermits: 8, Quiet: 2 * time.Second, Step: 2, StepEvery: time.Second})
		rec := NewRecorder(time.Now())
		var changes []string
		m := &Monitor{Source: src, Model: model, Gate: gate, Recorder: rec,
			OnLevel: func(from, to Level, at time.Time) { changes = append(changes, from.String()+">"+to.String()) }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()

		start := time.Now()
		src.ch <- Event{Time: time.Now(), Signal: SignalFull, Share: 0.05, Window: 2 * time.Second, Count: 1}
		synctest.Wait()
		if st := gate.Stats(); st.Limit != 0 || st.Level != LevelFull {
			t.Fatalf("after a full trigger: %+v", st)
		}
		time.Sleep(4*time.Second - time.Nanosecond)
		synctest.Wait()
		if gate.Limit() != 0 || gate.Stats().Level != LevelFull {
			t.Fatalf("before Hold ends: limit %d level %v", gate.Limit(), gate.Stats().Level)
		}
		time.Sleep(time.Nanosecond) // t = 4s: Normal
		synctest.Wait()
		if gate.Stats().Level != LevelNormal || gate.Limit() != 0 {
			t.Fatalf("at 4s: level %v limit %d, want normal and still closed (quiet period)", gate.Stats().Level, gate.Limit())
		}
		time.Sleep(2 * time.Second) // t = 6s: first step
		synctest.Wait()
		if gate.Limit() != 2 {
			t.Fatalf("at 6s limit %d, want 2", gate.Limit())
		}
		time.Sleep(3 * time.Second) // t = 9s: 8
		synctest.Wait()
		if gate.Limit() != 8 {
			t.Fatalf("at 9s limit %d, want 8", gate.Limit())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if strings.Join(changes, ",") != "normal>full,full>normal" {
			t.Fatalf("level changes %v", changes)
		}
		d := rec.Snapshot(start.Add(10 * time.Second))
		if d.Levels[LevelFull].Time != 4*time.Second || d.Levels[LevelFull].Entries != 1 || d.Levels[LevelNormal].Time != 6*time.Second {
			t.Fatalf("distribution %+v", d.Levels)
		}
	})
}

func TestMonitorReturnsSourceError(t *testing.T) {
	src := newFakeSource()
	src.err = errors.New("cgroup gone")
	close(src.ch)
	model, _ := NewModel(ModelConfig{})
	err := (&Monitor{Source: src, Model: model}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cgroup gone") {
		t.Fatalf("Run = %v, want the source's error", err)
	}
}

func TestMonitorShedErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newFakeSource()
		model, _ := NewModel(ModelConfig{})
		gate, _ := NewGate(Policy{})
		gate.OnShed("pool", func(context.Context) error { return errors.New("busy") })
		var got []error
		m := &Monitor{Source: src, Model: model, Gate: gate, OnShedError: func(err error) { got = append(got, err) }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		src.ch <- Event{Time: time.Now(), Signal: SignalOOMKill, Count: 1}
		synctest.Wait()
		cancel()
		<-done
		if len(got) != 1 || !strings.Contains(got[0].Error(), "shed pool: busy") {
			t.Fatalf("shed errors %v", got)
		}
	})
}

// TestPollerShares writes a fake PSI file and checks the shares the poller measures.
func TestPollerShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "memory.pressure")
		write := func(someUS, fullUS int) {
			data := "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(someUS) + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(fullUS) + "\n"
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(1000, 0)
		ctx, cancel := context.WithCancel(context.Background())
		src, err := OpenPoller(ctx, PollerConfig{Path: path, Interval: time.Second, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		write(1000+250000, 100000) // 25% some, 10% full over the next second
		some, full := <-src.Events(), <-src.Events()
		if some.Signal != SignalSome || some.Share != 0.25 || !some.Polled || full.Signal != SignalFull || full.Share != 0.1 {
			t.Fatalf("samples %+v %+v", some, full)
		}
		if !strings.Contains(src.Describe(), "(test)") {
			t.Fatalf("Describe %q lacks the reason", src.Describe())
		}
		os.Remove(path)
		for range src.Events() {
		}
		if err := src.Err(); !errors.Is(err, ErrNoPSI) {
			t.Fatalf("poller error after the file went away = %v", err)
		}
		cancel()
	})
}

// TestPollerMinShare: a backstop poller drops samples below its share.
func TestPollerMinShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "memory.pressure")
		write := func(someUS, fullUS int) {
			data := "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(someUS) + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(fullUS) + "\n"
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(0, 0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src, err := OpenPoller(ctx, PollerConfig{Path: path, Interval: time.Second, MinShare: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		write(50000, 10000) // 5% some, 1% full: both dropped
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		write(50000+300000, 10000+200000) // 30% some, 20% full: both delivered
		some, full := <-src.Events(), <-src.Events()
		if some.Signal != SignalSome || some.Share != 0.3 || full.Signal != SignalFull || full.Share != 0.2 {
			t.Fatalf("samples %+v %+v: want the heavy second sample only", some, full)
		}
		cancel()
		for range src.Events() {
		}
	})
	if _, err := OpenPoller(context.Background(), PollerConfig{Path: "/proc/pressure/memory", MinShare: 2}); err == nil {
		t.Fatal("MinShare 2 accepted")
	}
}

func TestPollerRefusesFastIntervals(t *testing.T) {
	_, err := OpenPoller(context.Background(), PollerConfig{Path: "/proc/pressure/memory", Interval: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "stops its triggers") {
		t.Fatalf("OpenPoller(50ms) error = %v", err)
	}
}

func TestMemoryEventsAndMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		counts := MemoryCounts{Max: 10}
		read := func() (MemoryCounts, error) {
			mu.Lock()
			defer mu.Unlock()
			return counts, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := OpenMemoryEvents(ctx, MemoryEventsConfig{Name: "a", Read: read, Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b := newFakeSource()
		m := Merge(ctx, a, b)
		mu.Lock()
		counts = MemoryCounts{Max: 13, OOMKill: 1}
		mu.Unlock()
		got := map[Signal]uint64{}
		for range 2 {
			ev := <-m.Events()
			got[ev.Signal] = ev.Count
		}
		if got[SignalMemMax] != 3 || got[SignalOOMKill] != 1 {
			t.Fatalf("increments %v, want mem_max 3 and oom_kill 1", got)
		}
		go func() { b.ch <- Event{Signal: SignalVMLow, Count: 7} }()
		if ev := <-m.Events(); ev.Signal != SignalVMLow {
			t.Fatalf("merged event %v", ev)
		}
		cancel()
		b.err = errors.New("b failed")
		close(b.ch)
		for range m.Events() {
		}
		if err := m.Err(); err == nil || !strings.Contains(err.Error(), "b failed") {
			t.Fatalf("merged Err = %v", err)
		}
	})
}

func TestRecorderAndCollector(t *testing.T) {
	rec := NewRecorder(t0)
	rec.Level(LevelSome, t0.Add(2*time.Second))
	rec.Level(LevelSome, t0.Add(3*time.Second)) // repeated: ignored
	rec.Level(LevelNormal, t0.Add(4*time.Second))
	rec.Level(LevelSome, t0.Add(6*time.Second))
	rec.Level(LevelNormal, t0.Add(8*time.Second))
	rec.Event(Event{Signal: SignalSome, Count: 1})
	rec.Event(Event{Signal: SignalVMLow, Count: 40})
	d := rec.Snapshot(t0.Add(10 * time.Second))
	some := d.Levels[LevelSome]
	if some.Time != 4*time.Second || some.Entries != 2 || some.Mean != 2*time.Second || some.Share != 0.4 {
		t.Fatalf("some: %+v", some)
	}
	if n := d.Levels[LevelNormal]; n.Time != 6*time.Second || n.Entries != 3 {
		t.Fatalf("normal: %+v", n)
	}
	var b strings.Builder
	if err := d.WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"some     ████░░░░░░   40.0% of time  (2 entries, mean 2s)", "vm_low=40"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}

	gate, _ := NewGate(Policy{MaxPermits: 4})
	gate.TryAcquire()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, rec, gate); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "psiflow_pressure_") {
			t.Errorf("metric %s lacks the psiflow_pressure_ prefix", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				found[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				found[key] = m.GetGauge().GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"psiflow_pressure_level_entries_total{some}":    2,
		"psiflow_pressure_events_total{vm_low}":         40,
		"psiflow_pressure_gate_permits":                 4,
		"psiflow_pressure_gate_permits_in_use":          1,
		"psiflow_pressure_gate_decisions_total{admit}":  1,
		"psiflow_pressure_gate_decisions_total{refuse}": 0,
	} {
		if got, ok := found[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if err := Register(reg, rec, gate); err == nil {
		t.Error("registering twice succeeded")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
