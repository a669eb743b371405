//go:build linux

package cuda_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/internal/devicetest"
	"github.com/psiflow/psiflow/internal/fakecuda"
	"github.com/psiflow/psiflow/uma"
)

// openFake opens the fake driver and checks, when the test ends, that the
// device was closed cleanly and that the fake saw no violation.
func openFake(t *testing.T) (*cuda.Device, *fakecuda.Lib) {
	t.Helper()
	path := fakecuda.Build(t, fakecuda.Full)
	f := fakecuda.Open(t, path)
	f.TakeViolations() // what earlier tests left is theirs
	d, err := cuda.Open(cuda.Config{Library: path})
	if err != nil {
		t.Fatalf("Open(fake): %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, k := range []string{"alloc", "reg", "stream", "event", "ctxref", "pending"} {
			if n := f.Live(k); n != 0 {
				t.Errorf("after Close the fake driver still has %d live %s", n, k)
			}
		}
		f.CheckNoViolations(t)
	})
	return d, f
}

// staging returns n bytes of a UMA arena recorded as registered (what the
// Pin stage hands the device), released when the test ends.
func staging(t *testing.T, n int64) []byte {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 64 << 10, MemoryLimit: func() (int64, string, error) { return 8 << 30, "test", nil }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := u.NewArena("staging", n, uma.ArenaOptions{NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Register(context.Background(), 0, n, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Release()
		if err := u.Close(); err != nil {
			t.Errorf("uma Close: %v", err)
		}
	})
	return r.Bytes()
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	_, err := cuda.Open(cuda.Config{Library: "/nonexistent/libcuda.so.1"})
	if !errors.Is(err, gpu.ErrNoDriver) {
		t.Fatalf("Open without a driver = %v, want gpu.ErrNoDriver", err)
	}
	for _, want := range []string{"/nonexistent/libcuda.so.1", cuda.EnvLibrary} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestOpenMissingSymbol(t *testing.T) {
	path := fakecuda.Build(t, fakecuda.NoHostRegister)
	_, err := cuda.Open(cuda.Config{Library: path})
	if err == nil || !strings.Contains(err.Error(), "cuMemHostRegister_v2") {
		t.Fatalf("Open of a driver without cuMemHostRegister_v2 = %v, want an error naming it", err)
	}
}

func TestOpenNoDevice(t *testing.T) {
	path := fakecuda.Build(t, fakecuda.Full)
	f := fakecuda.Open(t, path)
	f.Fail("cuInit", 100)
	_, err := cuda.Open(cuda.Config{Library: path})
	if !errors.Is(err, gpu.ErrNoDevice) || !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected") {
		t.Fatalf("Open when cuInit says no device = %v, want gpu.ErrNoDevice with the driver's words", err)
	}
	if _, err := cuda.Open(cuda.Config{Library: path, Ordinal: 3}); !errors.Is(err, gpu.ErrNoDevice) || !strings.Contains(err.Error(), "device 3") {
		t.Fatalf("Open of device 3 of 1 = %v, want gpu.ErrNoDevice naming it", err)
	}
	f.CheckNoViolations(t)
}

// TestCopyRoundTrip copies UMA staging memory to the device on streams of
// their own, from several goroutines at once, and reads it back.
func TestCopyRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, f := openFake(t)
	if !strings.HasPrefix(d.Name(), "cuda:0 psiflow fake CUDA device 0 (driver 13.0)") {
		t.Errorf("Name = %q", d.Name())
	}
	for _, tc := range []struct {
		name            string
		streams, copies int
		size            int64
	}{
		{"one stream", 1, 3, 4096},
		{"two streams", 2, 4, 200_000},
		{"odd size", 2, 2, 65536*2 + 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := staging(t, int64(tc.streams*tc.copies)*tc.size)
			if err := d.Register(host); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Unregister(host); err != nil {
					t.Error(err)
				}
			}()
			before := f.Counts("cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize", "cuMemHostRegister_v2")
			var wg sync.WaitGroup
			errs := make(chan error, tc.streams)
			for s := range tc.streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- copyAndVerify(ctx, d, host[int64(s*tc.copies)*tc.size:int64((s+1)*tc.copies)*tc.size], tc.copies, tc.size, byte(s))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			n := int64(tc.streams * tc.copies)
			after := f.Counts("cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize", "cuMemHostRegister_v2")
			for k, want := range map[string]int64{"cuMemcpyHtoDAsync_v2": n, "cuEventRecord": n, "cuEventSynchronize": n, "cuMemHostRegister_v2": 0} {
				if got := after[k] - before[k]; got != want {
					t.Errorf("%s called %d times for %d copies, want %d", k, got, n, want)
				}
			}
			f.CheckNoViolations(t)
		})
	}
}

func copyAndVerify(ctx context.Context, d *cuda.Device, host []byte, copies int, size int64, seed byte) error {
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	ev, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer ev.Close()
	p, err := d.Alloc(ctx, int64(copies)*size)
	if err != nil {
		return err
	}
	defer d.Free(p)
	for i := range copies {
		b := host[int64(i)*size : int64(i+1)*size]
		fill(b, seed+byte(i))
		if err := s.CopyToDevice(p+gpu.Ptr(int64(i)*size), b); err != nil {
			return err
		}
		if err := s.Record(ev); err != nil {
			return err
		}
		if err := ev.Wait(ctx); err != nil {
			return err
		}
	}
	back := make([]byte, int64(copies)*size) // the Go heap is fine for a synchronous copy back
	if err := d.CopyToHost(ctx, back, p); err != nil {
		return err
	}
	if !bytes.Equal(back, host) {
		return errors.New("the bytes copied back differ from the bytes copied")
	}
	return nil
}

// TestRefusesMemoryOutsideARegistration: the Go heap, and UMA memory the
// device did not register, never reach the driver.
func TestRefusesMemoryOutsideARegistration(t *testing.T) {
	d, f := openFake(t)
	ctx := context.Background()
	p, err := d.Alloc(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := staging(t, 1<<20)
	heap := make([]byte, 1<<20)
	regs, copies := f.Calls("cuMemHostRegister_v2"), f.Calls("cuMemcpyHtoDAsync_v2")
	for _, tc := range []struct {
		name string
		op   func() error
		want string
	}{
		{"register the Go heap", func() error { return d.Register(heap) }, "not UMA arena memory"},
		{"copy from the Go heap", func() error { return s.CopyToDevice(p, heap) }, "not UMA arena memory"},
		{"copy from UMA memory not registered with the device", func() error { return s.CopyToDevice(p, host[:4096]) }, "not registered with this device"},
		{"copy past the allocation", func() error {
			if err := d.Register(host); err != nil {
				return err
			}
			defer d.Unregister(host)
			return s.CopyToDevice(p+4096, host)
		}, "not inside one allocation"},
		{"register twice", func() error {
			if err := d.Register(host); err != nil {
				return err
			}
			defer d.Unregister(host)
			return d.Register(host[4096:8192])
		}, "overlaps"},
		{"unregister what was not registered", func() error { return d.Unregister(host) }, "not registered with this device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	var me *gpu.MemoryError
	if err := d.Register(heap); !errors.As(err, &me) || me.Op != "register" {
		t.Errorf("Register(Go heap) = %v, want a *gpu.MemoryError", err)
	}
	if got := f.Calls("cuMemHostRegister_v2") - regs; got != 2 {
		t.Errorf("the driver saw %d registrations, want only the 2 legitimate ones", got)
	}
	if got := f.Calls("cuMemcpyHtoDAsync_v2") - copies; got != 0 {
		t.Errorf("the driver saw %d copies, want none", got)
	}
}

// TestFakeCatchesReuseBeforeCompletion shows that the fake driver copies
// when the copy completes, not when it is enqueued: host bytes changed in
// between are caught (by the fake) and copied (as a real DMA would).
func TestFakeCatchesReuseBeforeCompletion(t *testing.T) {
	d, f := openFake(t)
	ctx := context.Background()
	host := staging(t, 8192)
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	defer d.Unregister(host)
	p, _ := d.Alloc(ctx, 8192)
	defer d.Free(p)
	s, _ := d.NewStream()
	defer s.Close()
	fill(host, 1)
	if err := s.CopyToDevice(p, host); err != nil {
		t.Fatal(err)
	}
	fill(host, 2) // reused before the copy completed: a bug the fake must see
	if err := s.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
	if v := f.TakeViolations(); !strings.Contains(v, "host bytes changed while the copy was in flight") {
		t.Fatalf("violations %q, want the reuse reported", v)
	}
	back := make([]byte, 8192)
	if err := d.CopyToHost(ctx, back, p); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8192)
	fill(want, 2)
	if !bytes.Equal(back, want) {
		t.Fatal("the fake copied the bytes of enqueue time, not of completion time")
	}
}

func TestFakeNeedsContextOnThread(t *testing.T) {
	path := fakecuda.Build(t, fakecuda.Full)
	f := fakecuda.Open(t, path)
	d, err := cuda.Open(cuda.Config{Library: path}) // cuInit, and a retained context
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f.TakeViolations()
	code := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		code <- f.MemGetInfoHere()
	}()
	if got := <-code; got != 201 {
		t.Fatalf("cuMemGetInfo_v2 on a thread without a context = %d, want CUDA_ERROR_INVALID_CONTEXT (201)", got)
	}
	if v := f.TakeViolations(); !strings.Contains(v, "no current context") {
		t.Fatalf("violations %q, want the missing context named", v)
	}
}

func TestDriverErrorsAreNamed(t *testing.T) {
	d, f := openFake(t)
	f.Fail("cuMemAlloc_v2", 2)
	_, err := d.Alloc(context.Background(), 1<<20)
	if !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("Alloc when the driver is out of memory = %v, want gpu.ErrOutOfMemory", err)
	}
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc_v2" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Text != "out of memory" {
		t.Fatalf("error %v (%#v), want the call and the driver's name and text", err, ce)
	}
	if _, err := d.Alloc(context.Background(), 2<<30); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("Alloc beyond the device's 1 GiB = %v, want gpu.ErrOutOfMemory", err)
	}
	mi, err := d.MemInfo()
	if err != nil || mi.Total != 1<<30 || mi.Free != 1<<30 {
		t.Fatalf("MemInfo = %+v, %v; want 1 GiB free of 1 GiB", mi, err)
	}
}

func TestCloseReportsWhatWasLeftOpen(t *testing.T) {
	path := fakecuda.Build(t, fakecuda.Full)
	f := fakecuda.Open(t, path)
	f.TakeViolations()
	d, err := cuda.Open(cuda.Config{Library: path})
	if err != nil {
		t.Fatal(err)
	}
	host := staging(t, 4096)
	if _, err := d.Alloc(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewStream(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewEvent(); err != nil {
		t.Fatal(err)
	}
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	err = d.Close()
	if err == nil || !strings.Contains(err.Error(), "1 streams, 1 events, 1 allocations, 1 host registrations were still open") {
		t.Fatalf("Close = %v, want what was left open", err)
	}
	for _, k := range []string{"alloc", "reg", "stream", "event", "ctxref"} {
		if n := f.Live(k); n != 0 {
			t.Errorf("the fake still has %d live %s", n, k)
		}
	}
	f.CheckNoViolations(t)
	if _, err := d.Alloc(context.Background(), 1); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want gpu.ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestTimingEvents(t *testing.T) {
	d, _ := openFake(t)
	s, _ := d.NewStream()
	defer s.Close()
	a, err := d.NewTimingEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := d.NewTimingEvent()
	defer b.Close()
	if err := s.Record(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el, err := b.Elapsed(a); err != nil || el < 0 {
		t.Fatalf("Elapsed = %v, %v", el, err)
	}
	plain, _ := d.NewEvent()
	defer plain.Close()
	if _, err := b.Elapsed(plain.(*cuda.Event)); err == nil {
		t.Fatal("Elapsed against an event without timing succeeded")
	}
}

// TestConformance runs the suite every gpu.Device passes against the fake driver.
func TestConformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) (gpu.Device, int64) {
		path := fakecuda.Build(t, fakecuda.Full)
		f := fakecuda.Open(t, path)
		f.TakeViolations()
		d, err := cuda.Open(cuda.Config{Library: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = d.Close()
			f.CheckNoViolations(t)
		})
		return d, 1 << 30
	})
}
