package source

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestChunkStream reads a file through a chunkStream with both backends, whole and
// stopped half way: the bytes read are the file's from the start offset, and every
// chunk is back in the pool after close.
func TestChunkStream(t *testing.T) {
	data := make([]byte, 300<<10+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []Backend{BackendPread, BackendURing} {
		for _, tc := range []struct {
			name     string
			off      int64
			stopAt   int // bytes to read before closing; -1: to the end
			depth    int
			chunkLen int
		}{
			{"whole", 0, -1, 4, 64 << 10},
			{"from an offset", 4096 + 17, -1, 2, 16 << 10},
			{"stopped half way", 0, 100 << 10, 4, 16 << 10},
		} {
			t.Run(string(backend)+"/"+tc.name, func(t *testing.T) {
				r, err := NewReader(ReaderOptions{Backend: backend})
				if err != nil {
					t.Skipf("no %s reader: %v", backend, err)
				}
				defer r.Close()
				pool, err := NewPool(2*tc.depth+2, tc.chunkLen)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				f, err := r.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				c := newChunkStream(context.Background(), readAhead{reader: r, pool: pool, depth: tc.depth, chunkSize: tc.chunkLen}, f, tc.off)
				want := data[tc.off:]
				var got []byte
				if tc.stopAt < 0 {
					got, err = io.ReadAll(c)
				} else {
					got = make([]byte, tc.stopAt)
					_, err = io.ReadFull(c, got)
					want = want[:tc.stopAt]
				}
				c.close()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("read %d bytes (%v), want %d equal bytes", len(got), err, len(want))
				}
				if n := pool.Stats().InUse; n != 0 {
					t.Fatalf("%d chunks still out of the pool after close", n)
				}
			})
		}
	}
}
