package kernfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// status is the start of a real /proc/self/status (Linux 6.18).
const status = `Name:	psiflow
Umask:	0022
State:	R (running)
VmPeak:	 1275544 kB
VmSize:	 1275416 kB
VmRSS:	   30816 kB
RssAnon:	   12416 kB
RssFile:	   18400 kB
RssShmem:	       0 kB
Threads:	7
CapInh:	0000000000000000
CapPrm:	000001ffffffffff
CapEff:	000001ffffffffff
`

func TestParseSizes(t *testing.T) {
	tests := []struct {
		name string
		text string
		keys []string
		want []int64
		err  string // a prefix of the error; "" for none
		line int    // >0: want a *ParseError at this line
	}{
		{"status", status, []string{"VmSize:", "RssFile:", "RssShmem:"}, []int64{1275416 << 10, 18400 << 10, 0}, "", 0},
		{"order asked", status, []string{"RssAnon:", "VmSize:"}, []int64{12416 << 10, 1275416 << 10}, "", 0},
		{"prefix is not a key", status, []string{"Vm"}, nil, `/proc/self/status line 4: "VmPeak:\t 1275544 kB": want "Vm N kB"`, 4},
		{"bare number", "MemTotal: 42\n", []string{"MemTotal:"}, []int64{42 << 10}, "", 0},
		{"missing", status, []string{"VmSwap:"}, nil, "/proc/self/status: no VmSwap: line", 0},
		{"not a number", "a\nMemTotal: x kB\n", []string{"MemTotal:"}, nil, `/proc/self/status line 2: "MemTotal: x kB": want a number of kB`, 2},
		{"other unit", "MemTotal: 1 MB\n", []string{"MemTotal:"}, nil, `/proc/self/status line 1: "MemTotal: 1 MB": want "MemTotal: N kB"`, 1},
		{"negative", "MemTotal: -1 kB\n", []string{"MemTotal:"}, nil, "/proc/self/status line 1", 1},
		{"overflow", "MemTotal: 9007199254740992 kB\n", []string{"MemTotal:"}, nil, "/proc/self/status line 1", 1},
		{"empty value", "MemTotal:\n", []string{"MemTotal:"}, nil, "/proc/self/status line 1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSizes("/proc/self/status", tt.text, tt.keys...)
			if tt.err == "" {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("ParseSizes = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Fatalf("ParseSizes = %v, %v; want an error starting %q", got, err, tt.err)
			}
			var pe *ParseError
			if isPE := errors.As(err, &pe); isPE != (tt.line > 0) || isPE && pe.Line != tt.line {
				t.Fatalf("error %v: *ParseError %v, want line %d", err, isPE, tt.line)
			}
		})
	}
}

func TestParseCapEff(t *testing.T) {
	tests := []struct {
		text string
		want uint64
		err  string
	}{
		{status, 0x1ffffffffff, ""},
		{"CapEff:\t0000000000000000\n", 0, ""},
		{"CapInh: 0\nCapEff: 0000000001000000\n", 1 << 24, ""},
		{"CapEff:\tzz\n", 0, `status line 1: "CapEff:\tzz": want a hexadecimal capability mask`},
		{"Name: x\n", 0, "status: no CapEff line"},
	}
	for _, tt := range tests {
		got, err := ParseCapEff("status", tt.text)
		if tt.err == "" && (err != nil || got != tt.want) || tt.err != "" && (err == nil || err.Error() != tt.err) {
			t.Errorf("ParseCapEff(%q) = %#x, %v; want %#x, %q", tt.text, got, err, tt.want, tt.err)
		}
	}
}

// TestRead reads real files: this process's status and meminfo, and a missing file.
func TestRead(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	b, err := ReadSizes("/proc/self/status", "VmSize:", "VmRSS:")
	if err != nil || b[0] <= 0 || b[1] <= 0 || b[1] > b[0] {
		t.Fatalf("ReadSizes = %v, %v", b, err)
	}
	if _, err := ReadCapEff("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "status")
	if _, err := ReadSizes(missing, "VmSize:"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("ReadSizes of a missing file: %v", err)
	}
	if _, err := ReadCapEff(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadCapEff of a missing file: %v", err)
	}
}

func FuzzParseSizes(f *testing.F) {
	f.Add(status)
	f.Add("MemTotal: 1 kB\nMemTotal: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseSizes("f", s, "MemTotal:", "VmSize:")
		if err == nil && (b[0] < 0 || b[1] < 0) {
			t.Fatalf("negative size %v", b)
		}
		_, _ = ParseCapEff("f", s)
	})
}

func ExampleParseSizes() {
	text := "MemTotal:       24576000 kB\nMemAvailable:   20000000 kB\n"
	b, err := ParseSizes("/proc/meminfo", text, "MemTotal:", "MemAvailable:")
	fmt.Println(b, err)
	_, err = ParseSizes("/proc/meminfo", "MemTotal: lots\n", "MemTotal:")
	fmt.Println(err)
	// Output:
	// [25165824000 20480000000] <nil>
	// /proc/meminfo line 1: "MemTotal: lots": want a number of kB
}

func TestParseMaps(t *testing.T) {
	text := `00400000-0045c000 r-xp 00000000 08:01 1234                               /usr/bin/psi flow
0065c000-0065d000 rw-p 0005c000 08:01 1234                               /usr/bin/psi flow
7f0000000000-7f0000021000 rw-p 00000000 00:00 0

7ffd1c5e0000-7ffd1c601000 rw-p 00000000 00:00 0                          [stack]
`
	got, err := ParseMaps("/proc/self/maps", text)
	want := []Mapping{
		{0x400000, 0x45c000, "r-xp", "/usr/bin/psi flow"},
		{0x65c000, 0x65d000, "rw-p", "/usr/bin/psi flow"},
		{0x7f0000000000, 0x7f0000021000, "rw-p", ""},
		{0x7ffd1c5e0000, 0x7ffd1c601000, "rw-p", "[stack]"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseMaps = %+v, %v", got, err)
	}
	if got[0].Writable() || !got[1].Writable() {
		t.Error("Writable")
	}
	for text, wantErr := range map[string]string{
		"00400000-0045c000 r-xp 00000000 08:01\n":        `maps line 1: "00400000-0045c000 r-xp 00000000 08:01": want address perms offset dev inode [path]`,
		"\n00400000 r-xp 00000000 08:01 1 /x\n":          `maps line 2: "00400000 r-xp 00000000 08:01 1 /x": want an address range start-end`,
		"0045c000-00400000 r-xp 00000000 08:01 1 /x\n":   "maps line 1: ",
		"zz-00400000 r-xp 00000000 08:01 1 /x\n":         "maps line 1: ",
		"1-10000000000000000 r-xp 00000000 08:01 1 /x\n": "maps line 1: ",
	} {
		_, err := ParseMaps("maps", text)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), wantErr) {
			t.Errorf("ParseMaps(%q) = %v, want a *ParseError starting %q", text, err, wantErr)
		}
	}
	if _, err := os.Stat("/proc/self/maps"); err == nil {
		m, err := ReadMaps("/proc/self/maps")
		if err != nil || len(m) == 0 {
			t.Fatalf("ReadMaps(/proc/self/maps) = %d mappings, %v", len(m), err)
		}
	}
}
