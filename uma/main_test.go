package uma

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"
)

// helperEnv selects a helper mode when the test binary is re-executed as a
// child process (see TestReclaimedChunkIsRehydrated).
const helperEnv = "PSIFLOW_UMA_TEST_HELPER"

func TestMain(m *testing.M) {
	reexec.Init()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

// helpers are the child-process modes, registered by platform test files.
var helpers = map[string]func(ctx context.Context, out io.Writer) error{}

func runHelper(mode string) int {
	h, ok := helpers[mode]
	if !ok {
		fmt.Fprintln(os.Stdout, "unknown helper mode", mode)
		return 2
	}
	if err := h(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stdout, "error:", err)
		return 1
	}
	return 0
}

// testLimit is a fixed memory limit so that tests do not depend on the host.
func testLimit() (int64, string, error) { return 8 << 30, "test", nil }

func testConfig() Config {
	return Config{ChunkSize: 64 << 10, StableBytes: 1 << 20, MemoryLimit: testLimit}
}

func newTestUMA(t testing.TB, cfg Config) *UMA {
	t.Helper()
	if !supported {
		t.Skip("uma needs Linux")
	}
	u, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return u
}

// fillPattern writes the known non-zero bytes of chunk id into b.
func fillPattern(id ChunkID, b []byte) {
	seed := byte(len(id.Arena)*13 + id.Index*7)
	for k := range b {
		b[k] = byte(k*31+k>>8) ^ seed | 1
	}
}

// patternRehydrate re-creates fillPattern's bytes and counts calls.
type patternRehydrate struct{ calls int64 }

func (p *patternRehydrate) fn(ctx context.Context, id ChunkID, dst []byte) error {
	p.calls++
	fillPattern(id, dst)
	return nil
}

// writePattern fills every chunk of a with its pattern through Write.
func writePattern(t testing.TB, a *Arena) {
	t.Helper()
	buf := make([]byte, a.Size())
	for i := 0; i < a.Chunks(); i++ {
		lo := int64(i) * a.ChunkSize()
		hi := min(lo+a.ChunkSize(), a.Size())
		fillPattern(ChunkID{a.Name(), i}, buf[lo:hi])
	}
	if err := a.Write(context.Background(), 0, buf); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// checkPattern returns the first byte of b (at arena offset off) that is not
// the pattern, or -1.
func checkPattern(a *Arena, off int64, b []byte) int64 {
	want := make([]byte, a.ChunkSize())
	for k := int64(0); k < int64(len(b)); {
		i := int((off + k) / a.ChunkSize())
		lo := int64(i) * a.ChunkSize()
		fillPattern(ChunkID{a.Name(), i}, want)
		for ; k < int64(len(b)) && off+k < lo+a.ChunkSize(); k++ {
			if b[k] != want[off+k-lo] {
				return off + k
			}
		}
	}
	return -1
}

// takeByKernel makes the kernel take lazily freed (PREEMPTIBLE) pages of b now, as
// reclaim would, whichever CPU ran their MADV_FREE: MADV_DONTNEED, as
// [Arena.PageOut] does (MADV_PAGEOUT from another CPU than the MADV_FREE leaves
// them resident). b must be memory nobody is using.
func takeByKernel(t testing.TB, u *UMA, b []byte) {
	t.Helper()
	if err := u.k.madvise(b, adviseDontNeed); err != nil {
		t.Fatalf("the kernel taking %d bytes: %v", len(b), err)
	}
}
