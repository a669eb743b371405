package pressure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    PSI
		wantErr string
	}{
		{
			name: "memory",
			in:   "some avg10=2.76 avg60=2.24 avg300=1.19 total=5385575\nfull avg10=0.34 avg60=1.45 avg300=0.57 total=2358096\n",
			want: PSI{
				Some:    Stall{Avg10: 2.76, Avg60: 2.24, Avg300: 1.19, Total: 5385575 * time.Microsecond},
				Full:    Stall{Avg10: 0.34, Avg60: 1.45, Avg300: 0.57, Total: 2358096 * time.Microsecond},
				HasFull: true,
			},
		},
		{
			name: "cpu without full (older kernels)",
			in:   "some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n",
			want: PSI{Some: Stall{Total: 12 * time.Microsecond}},
		},
		{
			name: "no trailing newline, extra key ignored",
			in:   "some avg10=100.00 avg60=0.00 avg300=0.00 total=0 extra=1",
			want: PSI{Some: Stall{Avg10: 100}},
		},
		{name: "empty", in: "", wantErr: "no \"some\" line"},
		{name: "full only", in: "full avg10=0 avg60=0 avg300=0 total=0\n", wantErr: "no \"some\" line"},
		{name: "unknown kind", in: "most avg10=0 avg60=0 avg300=0 total=0\n", wantErr: "unknown kind"},
		{name: "missing key", in: "some avg10=0 avg60=0 total=0\n", wantErr: "missing keys"},
		{name: "duplicate line", in: "some avg10=0 avg60=0 avg300=0 total=0\nsome avg10=0 avg60=0 avg300=0 total=0\n", wantErr: "duplicate \"some\""},
		{name: "duplicate key", in: "some avg10=0 avg10=0 avg60=0 avg300=0 total=0\n", wantErr: "duplicate key"},
		{name: "not key=value", in: "some avg10 avg60=0 avg300=0 total=0\n", wantErr: "not key=value"},
		{name: "negative total", in: "some avg10=0 avg60=0 avg300=0 total=-1\n", wantErr: "total"},
		{name: "percent over 100", in: "some avg10=100.01 avg60=0 avg300=0 total=0\n", wantErr: "percentage"},
		{name: "NaN", in: "some avg10=NaN avg60=0 avg300=0 total=0\n", wantErr: "percentage"},
		{name: "huge total", in: "some avg10=0 avg60=0 avg300=0 total=9223372036854775807\n", wantErr: "overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("some avg10=2.76 avg60=2.24 avg300=1.19 total=5385575\nfull avg10=0.34 avg60=1.45 avg300=0.57 total=2358096\n"))
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("full avg10=1 avg60=1 avg300=1 total=1\nsome avg10=1e2 avg60=0 avg300=0 total=18446744073709551615"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses is within the kernel's ranges.
		for _, s := range []Stall{p.Some, p.Full} {
			for _, v := range []float64{s.Avg10, s.Avg60, s.Avg300} {
				if !(v >= 0 && v <= 100) {
					t.Fatalf("Parse(%q) accepted average %v", data, v)
				}
			}
			if s.Total < 0 {
				t.Fatalf("Parse(%q) accepted negative total %v", data, s.Total)
			}
		}
		if !p.HasFull && p.Full != (Stall{}) {
			t.Fatalf("Parse(%q) filled Full without a full line", data)
		}
	})
}

func TestReadPSI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "memory.pressure")
	if err := os.WriteFile(good, []byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := ReadPSI(good)
	if err != nil || p.Some.Total != 7*time.Microsecond || p.Full.Total != 3*time.Microsecond {
		t.Fatalf("ReadPSI(%s) = %+v, %v", good, p, err)
	}
	missing := filepath.Join(dir, "nope.pressure")
	if _, err := ReadPSI(missing); !errors.Is(err, ErrNoPSI) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("ReadPSI(missing) error = %v, want ErrNoPSI naming the path", err)
	}
	bad := filepath.Join(dir, "bad.pressure")
	os.WriteFile(bad, []byte("garbage\n"), 0o644)
	if _, err := ReadPSI(bad); err == nil || errors.Is(err, ErrNoPSI) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("ReadPSI(bad) error = %v, want a parse error naming the path", err)
	}
}

// TestReadSystemPSI parses the host's own files, where the kernel has them.
func TestReadSystemPSI(t *testing.T) {
	for _, res := range []string{"memory", "io", "cpu"} {
		p, err := ReadPSI(SystemPressurePath(res))
		if errors.Is(err, ErrNoPSI) {
			kerneltest.Skip(t, kerneltest.PSI, "kernel offers no PSI here: %v", err)
		}
		if err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		if res == "memory" && !p.HasFull {
			t.Errorf("%s: no full line: %+v", res, p)
		}
	}
}
