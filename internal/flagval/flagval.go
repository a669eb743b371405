package flagval

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// None is the value a [Size] flag takes for "none", "max" or "-1" when its
// range allows it (min < 0): no limit.
const None int64 = -1

// units are the size suffixes, binary multiples, matched without regard to case.
var units = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40}, {"pib", 50}, {"eib", 60},
	{"ki", 10}, {"mi", 20}, {"gi", 30}, {"ti", 40}, {"pi", 50}, {"ei", 60},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"p", 50}, {"e", 60},
	{"b", 0},
}

// ParseSize parses a byte count: a non-negative number (integer or decimal,
// no exponent) with an optional binary unit (K, M, G, T, P, E, also spelled
// KiB, MiB... , in any case; "B" for bytes): "4096", "64KiB", "1.5G",
// "256m". "none", "max" and "-1" give [None]. The result must fit in an
// int64: "9999999999G" is an error, not a wrapped-around number.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "none", "max", "-1":
		return None, nil
	case "":
		return 0, errors.New("empty size")
	}
	num, shift := t, uint(0)
	lower := strings.ToLower(t)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			num, shift = t[:len(t)-len(u.suffix)], u.shift
			break
		}
	}
	num = strings.TrimSpace(num)
	if num == "" || strings.ContainsAny(num, "eE+-_xXpP") || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional unit (K, M, G, T; KiB, MiB, GiB, TiB)", s)
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("size %q: want a non-negative number with an optional unit (K, M, G, T; KiB, MiB, GiB, TiB)", s)
		}
		if err != nil || v > math.MaxInt64>>shift {
			return 0, fmt.Errorf("size %q: too large (the most is %d bytes, 8 EiB)", s, int64(math.MaxInt64))
		}
		return int64(v << shift), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional unit (K, M, G, T; KiB, MiB, GiB, TiB)", s)
	}
	b := math.Round(math.Ldexp(f, int(shift)))
	if b >= math.Ldexp(1, 63) {
		return 0, fmt.Errorf("size %q: too large (the most is %d bytes, 8 EiB)", s, int64(math.MaxInt64))
	}
	return int64(b), nil
}

// FormatSize writes b with the largest binary unit that divides it exactly
// ("256MiB", "1536KiB", "1000"); None as "none".
func FormatSize(b int64) string {
	if b < 0 {
		return "none"
	}
	for _, u := range []struct {
		s     string
		shift uint
	}{{"EiB", 60}, {"PiB", 50}, {"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatInt(b, 10)
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
	return FormatSize(*v.p)
}

func (v *sizeValue) Set(s string) error {
	b, err := ParseSize(s)
	if err != nil {
		return err
	}
	if b == None {
		if v.min >= 0 {
			return fmt.Errorf("%q: this flag needs a size, from %s to %s", s, FormatSize(v.min), FormatSize(v.max))
		}
		*v.p = None
		return nil
	}
	if b < max(v.min, 0) || b > v.max {
		return fmt.Errorf("%s is out of range %s to %s", FormatSize(b), FormatSize(max(v.min, 0)), FormatSize(v.max))
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
