package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// memberHeader returns the offset of the header of the member called name in b.
func memberHeader(t *testing.T, b []byte, name string) int64 {
	t.Helper()
	off := bytes.Index(b, []byte(name))
	if off < 0 {
		t.Fatalf("no member %s", name)
	}
	return int64(off - off%512)
}

// TestTarSkipsAreNamedAndCounted cuts and breaks shards the ways a copy, a full
// disk or a bad writer does and reads them with Skip: each skip reaches OnSkip
// once as a *Skipped naming the shard, the offset, what was passed over (the rest of
// the shard, a member and its sample) and the bytes lost; Skipped() and LostBytes()
// agree with the reports, and every whole sample is delivered exactly once.
func TestTarSkipsAreNamedAndCounted(t *testing.T) {
	whole := buildTar(t, samples(0, 6), true)
	jpg3 := memberHeader(t, whole, "k003.jpg")
	// Sample k003 with its cls first and its jpg second.
	swapped := buildTar(t, append(append(samples(0, 3), tarMember{name: "k003.cls", data: []byte("3")}, tarMember{name: "k003.jpg", data: bytes.Repeat([]byte{3}, 103)}), samples(4, 2)...), true)
	jpgSecond := memberHeader(t, swapped, "k003.jpg")
	big := append(samples(0, 2), tarMember{name: "k002.jpg", data: make([]byte, 10000)}, tarMember{name: "k002.cls", data: []byte("2")})
	big = append(big, samples(3, 1)...)
	bigTar := buildTar(t, big, true)
	tests := []struct {
		name    string
		shard   []byte
		opts    Options
		keys    []string
		off     int64
		what    string
		lost    int64 // -1: the end of the file from off
		because string
	}{
		{"cut inside a sample's first member", whole[:jpg3+512+50], Options{}, keyRange(0, 3),
			jpg3, `the rest of the shard, from member "k003.jpg" of sample "k003"`, -1, `member "k003.jpg" declares`},
		{"cut inside a sample's second member", swapped[:jpgSecond+512+50], Options{}, keyRange(0, 4),
			jpgSecond, `the rest of the shard, from member "k003.jpg" of sample "k003"`, -1, `member "k003.jpg" declares`},
		{"cut inside a header", whole[:jpg3+100], Options{}, keyRange(0, 3),
			jpg3, "the rest of the shard", 100, "the shard ends 100 bytes into a member's 512-byte header: it is truncated"},
		{"cut at a member boundary", whole[:len(whole)-1024], Options{}, keyRange(0, 6),
			int64(len(whole) - 1024), "the rest of the shard", 0, "missing end-of-archive marker"},
		{"a member over MaxMember", bigTar, Options{MaxMember: 4096}, keyRange(0, 4),
			memberHeader(t, bigTar, "k002.jpg"), `member "k002.jpg" of sample "k002"`, 10240 + 512, "over the limit of 4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeShard(t, tc.shard)
			var reports []error
			o := tc.opts
			o.Skip, o.WorldSize = true, 1
			o.OnSkip = func(err error) { reports = append(reports, err) }
			it, err := NewTar([]string{p}).Samples(o)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			var keys []string
			for {
				s, err := it.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("with Skip: %v", err)
				}
				keys = append(keys, s.Key)
				s.Release()
			}
			if !slices.Equal(keys, tc.keys) {
				t.Fatalf("samples %v, want %v", keys, tc.keys)
			}
			if len(reports) != 1 || it.Skipped() != 1 {
				t.Fatalf("%d reports, Skipped() %d, want one: %v", len(reports), it.Skipped(), reports)
			}
			var sk *Skipped
			if !errors.As(reports[0], &sk) {
				t.Fatalf("report %T %v is not a *Skipped", reports[0], reports[0])
			}
			lost := tc.lost
			if lost < 0 {
				lost = int64(len(tc.shard)) - tc.off
			}
			if sk.Path != p || sk.Off != tc.off || sk.What != tc.what || sk.Lost != lost || it.(LossReporter).LostBytes() != lost && tc.lost != 0 {
				t.Errorf("report %+v (LostBytes %d), want path %s, offset %d, what %q, lost %d", *sk, it.(LossReporter).LostBytes(), p, tc.off, tc.what, lost)
			}
			msg := sk.Error()
			for _, want := range []string{"skipped " + tc.what + " of " + p + fmt.Sprintf(" at offset %d (%d bytes lost): ", tc.off, lost), tc.because} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if strings.Count(msg, p) != 1 {
				t.Errorf("message %q names the shard more than once", msg)
			}
		})
	}
}

// TestFileSkipsAreReported: a file of a Files dataset that cannot be read is
// skipped whole and reported by name.
func TestFileSkipsAreReported(t *testing.T) {
	dir := t.TempDir()
	good, bad := dir+"/a.bin", dir+"/b.bin"
	if err := os.WriteFile(good, []byte("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	var reports []error
	it, err := NewFiles([]string{good, bad}).Samples(Options{WorldSize: 1, Skip: true, OnSkip: func(err error) { reports = append(reports, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for {
		s, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		s.Release()
	}
	var sk *Skipped
	if n != 1 || len(reports) != 1 || !errors.As(reports[0], &sk) || sk.Path != bad || !strings.HasPrefix(sk.Error(), "skipped the file of "+bad) {
		t.Fatalf("%d samples, reports %v", n, reports)
	}
}
