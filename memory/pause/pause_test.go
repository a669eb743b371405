package pause

import (
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
)

const mib = 1 << 20

func TestController(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		t       float64
		current int64
		want    Kind // 0: no event
		lasted  time.Duration
	}
	tests := []struct {
		name   string
		cfg    Config
		steps  []step
		pauses int
		paused time.Duration // at the last step
		limit  int64         // 0: 256 MiB (reserve 16 MiB)
	}{
		{name: "never below", cfg: Config{Floor: 32 * mib},
			steps: []step{{0, 100 * mib, 0, 0}, {1, 32 * mib, 0, 0}}},
		{name: "pause and resume past the hysteresis", cfg: Config{Floor: 32 * mib}, // hysteresis 8 MiB
			steps: []step{
				{0, 100 * mib, 0, 0},
				{1, 31 * mib, Paused, 0},
				{2, 10 * mib, 0, 0},
				{3, 39 * mib, 0, 0}, // above the floor, not past the hysteresis
				{4, 40 * mib, Resumed, 3 * time.Second},
				{5, 40 * mib, 0, 0},
			}, pauses: 1, paused: 3 * time.Second},
		{name: "the minimum hysteresis", cfg: Config{Floor: 8 * mib}, // floor/4 = 2 MiB < 4 MiB
			steps:  []step{{0, 7 * mib, Paused, 0}, {1, 11 * mib, 0, 0}, {2, 12 * mib, Resumed, 2 * time.Second}},
			pauses: 1, paused: 2 * time.Second},
		{name: "a small limit caps the hysteresis", cfg: Config{Floor: 32 * mib}, // limit 52 − reserve 16 − floor 32: 2 MiB of margin
			steps: []step{
				{0, 33 * mib, 0, 0},
				{1, 31 * mib, Paused, 0},
				{2, 33 * mib, 0, 0},
				{3, 34 * mib, Resumed, 2 * time.Second}, // the full hysteresis (40 MiB) could never come
			}, pauses: 1, paused: 2 * time.Second, limit: 52 * mib},
		{name: "a limit that cannot hold the floor: resume at the floor", cfg: Config{Floor: 32 * mib},
			steps: []step{{0, 20 * mib, Paused, 0}, {1, 32 * mib, Resumed, time.Second}}, limit: 40 * mib,
			pauses: 1, paused: time.Second},
		{name: "two pauses", cfg: Config{Floor: 32 * mib, Hysteresis: 1},
			steps:  []step{{0, 0, Paused, 0}, {2, 33 * mib, Resumed, 2 * time.Second}, {3, -5 * mib, Paused, 0}, {3.5, 40 * mib, Resumed, 500 * time.Millisecond}},
			pauses: 2, paused: 2500 * time.Millisecond},
		{name: "a timeout is reported once, and the pause goes on", cfg: Config{Floor: 32 * mib, Timeout: 10 * time.Second},
			steps:  []step{{0, 0, Paused, 0}, {10, 0, 0, 0}, {10.5, 0, TimedOut, 10500 * time.Millisecond}, {20, 0, 0, 0}},
			pauses: 1, paused: 20 * time.Second},
		{name: "the default timeout", cfg: Config{Floor: 32 * mib},
			steps:  []step{{0, 0, Paused, 0}, {600, 0, 0, 0}, {601, 0, TimedOut, 601 * time.Second}},
			pauses: 1, paused: 601 * time.Second},
		{name: "forever", cfg: Config{Floor: 32 * mib, Timeout: Forever},
			steps:  []step{{0, 0, Paused, 0}, {86400, 0, 0, 0}, {86401, 100 * mib, Resumed, 86401 * time.Second}},
			pauses: 1, paused: 86401 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Calm = Forever // the calm has a test of its own
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var last time.Time
			paused := false
			for _, s := range tt.steps {
				last = at(s.t)
				limit := tt.limit
				if limit == 0 {
					limit = 256 * mib
				}
				ev, ok := c.Observe(Reading{At: last, Current: s.current, Limit: limit, Others: 200 * mib, Reserve: 16 * mib})
				if ok != (s.want != 0) || ev.Kind != s.want || ev.Lasted != s.lasted {
					t.Fatalf("at %v s, %d MiB: event %v (%v, lasted %v), want %v lasted %v", s.t, s.current/mib, ev.Kind, ok, ev.Lasted, s.want, s.lasted)
				}
				if ok && ev.Message() == "" {
					t.Errorf("event %v has no message", ev.Kind)
				}
				switch s.want {
				case Paused:
					paused = true
				case Resumed:
					paused = false
				}
				if c.Paused() != paused {
					t.Errorf("at %v s: Paused() = %v, want %v", s.t, c.Paused(), paused)
				}
			}
			if n, d := c.Stats(last); n != tt.pauses || d != tt.paused {
				t.Errorf("stats %d pauses, %v paused; want %d, %v", n, d, tt.pauses, tt.paused)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Floor: -1}, {Floor: 1, Hysteresis: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestMessages(t *testing.T) {
	c, err := New(Config{Floor: 39 * mib, Timeout: 10 * time.Minute, Calm: Forever})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	r := Reading{At: t0, Current: 12 * mib, Limit: 256 * mib, Others: 228 * mib, Reserve: 16 * mib}
	ev, _ := c.Observe(r)
	for _, want := range []string{"paused:", "leaves the loader 12 MiB", "limit 256 MiB − others 228 MiB − reserve 16 MiB", "floor of 39 MiB", "until it leaves 48.8 MiB", "longer than 10m0s ends the run"} {
		if !strings.Contains(ev.Message(), want) {
			t.Errorf("pause message %q lacks %q", ev.Message(), want)
		}
	}
	r.At, r.Current = t0.Add(5200*time.Millisecond), 80*mib
	ev, _ = c.Observe(r)
	if m := ev.Message(); !strings.Contains(m, "resumed after a pause of 5.2s") || !strings.Contains(m, "leaves the loader 80 MiB") {
		t.Errorf("resume message %q", m)
	}
	f, _ := New(Config{Floor: mib, Timeout: Forever})
	ev, _ = f.Observe(Reading{At: t0})
	if m := ev.Message(); !strings.Contains(m, "waits without end") {
		t.Errorf("pause message without a timeout %q", m)
	}
}

// A pause that only the projection of growing others started resumes at the
// floor once the projection leaves it (the co-tenant stopped growing at a
// share that leaves the floor but not the floor plus the hysteresis: the
// loader ran there, and used to stay paused for ever); once a reading of the
// pause leaves less than the floor itself, the resume waits for the
// hysteresis as any other.
func TestControllerPauseOnAProjection(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	const floor = 39 * mib // hysteresis max(floor/4, 4 MiB) = 9.75 MiB
	type step struct {
		now, projected int64 // projected 0: no projection (the others do not grow)
		want           Kind
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the growth stops at a share that leaves the floor: resume at the floor", []step{
			{60 * mib, 0, 0},
			{45 * mib, 37 * mib, Paused},
			{42 * mib, 38 * mib, 0}, // still growing, the projection below the floor
			{40 * mib, 0, Resumed},  // growth stopped: 40 MiB ≥ the floor, < floor + hysteresis
			{40 * mib, 0, 0},        // runs there
		}},
		{"a projection above the floor resumes once the growth is within the tolerance", []step{
			{50 * mib, 30 * mib, Paused},
			{60 * mib, 45 * mib, 0},       // above the floor, but the others still rise (15 MiB a second ahead)
			{44 * mib, 40 * mib, Resumed}, // 4 MiB a second ahead: DefaultRiseTolerance
		}},
		{"the reading itself fell below the floor: the hysteresis applies", []step{
			{45 * mib, 37 * mib, Paused},
			{36 * mib, 0, 0}, // short now
			{40 * mib, 0, 0}, // the floor is back, not the hysteresis
			{48 * mib, 0, 0},
			{49 * mib, 0, Resumed}, // ≥ 39 + 9.75
		}},
		{"a pause that started short waits for the hysteresis", []step{
			{30 * mib, 20 * mib, Paused},
			{40 * mib, 0, 0},
			{49 * mib, 0, Resumed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{Floor: floor, Calm: Forever})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				// a step each 250 ms: within DefaultSettle, only the hysteresis resumes
				r := Reading{At: t0.Add(time.Duration(i) * 250 * time.Millisecond), Current: s.now, Limit: 256 * mib, Others: 179 * mib, Reserve: 16 * mib}
				if s.projected != 0 {
					r.Current, r.Projected, r.Now = s.projected, true, s.now
				}
				ev, ok := c.Observe(r)
				if ok != (s.want != 0) || ev.Kind != s.want {
					t.Fatalf("step %d (now %d MiB, projected %d MiB): event %v (%v), want %v", i, s.now/mib, s.projected/mib, ev.Kind, ok, s.want)
				}
				if ev.Kind == Paused {
					msg := ev.Message()
					wantIn := "no reads until it leaves 48.8 MiB"
					if s.now >= floor {
						wantIn = "no reads until the growth stops and it leaves 39 MiB"
					}
					if !strings.Contains(msg, wantIn) {
						t.Errorf("pause line %q does not say %q", msg, wantIn)
					}
				}
			}
		})
	}
}

// A pause whose readings went below the floor and then settled at the floor
// but short of the hysteresis (a trainer that
// waits for the loader's next batch: its memory idle, nothing more to give
// back), resumes once that lasted Config.Settle, projections that leave the
// floor included (the loader's own resident set jitters by a few hundred KiB
// between samples, which the headroom sees as the others' growth); it used to stay paused until
// the pause timeout (the trainer grid at 85%, 3 epochs: the loader paused at
// 29.8 MiB, the cgroup then left it 40 MiB of a 48.9 MiB resume point, and no
// batch came for the rest of the run). A reading below the floor, projected or
// not, starts the settling again; with Settle Forever only the hysteresis
// resumes.
func TestControllerSettlesAtTheFloor(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	const floor = 39 * mib // hysteresis 9.75 MiB: resume point 48.75 MiB
	type step struct {
		ms        int
		now       int64
		projected bool // the others grow: Current is a projection below now
		want      Kind
	}
	tests := []struct {
		name   string
		settle time.Duration
		steps  []step
	}{
		{"settled at the floor: resumes after Settle", 0, []step{
			{0, 30 * mib, false, Paused},
			{100, 40 * mib, false, 0}, // ≥ floor, < floor + hysteresis: settling from here
			{600, 40 * mib, false, 0},
			{1099, 41 * mib, false, 0},
			{1100, 40 * mib, false, Resumed}, // 1 s at the floor
			{1200, 40 * mib, false, 0},       // runs there
		}},
		{"a projection above the floor settles too", 0, []step{
			{0, 30 * mib, false, Paused},
			{100, 41 * mib, false, 0},
			{500, 41 * mib, true, 0}, // the loader's own jitter seen as the others' growth: 40 MiB a second ahead
			{1000, 41 * mib, false, 0},
			{1100, 41 * mib, true, Resumed},
		}},
		{"a projection below the floor starts the settling again", 0, []step{
			{0, 30 * mib, false, Paused},
			{100, 45 * mib, false, 0},
			{900, 45 * mib, true, 0}, // the others grow: 35 MiB a second ahead
			{1000, 45 * mib, false, 0},
			{1900, 45 * mib, false, 0},
			{2000, 45 * mib, false, Resumed},
		}},
		{"a reading below the floor starts it again", 0, []step{
			{0, 30 * mib, false, Paused},
			{100, 40 * mib, false, 0},
			{900, 38 * mib, false, 0},
			{1000, 40 * mib, false, 0},
			{1999, 40 * mib, false, 0},
			{2000, 40 * mib, false, Resumed},
		}},
		{"Settle Forever: only the hysteresis resumes", Forever, []step{
			{0, 30 * mib, false, Paused},
			{100, 40 * mib, false, 0},
			{140000, 40 * mib, false, 0},
			{140100, 49 * mib, false, 0},
			{140400, 49 * mib, false, Resumed}, // after DefaultCalm
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{Floor: floor, Settle: tt.settle})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				r := Reading{At: t0.Add(time.Duration(s.ms) * time.Millisecond), Current: s.now, Limit: 2048 * mib, Others: 1800 * mib, Reserve: 128 * mib}
				if s.projected {
					r.Current, r.Projected, r.Now = s.now-10*mib, true, s.now
					if s.now < 45*mib {
						r.Current = s.now - mib
					}
				}
				ev, ok := c.Observe(r)
				if ok != (s.want != 0) || ev.Kind != s.want {
					t.Fatalf("step %d (%d ms, %d MiB): event %v (%v), want %v", i, s.ms, s.now/mib, ev.Kind, ok, s.want)
				}
				if ev.Kind == Paused {
					msg := ev.Message()
					wantIn := "no reads until it leaves 48.8 MiB, or its floor for 1s"
					if tt.settle < 0 {
						wantIn = "no reads until it leaves 48.8 MiB;"
					}
					if !strings.Contains(msg, wantIn) {
						t.Errorf("pause line %q does not say %q", msg, wantIn)
					}
				}
			}
		})
	}
}

// TestTimedOutMessageSaysWhatWasShort: a pause that times out while the cgroup
// leaves the loader its floor but not the floor plus the hysteresis says so,
// not "below its floor" (it once said "below its floor of 39.1 MiB" with 40.2
// MiB left); one that times out below the floor says that.
func TestTimedOutMessageSaysWhatWasShort(t *testing.T) {
	for _, tt := range []struct {
		name    string
		left    int64
		want    string
		notWant string
	}{
		{"short of the hysteresis", 40*mib + 200<<10, "leaves the loader 40.2 MiB (limit 256 MiB − others 199.8 MiB − reserve 16 MiB), above its floor of 39 MiB but short of the 48.8 MiB it resumes at", "below its floor"},
		{"below the floor", 30 * mib, "leaves the loader 30 MiB (limit 256 MiB − others 210 MiB − reserve 16 MiB), below its floor of 39 MiB", "short of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{Floor: 39 * mib, Timeout: 10 * time.Second, Settle: Forever})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1000, 0)
			if ev, ok := c.Observe(Reading{At: t0, Current: 12 * mib, Limit: 256 * mib, Others: 228 * mib, Reserve: 16 * mib}); !ok || ev.Kind != Paused {
				t.Fatalf("first reading: %v %v, want a pause", ev.Kind, ok)
			}
			var last Event
			for s := 1; s <= 12; s++ {
				ev, ok := c.Observe(Reading{At: t0.Add(time.Duration(s) * time.Second), Current: tt.left, Limit: 256 * mib, Others: 240*mib - tt.left, Reserve: 16 * mib})
				if ok {
					last = ev
				}
			}
			if last.Kind != TimedOut {
				t.Fatalf("after 12 s paused at %s: event %v, want timed out", bytesize.Human(tt.left), last.Kind)
			}
			if m := last.Message(); !strings.Contains(m, tt.want) || strings.Contains(m, tt.notWant) {
				t.Errorf("timed-out message %q: want %q, not %q", m, tt.want, tt.notWant)
			}
		})
	}
}

// A co-tenant still ramping never resumes a pause, and a resume needs its
// point for Config.Calm with the others not rising: in the spike grid at 90%
// of 256 MiB the loader paused on the projection (others growing to 203 MiB),
// resumed 200 ms later on a projection that had dipped (others growing to
// 194 MiB, the ramp stalled for a sample), paused again a moment later with
// −18 MiB left, and the OOM killer took both it and the co-tenant.
func TestControllerWaitsForTheRiseToEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	const floor = 19 * mib // hysteresis 4.75 MiB: resume point 23.75 MiB for a short pause
	type step struct {
		ms             int
		now, projected int64 // projected 0: the others do not grow
		want           Kind
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the 90% spike: no resume during the ramp", []step{
			{0, 52 * mib, 0, 0},
			{100, 37 * mib, 12 * mib, Paused}, // others growing: 25 MiB a second ahead
			{200, 46 * mib, 28 * mib, 0},      // the projection dipped above the floor, the others still rise
			{300, 30 * mib, 6 * mib, 0},
			{400, 10 * mib, 0, 0}, // the peak: short now
			{10400, 10 * mib, 0, 0},
			{10500, 130 * mib, 0, 0}, // the peak is over: calm from here
			{10700, 130 * mib, 0, 0},
			{10800, 130 * mib, 0, Resumed}, // DefaultCalm later
		}},
		{"a rise within the calm starts it again", []step{
			{0, 10 * mib, 0, Paused},
			{100, 40 * mib, 0, 0},
			{300, 40 * mib, 0, 0},
			{400, 40 * mib, 20 * mib, 0}, // rising again
			{500, 40 * mib, 0, 0},
			{700, 40 * mib, 0, 0},
			{800, 40 * mib, 0, Resumed},
		}},
		{"a rise within the tolerance is calm", []step{
			{0, 10 * mib, 0, Paused},
			{100, 40 * mib, 37 * mib, 0}, // 3 MiB a second ahead: the loader's own jitter
			{400, 40 * mib, 37 * mib, Resumed},
		}},
		{"a reading short of the point starts it again", []step{
			{0, 10 * mib, 0, Paused},
			{100, 40 * mib, 0, 0},
			{300, 22 * mib, 0, 0}, // ≥ the floor, short of the hysteresis
			{400, 40 * mib, 0, 0},
			{600, 40 * mib, 0, 0},
			{700, 40 * mib, 0, Resumed},
		}},
		{"the settling needs the others not rising", []step{
			{0, 10 * mib, 0, Paused},
			{100, 22 * mib, 0, 0},        // at the floor, short of the hysteresis: settling
			{900, 30 * mib, 22 * mib, 0}, // others rising 8 MiB a second ahead: settling from the start
			{1000, 22 * mib, 0, 0},
			{1900, 22 * mib, 0, 0},
			{2000, 22 * mib, 0, Resumed}, // DefaultSettle after 1000 ms
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{Floor: floor})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				r := Reading{At: t0.Add(time.Duration(s.ms) * time.Millisecond), Current: s.now, Limit: 256 * mib, Others: 200 * mib, Reserve: 16 * mib}
				if s.projected != 0 {
					r.Current, r.Projected, r.Now = s.projected, true, s.now
				}
				ev, ok := c.Observe(r)
				if ok != (s.want != 0) || ev.Kind != s.want {
					t.Fatalf("step %d (%d ms, now %d MiB, projected %d MiB): event %v (%v), want %v", i, s.ms, s.now/mib, s.projected/mib, ev.Kind, ok, s.want)
				}
			}
		})
	}
}

func TestConfigValidateRiseTolerance(t *testing.T) {
	if _, err := New(Config{Floor: mib, RiseTolerance: -1}); err == nil || !strings.Contains(err.Error(), "rise tolerance") {
		t.Errorf("a negative rise tolerance: %v", err)
	}
}
