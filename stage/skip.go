package stage

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// SkipError marks one element's failure as skipped: [Map], [ParMap] and
// [OrderedParMap] drop the element (returning its claim), count it in
// [Metrics.Skipped] and go on with the next one instead of failing the
// stage. The function that returns it owns the element, so it must already
// have released the input value. Make one with [Skipper.Handle].
type SkipError struct {
	// Key names the skipped element (a file path, a shard member).
	Key string
	// Err is why it was skipped.
	Err error
}

// Error formats "skipped KEY: CAUSE".
func (e *SkipError) Error() string { return fmt.Sprintf("skipped %s: %v", e.Key, e.Err) }

// Unwrap returns the cause.
func (e *SkipError) Unwrap() error { return e.Err }

// asSkip reports whether err says "skip this element"; it counts it.
func asSkip(err error, m *Metrics) bool {
	var s *SkipError
	if !errors.As(err, &s) {
		return false
	}
	if m != nil {
		m.Skipped.Add(1)
	}
	return true
}

// OnError is what a stage does with an element it cannot process.
type OnError int

const (
	// Stop fails the stage (and so the graph) on the first bad element: the
	// default, as in PyTorch's DataLoader.
	Stop OnError = iota
	// Skip drops the bad element, names it in the log and counts it, within
	// the limits of a [SkipPolicy].
	Skip
)

// String returns "stop" or "skip".
func (o OnError) String() string {
	switch o {
	case Stop:
		return "stop"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("onerror(%d)", int(o))
}

// ParseOnError parses "stop" or "skip" (the values of -on-error flags).
func ParseOnError(s string) (OnError, error) {
	switch s {
	case "stop", "":
		return Stop, nil
	case "skip":
		return Skip, nil
	}
	return Stop, fmt.Errorf("on-error %q: want stop or skip", s)
}

// RateFloor is how many elements a [SkipPolicy.MaxRate] is measured over at
// least: with MaxRate 0.01 one skip is allowed among the first 100 elements,
// and 1% of the elements seen after that.
const RateFloor = 100

// SkipPolicy says which element errors a stage skips. The zero value stops
// on the first error.
type SkipPolicy struct {
	// OnError is [Stop] (default) or [Skip].
	OnError OnError
	// MaxSkips, when positive, is the most elements skipped in one run: the
	// next error stops the stage. 0 means no count limit.
	MaxSkips int64
	// MaxSkipsOption names the setting that raises MaxSkips where the user set
	// it (a flag, a pipeline file's key), for the error that stops at the
	// limit; "" names SkipPolicy.MaxSkips.
	MaxSkipsOption string
	// MaxRate, when positive, is the largest fraction of the elements seen
	// so far that may be skipped, measured over at least [RateFloor]
	// elements: the skip that would exceed it stops the stage. 0 means no
	// rate limit.
	MaxRate float64
	// Log, when not nil, is called once for every skipped element, with its
	// key and the error (from the worker that hit it). Nil logs nothing:
	// pipelines pass their logger here, so that every skip is named.
	Log func(key string, err error)
}

// Validate reports a limit that cannot work.
func (p SkipPolicy) Validate() error {
	switch {
	case p.OnError != Stop && p.OnError != Skip:
		return fmt.Errorf("skip policy: unknown on-error %d", int(p.OnError))
	case p.MaxSkips < 0:
		return fmt.Errorf("skip policy: max skips %d: must be 0 (no limit) or more", p.MaxSkips)
	case math.IsNaN(p.MaxRate) || p.MaxRate < 0 || p.MaxRate > 1:
		return fmt.Errorf("skip policy: max rate %v: must be within [0, 1]", p.MaxRate)
	}
	return nil
}

// Skipper applies a [SkipPolicy] over one run of a stage: it counts the
// elements seen and skipped and decides, for each error, whether to skip the
// element or stop. Safe for concurrent use by a stage's workers.
type Skipper struct {
	p       SkipPolicy
	seen    atomic.Int64
	skipped atomic.Int64
}

// NewSkipper returns a skipper for p, or p's validation error.
func NewSkipper(p SkipPolicy) (*Skipper, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Skipper{p: p}, nil
}

// Seen counts one element taken for processing, good or bad; rates are
// measured against it.
func (s *Skipper) Seen() { s.seen.Add(1) }

// Skipped is the number of elements skipped so far.
func (s *Skipper) Skipped() int64 { return s.skipped.Load() }

// Handle decides about err, the failure of the element named key. It returns
// nil for a nil err; a [*SkipError] when the policy skips the element (after
// logging it); else an error that stops the stage: err itself under [Stop],
// or err wrapped with the limit it broke.
func (s *Skipper) Handle(key string, err error) error {
	if err == nil {
		return nil
	}
	if s == nil || s.p.OnError != Skip {
		return err
	}
	n := s.skipped.Add(1)
	if s.p.MaxSkips > 0 && n > s.p.MaxSkips {
		s.skipped.Add(-1)
		name := s.p.MaxSkipsOption
		if name == "" {
			name = "SkipPolicy.MaxSkips"
		}
		return fmt.Errorf("too many bad samples: %d skipped already, the limit of %d (%s); stopping at %s: %w", n-1, s.p.MaxSkips, name, key, err)
	}
	if r := s.p.MaxRate; r > 0 {
		seen := max(s.seen.Load(), RateFloor)
		if float64(n) > r*float64(seen) {
			s.skipped.Add(-1)
			return fmt.Errorf("too many bad samples: skipping %s would make %d of %d seen (more than %.4g%%, measured over at least %d); stopping: %w",
				key, n, s.seen.Load(), 100*r, RateFloor, err)
		}
	}
	if s.p.Log != nil {
		s.p.Log(key, err)
	}
	return &SkipError{Key: key, Err: err}
}
