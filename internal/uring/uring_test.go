//go:build linux

package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

func newRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	r, err := New(entries, SetupClamp|SetupCoopTaskrun)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		kerneltest.Skip(t, kerneltest.IOUring, "io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func testFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

func reapOne(t *testing.T, r *Ring) CQE {
	t.Helper()
	if _, err := r.Submit(1); err != nil {
		t.Fatal(err)
	}
	c, ok := r.PeekCQE()
	if !ok {
		t.Fatal("no completion after waiting for one")
	}
	r.CQESeen()
	return c
}

func mmapBuf(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func TestOps(t *testing.T) {
	f, data := testFile(t, 300_000)
	fd := int32(f.Fd())
	tests := []struct {
		name string
		off  int
		n    int
		prep func(r *Ring, e *SQE, buf []byte, off int)
	}{
		{"read", 0, 4096, func(r *Ring, e *SQE, buf []byte, off int) { e.PrepRead(fd, buf, uint64(off)) }},
		{"read-middle", 12345, 100_000, func(r *Ring, e *SQE, buf []byte, off int) { e.PrepRead(fd, buf, uint64(off)) }},
		{"read-fixed", 4096, 65536, func(r *Ring, e *SQE, buf []byte, off int) {
			if err := r.RegisterBuffers([][]byte{buf}); err != nil {
				t.Fatal(err)
			}
			e.PrepReadFixed(fd, buf, uint64(off), 0)
		}},
		{"readv", 7, 8192, func(r *Ring, e *SQE, buf []byte, off int) {
			iovs := make([]unix.Iovec, 2)
			iovs[0].Base, iovs[1].Base = &buf[0], &buf[4096]
			iovs[0].SetLen(4096)
			iovs[1].SetLen(4096)
			e.PrepReadv(fd, iovs, uint64(off))
			t.Cleanup(func() { _ = iovs })
		}},
		{"read-past-eof", 299_000, 4096, func(r *Ring, e *SQE, buf []byte, off int) { e.PrepRead(fd, buf, uint64(off)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(t, 8)
			buf := mmapBuf(t, tc.n)
			e := r.SQE()
			if e == nil {
				t.Fatal("no free SQE on an empty ring")
			}
			tc.prep(r, e, buf, tc.off)
			e.UserData = 42
			c := reapOne(t, r)
			want := data[tc.off:min(tc.off+tc.n, len(data))]
			if c.UserData != 42 || int(c.Res) != len(want) {
				t.Fatalf("cqe = %+v, want user 42 res %d", c, len(want))
			}
			if !bytes.Equal(buf[:c.Res], want) {
				t.Fatal("bytes differ from the file")
			}
		})
	}
}

func TestBatchAndFull(t *testing.T) {
	r := newRing(t, 4)
	sq, cq := r.Entries()
	if sq != 4 || cq < sq {
		t.Fatalf("entries sq=%d cq=%d", sq, cq)
	}
	for i := 0; i < 4; i++ {
		e := r.SQE()
		if e == nil {
			t.Fatalf("SQE %d nil", i)
		}
		e.PrepNop()
		e.UserData = uint64(i)
	}
	if r.SQE() != nil {
		t.Fatal("fifth SQE on a 4-entry ring")
	}
	if r.Pending() != 4 {
		t.Fatalf("pending %d", r.Pending())
	}
	n, err := r.Submit(4)
	if err != nil || n != 4 {
		t.Fatalf("submit = %d, %v", n, err)
	}
	seen := map[uint64]bool{}
	for r.CQReady() > 0 {
		c, _ := r.PeekCQE()
		seen[c.UserData] = true
		r.CQESeen()
	}
	if len(seen) != 4 {
		t.Fatalf("reaped %v", seen)
	}
	if _, ok := r.PeekCQE(); ok {
		t.Fatal("completion left after reaping all")
	}
}

func TestFixedFileAndProbe(t *testing.T) {
	r := newRing(t, 4)
	p, err := r.Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []uint8{OpNop, OpRead, OpReadFixed, OpReadv} {
		if !p.Supports(op) {
			t.Errorf("probe says op %d unsupported", op)
		}
	}
	f, data := testFile(t, 10000)
	if err := r.RegisterFiles([]int32{-1, -1}); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateFiles(1, []int32{int32(f.Fd())}); err != nil {
		t.Fatal(err)
	}
	buf := mmapBuf(t, 4096)
	e := r.SQE()
	e.PrepRead(1, buf, 100)
	e.Flags |= SQEFixedFile
	c := reapOne(t, r)
	if c.Res != 4096 || !bytes.Equal(buf, data[100:4196]) {
		t.Fatalf("fixed-file read res=%d", c.Res)
	}
	e = r.SQE()
	e.PrepRead(0, buf, 0) // empty slot
	e.Flags |= SQEFixedFile
	if c := reapOne(t, r); c.Res >= 0 {
		t.Fatalf("read from an empty slot gave %d, want an error", c.Res)
	}
	if err := r.UnregisterFiles(); err != nil {
		t.Fatal(err)
	}
}

func TestBadFD(t *testing.T) {
	r := newRing(t, 2)
	buf := mmapBuf(t, 4096)
	e := r.SQE()
	e.PrepRead(-5, buf, 0)
	if c := reapOne(t, r); unix.Errno(-c.Res) != unix.EBADF {
		t.Fatalf("res %d, want -EBADF", c.Res)
	}
}

func TestSizes(t *testing.T) {
	if unsafe.Sizeof(SQE{}) != 64 || unsafe.Sizeof(CQE{}) != 16 {
		t.Fatal("ABI sizes wrong")
	}
}

// TestTimedWaitAndCancel parks a read on an empty pipe (it waits in the
// kernel), sees a timed wait return ErrTimeout while it is parked, cancels it
// and reaps both completions.
func TestTimedWaitAndCancel(t *testing.T) {
	r := newRing(t, 4)
	if r.Features()&FeatExtArg == 0 {
		t.Skip("kernel without IORING_FEAT_EXT_ARG")
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := mmapBuf(t, 4096)
	e := r.SQE()
	e.PrepRead(int32(p[0]), buf, 0)
	e.UserData = 7
	if _, err := r.SubmitWait(1, 20*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("wait on a parked read: %v, want ErrTimeout", err)
	}
	if r.CQReady() != 0 {
		t.Fatal("a read of an empty pipe completed")
	}
	e = r.SQE()
	e.PrepCancel(7)
	e.UserData = 8
	got := map[uint64]int32{}
	deadline := time.Now().Add(time.Minute)
	for len(got) < 2 && time.Now().Before(deadline) {
		if _, err := r.SubmitWait(1, time.Second); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		for {
			c, ok := r.PeekCQE()
			if !ok {
				break
			}
			got[c.UserData] = c.Res
			r.CQESeen()
		}
	}
	if res, ok := got[7]; !ok || (unix.Errno(-res) != unix.ECANCELED && unix.Errno(-res) != unix.EINTR) {
		t.Fatalf("cancelled read: %v (present %v), want -ECANCELED or -EINTR", unix.Errno(-res), ok)
	}
	if res, ok := got[8]; !ok || res < 0 && unix.Errno(-res) != unix.EALREADY {
		t.Fatalf("cancel: %v (present %v)", unix.Errno(-res), ok)
	}
}
