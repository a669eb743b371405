package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tarMember is one member written by buildTar: Size, when set, is written in
// the header while only Data follows it (a lying header).
type tarMember struct {
	name string
	data []byte
	size int64
}

// buildTar writes members as a tar stream; with end it adds the end-of-archive marker.
func buildTar(t testing.TB, members []tarMember, end bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		size := int64(len(m.data))
		if m.size != 0 {
			size = m.size
		}
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		if m.size != 0 {
			// A lying header: the data that follows is not its declared size.
			// Write it raw, padded, and start a new writer for what comes next.
			buf.Write(m.data)
			buf.Write(make([]byte, (512-len(m.data)%512)%512))
			tw = tar.NewWriter(&buf)
			continue
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	if end {
		buf.Write(make([]byte, 1024))
	}
	return buf.Bytes()
}

// samples returns members for n samples named k000.. with two fields each.
func samples(from, n int) []tarMember {
	var ms []tarMember
	for i := from; i < from+n; i++ {
		ms = append(ms,
			tarMember{name: fmt.Sprintf("k%03d.jpg", i), data: bytes.Repeat([]byte{byte(i)}, 100+i)},
			tarMember{name: fmt.Sprintf("k%03d.cls", i), data: []byte(fmt.Sprint(i))})
	}
	return ms
}

// readAllTar reads every sample of the shards, checking each field's bytes;
// it returns the keys read, the error that ended the epoch (nil at EOF), the
// skip count and the bytes lost.
func readAllTar(t *testing.T, paths []string, o Options) (keys []string, skipped, lost int64, err error) {
	t.Helper()
	o.WorldSize = 1
	it, err := NewTar(paths).Samples(o)
	if err != nil {
		return nil, 0, 0, err
	}
	defer it.Close()
	for {
		s, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			return keys, it.Skipped(), it.(LossReporter).LostBytes(), err
		}
		var i int
		if _, e := fmt.Sscanf(s.Key, "k%03d", &i); e != nil {
			t.Fatalf("key %q", s.Key)
		}
		if d := s.Field("jpg"); d != nil && !bytes.Equal(d, bytes.Repeat([]byte{byte(i)}, 100+i)) {
			t.Fatalf("sample %s: wrong jpg bytes", s.Key)
		}
		keys = append(keys, s.Key)
		s.Release()
	}
	return keys, it.Skipped(), it.(LossReporter).LostBytes(), nil
}

func writeShard(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shard.tar")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func keyRange(from, n int) []string {
	var k []string
	for i := from; i < from+n; i++ {
		k = append(k, fmt.Sprintf("k%03d", i))
	}
	return k
}

func TestTarHugeMemberSizes(t *testing.T) {
	for _, size := range []int64{64 << 30, 1 << 62, 1<<63 - 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ms := samples(0, 3)
			ms = append(ms, tarMember{name: "bomb.jpg", data: []byte("tiny"), size: size})
			ms = append(ms, samples(3, 4)...)
			p := writeShard(t, buildTar(t, ms, true))

			keys, _, _, err := readAllTar(t, []string{p}, Options{})
			var re *ReadError
			if err == nil || !errors.As(err, &re) || re.Path != p || !strings.Contains(err.Error(), `"bomb.jpg"`) || !strings.Contains(err.Error(), "declares") {
				t.Fatalf("error %v: want a ReadError naming the shard and the member", err)
			}
			if !slices.Equal(keys, keyRange(0, 3)) {
				t.Fatalf("before the bad member: %v", keys)
			}

			keys, skipped, lost, err := readAllTar(t, []string{p}, Options{Skip: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys, keyRange(0, 7)) || skipped != 1 {
				t.Fatalf("with Skip: %v, %d skipped; want all 7 samples and 1 skip", keys, skipped)
			}
			// The lying header (PAX extension + header) and its 512 bytes of
			// data were passed over, nothing else.
			if lost < 1024 || lost > 4096 {
				t.Fatalf("lost %d bytes, want the bad member's header and data only", lost)
			}
		})
	}
}

func TestTarTruncatedAtMemberBoundary(t *testing.T) {
	whole := buildTar(t, samples(0, 6), true)
	cut := whole[:len(whole)-1024] // no end-of-archive marker: ends exactly after a member
	half := buildTar(t, samples(0, 3), false)
	other := writeShard(t, buildTar(t, samples(10, 2), true))
	for name, b := range map[string][]byte{"no marker": cut, "half": half, "one zero block": append(slices.Clone(cut), make([]byte, 512)...)} {
		t.Run(name, func(t *testing.T) {
			p := writeShard(t, b)
			keys, _, _, err := readAllTar(t, []string{p, other}, Options{})
			if err == nil || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v: want truncation naming %s", err, p)
			}
			n := len(keys)
			if n != 6 && n != 3 {
				t.Fatalf("samples before the error: %v (the whole samples must be delivered)", keys)
			}
			keys, skipped, _, err := readAllTar(t, []string{p, other}, Options{Skip: true})
			if err != nil || skipped != 1 || !slices.Equal(keys, append(keyRange(0, n), keyRange(10, 2)...)) {
				t.Fatalf("with Skip: %v, %v, %d skipped", keys, err, skipped)
			}
		})
	}
}

func TestTarEmptyAndGarbage(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":   nil,
		"garbage": bytes.Repeat([]byte("not a tar file "), 100),
		"zeros":   make([]byte, 100),
	} {
		t.Run(name, func(t *testing.T) {
			p := writeShard(t, b)
			_, _, _, err := readAllTar(t, []string{p}, Options{})
			var re *ReadError
			if err == nil || !errors.As(err, &re) || re.Path != p {
				t.Fatalf("error %v: want a ReadError naming %s", err, p)
			}
			keys, skipped, _, err := readAllTar(t, []string{p}, Options{Skip: true})
			if err != nil || len(keys) != 0 || skipped != 1 {
				t.Fatalf("with Skip: %v %v %d", keys, err, skipped)
			}
		})
	}
}

func TestTarMaxMember(t *testing.T) {
	ms := samples(0, 2)
	ms = append(ms, tarMember{name: "k002.jpg", data: make([]byte, 10000)}, tarMember{name: "k002.cls", data: []byte("2")})
	ms = append(ms, samples(3, 2)...)
	p := writeShard(t, buildTar(t, ms, true))

	_, _, _, err := readAllTar(t, []string{p}, Options{MaxMember: 4096})
	if err == nil || !strings.Contains(err.Error(), "MaxMember") || !strings.Contains(err.Error(), "k002.jpg") {
		t.Fatalf("error %v: want MaxMember naming k002.jpg", err)
	}
	keys, skipped, lost, err := readAllTar(t, []string{p}, Options{MaxMember: 4096, Skip: true})
	if err != nil || skipped != 1 {
		t.Fatalf("with Skip: %v, %d skipped", err, skipped)
	}
	// Exactly the bad member went: sample k002 keeps its cls field.
	if !slices.Equal(keys, keyRange(0, 5)) {
		t.Fatalf("keys %v", keys)
	}
	if want := int64(10240 + 512); lost < want || lost > want+1024 {
		t.Fatalf("lost %d, want about %d", lost, want)
	}
	if _, err := NewTar([]string{p}).Samples(Options{MaxMember: -1}); err == nil {
		t.Fatal("negative MaxMember accepted")
	}
}

func TestTarCorruptHeaderResync(t *testing.T) {
	b := buildTar(t, samples(0, 6), true)
	// Find the third sample's jpg header and break its checksum.
	off := bytes.Index(b, []byte("k002.jpg"))
	off -= off % 512
	for off > 0 && !ValidTarHeader(b[off:off+512]) {
		off -= 512
	}
	b[off+150] ^= 0x5a
	p := writeShard(t, b)
	_, _, _, err := readAllTar(t, []string{p}, Options{})
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error %v", err)
	}
	keys, skipped, lost, err := readAllTar(t, []string{p}, Options{Skip: true})
	if err != nil || skipped != 1 || lost <= 0 {
		t.Fatalf("with Skip: %v, %d skipped, %d lost", err, skipped, lost)
	}
	// k002 may lose only its jpg; every other sample arrives.
	if !slices.Equal(keys, keyRange(0, 6)) {
		t.Fatalf("keys %v", keys)
	}
}

func TestTarResumeRefOutsideShard(t *testing.T) {
	p := writeShard(t, buildTar(t, samples(0, 2), true))
	_, err := NewTar([]string{p}).Samples(Options{WorldSize: 1, Resume: &Position{WorldSize: 1, Pending: []Ref{{Off: 0, End: 1 << 62}}}})
	if err == nil || !strings.Contains(err.Error(), "outside shard") {
		t.Fatalf("error %v", err)
	}
}
