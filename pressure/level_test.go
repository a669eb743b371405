package pressure

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// step is one line of a model script: at offset At, feed Ev (or, with Ev nil,
// Advance), then expect Want.
type step struct {
	At   time.Duration
	Ev   *Event
	Want Level
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func trig(sig Signal, share float64) *Event {
	return &Event{Signal: sig, Share: share, Window: 2 * time.Second, Count: 1}
}

func polled(sig Signal, share float64) *Event {
	return &Event{Signal: sig, Share: share, Window: time.Second, Count: 1, Polled: true}
}

func other(sig Signal) *Event { return &Event{Signal: sig, Count: 1} }

func TestModel(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	cfg := ModelConfig{Hold: 4 * s, MinDwell: s}
	tests := []struct {
		name  string
		cfg   ModelConfig
		steps []step
	}{
		{"some trigger enters and expires after hold", cfg, []step{
			{0, nil, LevelNormal},
			{0, trig(SignalSome, 0.05), LevelSome},
			{3999 * ms, nil, LevelSome},
			{4 * s, nil, LevelNormal},
		}},
		{"repeated triggers extend the hold", cfg, []step{
			{0, trig(SignalSome, 0.05), LevelSome},
			{2 * s, trig(SignalSome, 0.05), LevelSome},
			{5 * s, nil, LevelSome},
			{6 * s, nil, LevelNormal},
		}},
		{"full trigger over some, falls back to some then normal", cfg, []step{
			{0, trig(SignalSome, 0.05), LevelSome},
			{1 * s, trig(SignalFull, 0.05), LevelFull},
			{4 * s, trig(SignalSome, 0.05), LevelFull},
			{5 * s, nil, LevelSome},
			{7999 * ms, nil, LevelSome},
			{8 * s, nil, LevelNormal},
		}},
		{"full trigger with a high share is critical", cfg, []step{
			{0, trig(SignalFull, 0.6), LevelCritical},
		}},
		{"minimum dwell delays the fall", ModelConfig{Hold: 100 * ms, MinDwell: 2 * s}, []step{
			{0, other(SignalMemMax), LevelSome},
			{500 * ms, nil, LevelSome},
			{1999 * ms, nil, LevelSome},
			{2 * s, nil, LevelNormal},
		}},
		{"rising is immediate even inside the dwell", ModelConfig{Hold: s, MinDwell: 10 * s}, []step{
			{0, trig(SignalSome, 0.05), LevelSome},
			{10 * ms, other(SignalOOMKill), LevelCritical},
		}},
		{"polled hysteresis: enter at 2%, stay above 0.5%, leave below", cfg, []step{
			{0, polled(SignalSome, 0.01), LevelNormal},
			{1 * s, polled(SignalSome, 0.02), LevelSome},
			{2 * s, polled(SignalSome, 0.006), LevelSome},
			{3 * s, polled(SignalSome, 0.004), LevelNormal},
			{4 * s, polled(SignalSome, 0.01), LevelNormal},
		}},
		{"polled withdrawal waits for the dwell", cfg, []step{
			{0, polled(SignalSome, 0.5), LevelSome},
			{500 * ms, polled(SignalSome, 0), LevelSome},
			{1 * s, nil, LevelNormal},
		}},
		{"polled full share picks full, then critical", cfg, []step{
			{0, polled(SignalFull, 0.03), LevelFull},
			{1 * s, polled(SignalFull, 0.7), LevelCritical},
			{2 * s, polled(SignalFull, 0.1), LevelFull},
			{3 * s, polled(SignalFull, 0.001), LevelNormal},
		}},
		{"a quiet poll does not withdraw a trigger's assertion", cfg, []step{
			{0, trig(SignalSome, 0.05), LevelSome},
			{1 * s, polled(SignalSome, 0), LevelSome},
			{4 * s, nil, LevelNormal},
		}},
		{"vmpressure and memory events", cfg, []step{
			{0, other(SignalVMLow), LevelNormal},
			{0, other(SignalMemMax), LevelSome},
			{1 * s, other(SignalVMCritical), LevelCritical},
			{4500 * ms, nil, LevelCritical},
			{5 * s, nil, LevelNormal},
			{6 * s, other(SignalOOM), LevelCritical},
		}},
		{"custom signal map", ModelConfig{Signals: map[Signal]Level{SignalVMLow: LevelFull}}, []step{
			{0, other(SignalVMLow), LevelFull},
			{0, other(SignalOOMKill), LevelFull},
		}},
		{"a long trigger window outlasts a short hold", ModelConfig{Hold: time.Second, MinDwell: time.Second}, []step{
			{0, &Event{Signal: SignalSome, Share: 0.01, Window: 10 * s, Count: 1}, LevelSome},
			{19 * s, nil, LevelSome},
			{20 * s, nil, LevelNormal},
		}},
		{"time going backwards is ignored", cfg, []step{
			{5 * s, trig(SignalSome, 0.05), LevelSome},
			{1 * s, nil, LevelSome},
			{9 * s, nil, LevelNormal},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewModel(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			for i, st := range tt.steps {
				at := t0.Add(st.At)
				var got Level
				if st.Ev != nil {
					ev := *st.Ev
					ev.Time = at
					got, _ = m.Observe(ev)
					fmt.Fprintf(&log, "%v %v -> %v\n", st.At, ev.Signal, got)
				} else {
					got, _ = m.Advance(at)
					fmt.Fprintf(&log, "%v advance -> %v\n", st.At, got)
				}
				if got != st.Want {
					t.Fatalf("step %d: level %v, want %v\n%s", i, got, st.Want, log.String())
				}
			}
		})
	}
}

// TestModelNext checks that Next names the instant the level falls, so a timer set
// to it needs no polling.
func TestModelNext(t *testing.T) {
	m, err := NewModel(ModelConfig{Hold: 4 * time.Second, MinDwell: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Next().IsZero() {
		t.Fatalf("Next at Normal = %v, want zero", m.Next())
	}
	ev := *trig(SignalSome, 0.05)
	ev.Time = t0
	m.Observe(ev)
	next := m.Next()
	if want := t0.Add(4 * time.Second); !next.Equal(want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if l, _ := m.Advance(next.Add(-time.Nanosecond)); l != LevelSome {
		t.Fatalf("just before Next: %v", l)
	}
	if l, changed := m.Advance(next); l != LevelNormal || !changed {
		t.Fatalf("at Next: %v changed=%v, want normal", l, changed)
	}
}

func TestModelConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     ModelConfig
		wantErr string
	}{
		{ModelConfig{}, ""},
		{ModelConfig{SomeEnter: 0.01, SomeExit: 0.02}, "some thresholds"},
		{ModelConfig{FullEnter: 1.5}, "full thresholds"},
		{ModelConfig{CriticalFull: 0.01}, "critical full share"},
		{ModelConfig{Hold: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		_, err := NewModel(tt.cfg)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("NewModel(%+v) error = %v, want %q", tt.cfg, err, tt.wantErr)
		}
	}
}

func TestLevelString(t *testing.T) {
	for l := LevelNormal; l <= LevelCritical; l++ {
		back, err := ParseLevel(l.String())
		if err != nil || back != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l, back, err)
		}
	}
	if _, err := ParseLevel("high"); err == nil {
		t.Error("ParseLevel(high) succeeded")
	}
}

func TestLevelOfShares(t *testing.T) {
	tests := []struct {
		some, full float64
		want       Level
	}{
		{0, 0, LevelNormal},
		{0.019, 0.019, LevelNormal},
		{0.02, 0.0, LevelSome},
		{0.3, 0.02, LevelFull},
		{0.9, 0.49, LevelFull},
		{0.9, 0.5, LevelCritical},
	}
	for _, tt := range tests {
		if got := LevelOfShares(tt.some, tt.full, ModelConfig{}); got != tt.want {
			t.Errorf("LevelOfShares(%g, %g) = %s, want %s", tt.some, tt.full, got, tt.want)
		}
	}
	if got := LevelOfShares(0.05, 0, ModelConfig{SomeEnter: 0.1, SomeExit: 0.05}); got != LevelNormal {
		t.Errorf("a some share under a raised SomeEnter: %s, want normal", got)
	}
}
