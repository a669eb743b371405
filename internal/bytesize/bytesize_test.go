package bytesize

import (
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"100B", 100}, {"100 b", 100},
		{"64KiB", 64 << 10}, {"64k", 64 << 10}, {"64Ki", 64 << 10}, {"64 KiB", 64 << 10},
		{"512MiB", 512 << 20}, {"256M", 256 << 20}, {"256m", 256 << 20}, {"256mib", 256 << 20},
		{"2GiB", 2 << 30}, {"1.5G", 3 << 29}, {"1.5GiB", 3 << 29}, {".5M", 1 << 19}, {"5.", 5},
		{"1T", 1 << 40}, {"1024TiB", 1 << 50}, {"1PiB", 1 << 50}, {"1p", 1 << 50}, {"8191P", 8191 << 50},
		{"7E", 7 << 60}, {"7EiB", 7 << 60}, {" 8G ", 8 << 30}, {"0.0000001K", 0}, {"1.0009765625K", 1025},
		{"9223372036854775807", math.MaxInt64}, {"0.4", 0}, {"0.5", 1},
	} {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct {
		in, why string
	}{
		{"", "empty"}, {"  ", "empty"},
		{"NaN", "want a non-negative number"}, {"nan", "want"}, {"Inf", "want"}, {"+Inf", "want"}, {"-Inf", "want"},
		{"1e30", "want"}, {"1e3", "want"}, {"-5", "want"}, {"-1", "want"}, {"-1G", "want"}, {"+5", "want"}, {"--1", "want"},
		{"none", "want"}, {"max", "want"}, {"auto", "want"},
		{"1.2.3", "want"}, {".", "want"}, {"G", "want"}, {"KiB", "want"}, {"12X", "want"}, {"64KB", "want"}, {"64 K B", "want"},
		{"0x10", "want"}, {"1_000", "want"}, {"1 000", "want"}, {"\x00G", "want"}, {"５M", "want"},
		{"9999999999G", "too large"}, {"8E", "too large"}, {"8192P", "too large"}, {"8.0E", "too large"},
		{"9223372036854775808", "too large"}, {"18446744073709551616", "too large"}, {"99999999999999999999999", "too large"},
		{"1" + strings.Repeat("0", 400) + ".5", "too large"},
	} {
		got, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %d, want an error", tt.in, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "size ") {
			t.Errorf("Parse(%q): %q, want it to say %q and name the size", tt.in, err, tt.why)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1000, "1000"}, {1024, "1KiB"}, {1536 << 10, "1536KiB"}, {256 << 20, "256MiB"},
		{3 << 40, "3TiB"}, {1 << 50, "1PiB"}, {1024 << 50, "1EiB"}, {7 << 60, "7EiB"}, {math.MaxInt64, "9223372036854775807"},
		{-(64 << 20), "-64MiB"}, {math.MinInt64, "-9223372036854775808"},
	} {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, b := range []int64{0, 1, 1000, 1024, 1025, 1536 << 10, 256 << 20, 3 << 40, 1 << 50, 7 << 60, math.MaxInt64} {
		if got, err := Parse(Format(b)); err != nil || got != b {
			t.Errorf("%d → %q → %d, %v", b, Format(b), got, err)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {1, "1 B"}, {512, "512 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"},
		{30 << 20, "30 MiB"}, {40<<20 + 100<<10, "40.1 MiB"}, {256 << 20, "256 MiB"}, {2048 << 20, "2 GiB"},
		{1894<<20 + 700<<10, "1.9 GiB"}, {3 << 29, "1.5 GiB"}, {1<<20 - 1, "1 MiB"}, {1<<20 - 60<<10, "964 KiB"},
		{1 << 50, "1 PiB"}, {math.MaxInt64, "8 EiB"},
		{-(3<<20 + 200<<10), "-3.2 MiB"}, {-5, "-5 B"}, {math.MinInt64, "-8 EiB"},
	} {
		if got := Human(tt.in); got != tt.want {
			t.Errorf("Human(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParse: Parse never panics; an accepted size is in [0, MaxInt64] and
// survives Format exactly and Human within a twentieth of the unit written; a
// refused one gets an error that quotes it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "64KiB", "1.5G", "9999999999G", "NaN", "1e30", "-1", "max", "7E", "0.0000001K",
		"18446744073709551615", ".5M", "5.", "\x00G", "1PiB", "1024TiB", "1 GiB", "64KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), "size ") {
				t.Fatalf("error %q does not say what it parsed", err)
			}
			return
		}
		if b < 0 {
			t.Fatalf("Parse(%q) = %d", s, b)
		}
		if back, err := Parse(Format(b)); err != nil || back != b {
			t.Fatalf("Parse(%q) = %d; Format %q parses to %d, %v", s, b, Format(b), back, err)
		}
		h := Human(b)
		back, err := Parse(h)
		if err != nil {
			t.Fatalf("Human(%d) = %q does not parse: %v", b, h, err)
		}
		if diff := math.Abs(float64(back) - float64(b)); diff > humanUnit(h)/20+0.5 {
			t.Fatalf("Human(%d) = %q reads back as %d (off by %.0f)", b, h, back, diff)
		}
	})
}

// humanUnit is the size of the unit Human wrote at the end of h.
func humanUnit(h string) float64 {
	for i := len(names) - 1; i >= 0; i-- {
		if strings.HasSuffix(h, " "+names[i]) {
			return math.Ldexp(1, 10*i)
		}
	}
	return 1
}
