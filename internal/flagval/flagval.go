package flagval

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
)

// None is the value a [Size] flag takes for "none", "max" or "-1" when its
// range allows it (min < 0): no limit.
const None int64 = -1

// ParseSize parses a size flag's value: a size in the one grammar of
// [bytesize.Parse] ("4096", "64KiB", "1.5G", "256m", "1PiB"), or "none",
// "max" or "-1" for [None].
func ParseSize(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "max", "-1":
		return None, nil
	}
	return bytesize.Parse(s)
}

// formatSize writes a size flag's value: [None] as "none", else [bytesize.Format].
func formatSize(b int64) string {
	if b < 0 {
		return "none"
	}
	return bytesize.Format(b)
}

type sizeValue struct {
	p        *int64
	min, max int64
}

// SizeVar defines a size flag (see [ParseSize]) stored in p, which must lie
// in [min, max]; with min < 0 it also takes "none" ([None]).
func SizeVar(fs *flag.FlagSet, p *int64, name string, value, min, max int64, usage string) {
	*p = value
	fs.Var(&sizeValue{p, min, max}, name, usage)
}

// Size is [SizeVar] returning a new variable.
func Size(fs *flag.FlagSet, name string, value, min, max int64, usage string) *int64 {
	p := new(int64)
	SizeVar(fs, p, name, value, min, max, usage)
	return p
}

func (v *sizeValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return formatSize(*v.p)
}

func (v *sizeValue) Set(s string) error {
	b, err := ParseSize(s)
	if err != nil {
		return err
	}
	if b == None {
		if v.min >= 0 {
			return fmt.Errorf("%q: this flag needs a size, from %s to %s", s, formatSize(v.min), formatSize(v.max))
		}
		*v.p = None
		return nil
	}
	if b < max(v.min, 0) || b > v.max {
		return fmt.Errorf("%s is out of range %s to %s", formatSize(b), formatSize(max(v.min, 0)), formatSize(v.max))
	}
	*v.p = b
	return nil
}

type intValue[T int | int64] struct {
	p        *T
	min, max T
}

func (v *intValue[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v *intValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Errorf("%q overflows (range %d to %d)", s, v.min, v.max)
		}
		return fmt.Errorf("%q is not an integer (range %d to %d)", s, v.min, v.max)
	}
	if n < int64(v.min) || n > int64(v.max) {
		return fmt.Errorf("%d is out of range %d to %d", n, v.min, v.max)
	}
	*v.p = T(n)
	return nil
}

// IntVar defines an integer flag stored in p, which must lie in [min, max].
func IntVar(fs *flag.FlagSet, p *int, name string, value, min, max int, usage string) {
	*p = value
	fs.Var(&intValue[int]{p, min, max}, name, usage)
}

// Int is [IntVar] returning a new variable.
func Int(fs *flag.FlagSet, name string, value, min, max int, usage string) *int {
	p := new(int)
	IntVar(fs, p, name, value, min, max, usage)
	return p
}

// Int64Var defines a 64-bit integer flag stored in p, which must lie in [min, max].
func Int64Var(fs *flag.FlagSet, p *int64, name string, value, min, max int64, usage string) {
	*p = value
	fs.Var(&intValue[int64]{p, min, max}, name, usage)
}

// Int64 is [Int64Var] returning a new variable.
func Int64(fs *flag.FlagSet, name string, value, min, max int64, usage string) *int64 {
	p := new(int64)
	Int64Var(fs, p, name, value, min, max, usage)
	return p
}

type floatValue struct {
	p        *float64
	min, max float64
}

// ParseFloat parses a finite number in [min, max]: NaN, infinities and
// values out of range (1e30 for a CPU count) are errors.
func ParseFloat(s string, min, max float64) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	if f < min || f > max {
		return 0, fmt.Errorf("%g is out of range %g to %g", f, min, max)
	}
	return f, nil
}

func (v *floatValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v *floatValue) Set(s string) error {
	f, err := ParseFloat(s, v.min, v.max)
	if err != nil {
		return err
	}
	*v.p = f
	return nil
}

// FloatVar defines a floating-point flag stored in p: finite, in [min, max].
func FloatVar(fs *flag.FlagSet, p *float64, name string, value, min, max float64, usage string) {
	*p = value
	fs.Var(&floatValue{p, min, max}, name, usage)
}

// Float is [FloatVar] returning a new variable.
func Float(fs *flag.FlagSet, name string, value, min, max float64, usage string) *float64 {
	p := new(float64)
	FloatVar(fs, p, name, value, min, max, usage)
	return p
}

// Fraction defines a flag for a fraction in [0, 1].
func Fraction(fs *flag.FlagSet, name string, value float64, usage string) *float64 {
	return Float(fs, name, value, 0, 1, usage)
}

type durationValue struct {
	p        *time.Duration
	min, max time.Duration
}

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 500ms, 2s, 5m): %v", s, err)
	}
	if d < v.min || d > v.max {
		return fmt.Errorf("%v is out of range %v to %v", d, v.min, v.max)
	}
	*v.p = d
	return nil
}

// DurationVar defines a duration flag stored in p, which must lie in [min, max].
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value, min, max time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p, min, max}, name, usage)
}

// Duration is [DurationVar] returning a new variable.
func Duration(fs *flag.FlagSet, name string, value, min, max time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	DurationVar(fs, p, name, value, min, max, usage)
	return p
}

// Range parses "MIN:MAX" as two finite numbers with lo <= MIN <= MAX <= hi.
func Range(s string, lo, hi float64) (minV, maxV float64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want MIN:MAX", s)
	}
	if minV, err = ParseFloat(a, lo, hi); err != nil {
		return 0, 0, fmt.Errorf("%q: MIN: %w", s, err)
	}
	if maxV, err = ParseFloat(b, lo, hi); err != nil {
		return 0, 0, fmt.Errorf("%q: MAX: %w", s, err)
	}
	if minV > maxV {
		return 0, 0, fmt.Errorf("%q: MIN is above MAX", s)
	}
	return minV, maxV, nil
}
