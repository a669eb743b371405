package harness

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ShapeKind names what the loader's neighbour in the cgroup does over a run.
type ShapeKind string

// Shape kinds.
const (
	// Alone: no co-tenant (a trainer's ballast is 0).
	Alone ShapeKind = "alone"
	// Ramp: a co-tenant process touches Share × the limit evenly over the ramp and
	// holds it until the loader ends.
	Ramp ShapeKind = "ramp"
	// Spike: a co-tenant process rises to Share × the limit over the ramp, holds it
	// for Hold, then gives memory back down to After × the limit at once and holds
	// that until the loader ends: a trainer's peak (evaluation, a checkpoint).
	Spike ShapeKind = "spike"
	// Trainer: no co-tenant process; the loader command is the trainer (a training
	// loop that consumes the batches) and holds Share × the limit as ballast itself:
	// "{ballast}" in its arguments becomes that many bytes.
	Trainer ShapeKind = "trainer"
)

// Shape is one co-tenant cell of a comparison.
type Shape struct {
	Kind ShapeKind `json:"kind"`
	// Share is the share of the limit the co-tenant ramps to (Ramp), its peak
	// (Spike) or the trainer's ballast (Trainer), in (0, 1); 0 for Alone.
	Share float64 `json:"share"`
	// Hold is how long a spike holds its peak (Spike).
	Hold time.Duration `json:"hold_ns,omitempty"`
	// After is the share a spike falls to and holds until the loader ends (Spike),
	// in [0, Share).
	After float64 `json:"after,omitempty"`
}

// ShapeSyntax describes what [ParseShape] accepts, for usage texts and errors.
const ShapeSyntax = "alone (or 0); SHARE or ramp:SHARE (rise to SHARE of the limit over the ramp and hold); " +
	"spike:PEAK/HOLD/AFTER (rise to PEAK over the ramp, hold HOLD, fall to AFTER at once, e.g. spike:0.9/5s/0.4); " +
	"trainer:BALLAST (the loader is a trainer holding BALLAST × the limit: {ballast} in its arguments)"

// ParseShape parses one shape: "alone" or "0"; "0.7" or "ramp:0.7";
// "spike:0.9/5s/0.4" (peak, hold as a Go duration, the share after the fall);
// "trainer:0.7". Shares are fractions of the limit in (0, 1).
func ParseShape(s string) (Shape, error) {
	s = strings.TrimSpace(s)
	kind, arg, hasArg := strings.Cut(s, ":")
	switch {
	case s == string(Alone) || s == "0":
		return Shape{Kind: Alone}, nil
	case !hasArg:
		v, err := parseShare(s)
		if err != nil {
			return Shape{}, fmt.Errorf("co-tenant shape %q: %w; want %s", s, err, ShapeSyntax)
		}
		return Shape{Kind: Ramp, Share: v}, nil
	}
	switch ShapeKind(kind) {
	case Ramp, Trainer:
		v, err := parseShare(arg)
		if err != nil {
			return Shape{}, fmt.Errorf("co-tenant shape %q: %w", s, err)
		}
		return Shape{Kind: ShapeKind(kind), Share: v}, nil
	case Spike:
		f := strings.Split(arg, "/")
		if len(f) != 3 {
			return Shape{}, fmt.Errorf("co-tenant shape %q: want spike:PEAK/HOLD/AFTER, e.g. spike:0.9/5s/0.4", s)
		}
		peak, err := parseShare(f[0])
		if err != nil {
			return Shape{}, fmt.Errorf("co-tenant shape %q: peak: %w", s, err)
		}
		hold, err := time.ParseDuration(strings.TrimSpace(f[1]))
		if err != nil || hold <= 0 {
			return Shape{}, fmt.Errorf("co-tenant shape %q: hold %q: want a positive duration such as 5s", s, f[1])
		}
		after, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err != nil || !(after >= 0 && after < peak) {
			return Shape{}, fmt.Errorf("co-tenant shape %q: after %q: want a share in [0, %g) (below the peak)", s, f[2], peak)
		}
		return Shape{Kind: Spike, Share: peak, Hold: hold, After: after}, nil
	}
	return Shape{}, fmt.Errorf("co-tenant shape %q: unknown kind %q; want %s", s, kind, ShapeSyntax)
}

// parseShare parses a share of the limit in (0, 1).
func parseShare(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0 && v < 1) {
		return 0, fmt.Errorf("share %q: want a fraction of the limit in (0, 1), like 0.7", s)
	}
	return v, nil
}

// ParseShapes parses a comma-separated list of shapes ("" is none); a shape may
// not appear twice.
func ParseShapes(list string) ([]Shape, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []Shape
	seen := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		sh, err := ParseShape(f)
		if err != nil {
			return nil, err
		}
		if seen[sh.String()] {
			return nil, fmt.Errorf("co-tenant shape %q given twice", sh.String())
		}
		seen[sh.String()] = true
		out = append(out, sh)
	}
	return out, nil
}

// ShareShape is the shape of a co-tenant share as "-cotenant" gives it: 0 is
// [Alone], anything else a [Ramp] to it.
func ShareShape(share float64) Shape {
	if share <= 0 {
		return Shape{Kind: Alone}
	}
	return Shape{Kind: Ramp, Share: share}
}

// Validate names what is wrong with a shape built by hand.
func (s Shape) Validate() error {
	switch s.Kind {
	case Alone:
		if s.Share != 0 || s.Hold != 0 || s.After != 0 {
			return fmt.Errorf("co-tenant shape alone: share %g, hold %v, after %g: want none", s.Share, s.Hold, s.After)
		}
		return nil
	case Ramp, Trainer, Spike:
	default:
		return fmt.Errorf("co-tenant shape: unknown kind %q", s.Kind)
	}
	if !(s.Share > 0 && s.Share < 1) {
		return fmt.Errorf("co-tenant shape %s: share %g: want (0, 1)", s.Kind, s.Share)
	}
	if s.Kind == Spike {
		if s.Hold <= 0 || !(s.After >= 0 && s.After < s.Share) {
			return fmt.Errorf("co-tenant shape spike: hold %v, after %g: want a positive hold and 0 ≤ after < peak %g", s.Hold, s.After, s.Share)
		}
	} else if s.Hold != 0 || s.After != 0 {
		return fmt.Errorf("co-tenant shape %s: hold and after are for spikes", s.Kind)
	}
	return nil
}

// String writes the shape in the syntax [ParseShape] reads: "alone", "ramp:0.7",
// "spike:0.9/5s/0.4", "trainer:0.7". It is the shape's key in reports.
func (s Shape) String() string {
	switch s.Kind {
	case Alone, "":
		return string(Alone)
	case Spike:
		return fmt.Sprintf("spike:%g/%v/%g", s.Share, s.Hold, s.After)
	}
	return fmt.Sprintf("%s:%g", s.Kind, s.Share)
}

// Label writes the shape for tables: "alone", "70%", "spike 90% 5s → 40%",
// "ballast 70%".
func (s Shape) Label() string {
	switch s.Kind {
	case Alone, "":
		return "alone"
	case Spike:
		return fmt.Sprintf("spike %s %v → %s", pct(s.Share), s.Hold, pct(s.After))
	case Trainer:
		return "ballast " + pct(s.Share)
	}
	return pct(s.Share)
}

// pct writes a share as a percentage ("70%").
func pct(v float64) string { return fmt.Sprintf("%g%%", math.Round(1000*v)/10) }

// needsCoTenant reports whether the shape starts a co-tenant process.
func (s Shape) needsCoTenant() bool { return s.Kind == Ramp || s.Kind == Spike }
