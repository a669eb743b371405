package pressure

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Recorder keeps the distribution of pressure levels over time: for each level the
// time spent in it, how often it was entered and the mean duration of a stay, and the
// number of events per signal (the seed's "pressure event distribution"). It is safe
// for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	start   time.Time
	level   Level
	since   time.Time
	spent   [numLevels]time.Duration
	entries [numLevels]uint64
	signals map[Signal]uint64
}

// NewRecorder returns a recorder that starts at LevelNormal at time start.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start, since: start, entries: [numLevels]uint64{LevelNormal: 1}, signals: map[Signal]uint64{}}
}

// Level records that the level became l at time t. A repeated level is ignored.
func (r *Recorder) Level(l Level, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l == r.level {
		return
	}
	if t.After(r.since) {
		r.spent[r.level] += t.Sub(r.since)
		r.since = t
	}
	r.level = l
	r.entries[l]++
}

// Event counts one event (by its signal, weighted by its Count).
func (r *Recorder) Event(ev Event) {
	n := ev.Count
	if n == 0 {
		n = 1
	}
	r.mu.Lock()
	r.signals[ev.Signal] += n
	r.mu.Unlock()
}

// LevelStats is one level's row of a [Distribution].
type LevelStats struct {
	Level Level
	// Time spent in the level, including the current stay up to the snapshot.
	Time time.Duration
	// Share of the elapsed time, in [0, 1].
	Share float64
	// Entries is how often the level was entered (the start counts as entering Normal).
	Entries uint64
	// Mean is Time / Entries.
	Mean time.Duration
}

// Distribution is a snapshot of a [Recorder].
type Distribution struct {
	Elapsed time.Duration
	Current Level
	Levels  [numLevels]LevelStats
	// Signals counts events per signal.
	Signals map[Signal]uint64
}

// Snapshot returns the distribution up to now.
func (r *Recorder) Snapshot(now time.Time) Distribution {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := Distribution{Current: r.level, Signals: make(map[Signal]uint64, len(r.signals))}
	for s, n := range r.signals {
		d.Signals[s] = n
	}
	spent := r.spent
	if now.After(r.since) {
		spent[r.level] += now.Sub(r.since)
	}
	if now.After(r.start) {
		d.Elapsed = now.Sub(r.start)
	}
	for l := range numLevels {
		st := LevelStats{Level: l, Time: spent[l], Entries: r.entries[l]}
		if d.Elapsed > 0 {
			st.Share = float64(spent[l]) / float64(d.Elapsed)
		}
		if st.Entries > 0 {
			st.Mean = spent[l] / time.Duration(st.Entries)
		}
		d.Levels[l] = st
	}
	return d
}

// WriteReport writes the distribution as text, one line per level, e.g.
//
//	some     ██░░░░░░░░   2.3% of time  (2341 entries, mean 1.2s)
func (d Distribution) WriteReport(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pressure level distribution over %s (now %s):\n", d.Elapsed.Round(time.Millisecond), d.Current)
	for _, st := range d.Levels {
		bar := int(st.Share*10 + 0.5)
		fmt.Fprintf(&b, "  %-8s %s%s %6.1f%% of time  (%d entries, mean %s)\n",
			st.Level, strings.Repeat("█", bar), strings.Repeat("░", 10-bar), 100*st.Share, st.Entries, st.Mean.Round(time.Millisecond))
	}
	if len(d.Signals) > 0 {
		b.WriteString("Events:")
		for s := SignalSome; int(s) < len(signalNames); s++ {
			if n := d.Signals[s]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", s, n)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
