package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Units, in [Parse]'s order of matching: the longest suffix first.
var units = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40}, {"pib", 50}, {"eib", 60},
	{"ki", 10}, {"mi", 20}, {"gi", 30}, {"ti", 40}, {"pi", 50}, {"ei", 60},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"p", 50}, {"e", 60},
	{"b", 0},
}

// names are the units [Format] and [Human] write, by power of 1024.
var names = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

const want = "want a non-negative number with an optional binary unit (B, K, M, G, T, P, E; KiB … EiB)"

// Parse reads a size in the package's grammar (see the package comment):
// "4096", "64KiB", "1.5G", "256m", "1 PiB". An empty string, a sign, an
// exponent, NaN, an unknown unit or a size that does not fit in an int64 is
// an error that quotes s.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q: empty", s)
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
	if num == "" || strings.Trim(num, "0123456789.") != "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("size %q: %s", s, want)
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("size %q: %s", s, want)
		}
		if err != nil || v > math.MaxInt64>>shift {
			return 0, tooLarge(s)
		}
		return int64(v << shift), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("size %q: %s", s, want)
	}
	b := math.Round(math.Ldexp(f, int(shift)))
	if err != nil || b >= math.Ldexp(1, 63) {
		return 0, tooLarge(s)
	}
	return int64(b), nil
}

func tooLarge(s string) error {
	return fmt.Errorf("size %q: too large (the most is %d bytes, 8 EiB)", s, int64(math.MaxInt64))
}

// Format writes b exactly, in the largest binary unit that divides it, with no
// space: "256MiB", "1536KiB", "3TiB", "1000", "0". [Parse] reads the result
// back to b. A negative b is written as "-" and its magnitude (sizes are not
// negative: callers give their own words, such as "none", to negative
// sentinels before formatting).
func Format(b int64) string {
	if b < 0 {
		if b == math.MinInt64 {
			return strconv.FormatInt(b, 10)
		}
		return "-" + Format(-b)
	}
	for i := len(names) - 1; i > 0; i-- {
		if b != 0 && b%(1<<(10*i)) == 0 {
			return strconv.FormatInt(b>>(10*i), 10) + names[i]
		}
	}
	return strconv.FormatInt(b, 10)
}

// Human writes b rounded for people: bytes below 1 KiB as a whole number
// ("512 B"), larger sizes in the largest binary unit not above them with one
// decimal, a trailing ".0" dropped ("1.5 GiB", "30 MiB", "1023.9 KiB"). A
// negative b (a deficit) gets a minus sign ("-3.2 MiB").
func Human(b int64) string {
	sign, m := "", float64(b)
	if b < 0 {
		sign, m = "-", -m
	}
	if m < 1024 {
		return sign + strconv.FormatFloat(m, 'f', 0, 64) + " B"
	}
	i := 0
	for i < len(names)-1 && m >= 1024 {
		m /= 1024
		i++
	}
	// Rounding to one decimal can reach 1024 of a unit ("1024.0 KiB"): that is
	// one of the next unit.
	if math.Round(m*10) >= 10240 && i < len(names)-1 {
		m /= 1024
		i++
	}
	return sign + strings.TrimSuffix(strconv.FormatFloat(m, 'f', 1, 64), ".0") + " " + names[i]
}
