//go:build linux

// Package fakecuda builds and inspects the fake CUDA driver the gpu tests run
// against: a small libcuda.so.1 stand-in compiled with cc from
// testdata/fakecuda.c (the file's comment lists what it checks). It records
// every call and checks handles, sizes, registration, and the thread and
// context rules strictly, so that the purego binding in gpu/cuda is tested on
// every machine, GPU or not.
//
// It owns the build (cc, once per process per variant, into a temporary
// folder that [Cleanup] removes) and the test-only entry points of the fake
// (call counts, violations, injected failures, live objects). It does not
// load the driver for the binding: tests pass the path from [Build] to
// cuda.Open (Config.Library), the one way the binding is pointed at a library.
//
// Without cc the tests skip, saying so; with PSIFLOW_REQUIRE_KERNEL=1 (make
// test sets it, and installs gcc) a missing cc is a failure.
package fakecuda

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the C source
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/psiflow/psiflow/internal/kerneltest"
)

//go:embed testdata/fakecuda.c
var source []byte

// Variant selects a build of the fake.
type Variant string

const (
	// Full is the fake with every entry point.
	Full Variant = ""
	// NoHostRegister leaves cuMemHostRegister_v2 out: a driver missing a symbol.
	NoHostRegister Variant = "-DFAKECUDA_NO_HOST_REGISTER"
)

var (
	mu    sync.Mutex
	dir   string
	built = map[Variant]string{}
	libs  = map[string]*Lib{}
)

// Build compiles the fake (once per process and variant) and returns the path
// of its libcuda.so.1. Without cc it skips t, or fails it under
// PSIFLOW_REQUIRE_KERNEL=1.
func Build(t testing.TB, v Variant) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[v]; ok {
		return p
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if kerneltest.Required() {
			t.Fatalf("the fake CUDA driver needs a C compiler (cc): %v; make test installs gcc, and %s=1 forbids skipping", err, kerneltest.EnvRequire)
		}
		t.Skipf("no C compiler (cc) to build the fake CUDA driver: %v", err)
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "psiflow-fakecuda-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	sum := sha256.Sum256(append(append([]byte(nil), source...), v...))
	sub := filepath.Join(dir, hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(sub, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(sub, "libcuda.so.1")
	args := []string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-pthread", "-o", out, src}
	if v != Full {
		args = append([]string{string(v)}, args...)
	}
	cmd := exec.Command(cc, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building the fake CUDA driver: %s %s: %v\n%s", cc, strings.Join(args, " "), err, stderr.String())
	}
	built[v] = out
	return out
}

// Cleanup removes the built libraries (call it from TestMain after m.Run; a
// loaded library stays mapped).
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
		dir = ""
		built = map[Variant]string{}
	}
}

// Lib is the test side of a loaded fake: counters, violations and failures.
type Lib struct {
	calls, take, fail, live, here uintptr
}

// Open loads the fake at path (the same handle the binding gets when it opens
// the same path) and binds its test-only entry points.
func Open(t testing.TB, path string) *Lib {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if l, ok := libs[path]; ok {
		return l
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatalf("dlopen %s: %v", path, err)
	}
	l := &Lib{}
	for _, s := range []struct {
		p    *uintptr
		name string
	}{{&l.calls, "fakecuda_calls"}, {&l.take, "fakecuda_take_violations"}, {&l.fail, "fakecuda_fail"},
		{&l.live, "fakecuda_live"}, {&l.here, "fakecuda_memgetinfo_here"}} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			t.Fatalf("fake CUDA driver %s: %v", path, err)
		}
		*s.p = p
	}
	libs[path] = l
	return l
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// Calls is how often the driver entry point name was called ("" for all;
// cuGetErrorString and cuGetErrorName are not counted).
func (l *Lib) Calls(name string) int64 {
	b := cstr(name)
	r, _, _ := purego.SyscallN(l.calls, uintptr(unsafe.Pointer(&b[0])))
	return int64(r)
}

// Counts returns Calls for each name.
func (l *Lib) Counts(names ...string) map[string]int64 {
	m := make(map[string]int64, len(names))
	for _, n := range names {
		m[n] = l.Calls(n)
	}
	return m
}

// TakeViolations returns the violations recorded since the last call (one
// per line, "" when none) and clears them.
func (l *Lib) TakeViolations() string {
	buf := make([]byte, 1<<16)
	n, _, _ := purego.SyscallN(l.take, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if int(int32(n)) <= 0 {
		return ""
	}
	return string(buf[:bytes.IndexByte(buf, 0)])
}

// CheckNoViolations fails t with every violation recorded since the last check.
func (l *Lib) CheckNoViolations(t testing.TB) {
	t.Helper()
	if v := l.TakeViolations(); v != "" {
		t.Errorf("the fake CUDA driver recorded violations:\n%s", v)
	}
}

// Fail makes the next call of the entry point name return code.
func (l *Lib) Fail(name string, code int) {
	b := cstr(name)
	purego.SyscallN(l.fail, uintptr(unsafe.Pointer(&b[0])), uintptr(code))
}

// Live counts the fake's live objects of a kind: "alloc", "reg", "stream",
// "event", "ctxref" (primary-context references) or "pending" (queued
// operations not yet run).
func (l *Lib) Live(what string) int64 {
	b := cstr(what)
	r, _, _ := purego.SyscallN(l.live, uintptr(unsafe.Pointer(&b[0])))
	if int64(r) < 0 {
		panic(fmt.Sprintf("fakecuda: unknown kind %q", what))
	}
	return int64(r)
}

// MemGetInfoHere calls cuMemGetInfo_v2 on the calling thread, whatever its
// context, and returns the driver's code (to test the fake's own rules).
func (l *Lib) MemGetInfoHere() int {
	r, _, _ := purego.SyscallN(l.here)
	return int(int32(r))
}
