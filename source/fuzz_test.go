package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/psiflow/psiflow/source/synth"
)

// The fuzz targets write their input to a file and read it as a dataset
// under both policies. Whatever the bytes, reading must end (io.EOF or an
// error) without a panic, allocate no more than the file and MaxMember allow,
// and name the file in its errors. Their seed corpora run with the normal tests.

const fuzzMaxMember = 1 << 20

func fuzzFile(t *testing.T, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fuzzDrain reads it to the end, checking that errors name path and that no
// element is larger than the file.
func fuzzDrain[T any](t *testing.T, it Iterator[T], path string, size int64, lenOf func(T) int64, release func(T)) {
	t.Helper()
	for range 1 << 16 {
		e, err := it.Next(context.Background())
		if err == io.EOF {
			return
		}
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte(filepath.Base(path))) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			return
		}
		if n := lenOf(e); n > size {
			t.Fatalf("element of %d bytes from a %d-byte file", n, size)
		}
		release(e)
	}
	t.Fatal("more than 65536 elements from a small file")
}

func FuzzTarReader(f *testing.F) {
	var seeds [][]byte
	seeds = append(seeds, buildTar(f, samples(0, 3), true))
	seeds = append(seeds, buildTar(f, samples(0, 3), false))
	ms := append(samples(0, 2), tarMember{name: "bomb.jpg", data: []byte("x"), size: 64 << 30})
	seeds = append(seeds, buildTar(f, append(ms, samples(2, 2)...), true))
	ms = append(samples(0, 1), tarMember{name: "big.jpg", data: make([]byte, 5000)})
	seeds = append(seeds, buildTar(f, ms, true))
	broken := buildTar(f, samples(0, 4), true)
	broken[512+150] ^= 0xff
	seeds = append(seeds, broken, nil, make([]byte, 1024), []byte("ustar"))
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		p := fuzzFile(t, "fuzz.tar", data)
		it, err := NewTar([]string{p}).Samples(Options{WorldSize: 1, Skip: skip, MaxMember: 4096, ChunkSize: 4096,
			Reader: ReaderOptions{Backend: BackendPread}})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		fuzzDrain(t, it, p, int64(len(data)), (*Sample).Len, (*Sample).Release)
		if lr := it.(LossReporter); lr.LostBytes() < 0 || lr.LostBytes() > int64(len(data)) {
			t.Fatalf("lost %d bytes of a %d-byte shard", lr.LostBytes(), len(data))
		}
	})
}

func fuzzTables(f *testing.F, format TableFormat) {
	dir := f.TempDir()
	tab := synth.Table{Files: 1, Batches: 2, Rows: 5, PayloadBytes: 16}
	var paths []string
	var err error
	if format == Parquet {
		paths, err = synth.ParquetFiles(dir, tab, 3)
	} else {
		paths, err = synth.ArrowFiles(dir, tab, 3)
	}
	if err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(paths[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[len(good)/2:])
	for _, at := range []int{len(good) - 10, len(good) - 12, len(good) / 3, 8} {
		b := bytes.Clone(good)
		for i := at; i < at+4 && i < len(b); i++ {
			b[i] = 0xff
		}
		f.Add(b)
	}
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte("ARROW1\x00\x00ARROW1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "fuzz."+format.String(), data)
		d := NewParquet([]string{p})
		if format == ArrowIPC {
			d = NewArrowIPC([]string{p})
		}
		for _, skip := range []bool{false, true} {
			it, err := d.Batches(Options{WorldSize: 1, Skip: skip, MaxMember: fuzzMaxMember, Reader: ReaderOptions{Backend: BackendPread}})
			if err != nil {
				var re *ReadError
				if !errors.As(err, &re) && !bytes.Contains([]byte(err.Error()), []byte(p)) {
					t.Fatalf("error %q does not name %s", err, p)
				}
				continue
			}
			// Decoded batches may be larger than the file (dictionary and
			// run-length encodings), but not beyond what MaxMember allows per column.
			fuzzDrain(t, it, p, int64(len(data))*64+fuzzMaxMember*8, (*Batch).Len, (*Batch).Release)
			it.Close()
		}
	})
}

func FuzzParquetReader(f *testing.F) { fuzzTables(f, Parquet) }

func FuzzArrowReader(f *testing.F) { fuzzTables(f, ArrowIPC) }
