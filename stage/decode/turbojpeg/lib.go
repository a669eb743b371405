//go:build linux || darwin

package turbojpeg

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/psiflow/psiflow/internal/kernfile"
)

// EnvPath names the environment variable that overrides the library to load:
// a file name or path given to dlopen, or "off" to refuse loading (which makes
// psiflow use its standard-library fallback).
const EnvPath = "PSIFLOW_TURBOJPEG"

// candidates are the names tried by [Load] with an empty path, in order.
func candidates() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libturbojpeg.0.dylib", "libturbojpeg.dylib",
			"/opt/homebrew/lib/libturbojpeg.dylib", "/usr/local/lib/libturbojpeg.dylib"}
	}
	return []string{"libturbojpeg.so.0", "libturbojpeg.so"}
}

// Lib is a loaded TurboJPEG library. It is safe for concurrent use; the
// [Decompressor] handles it makes are not.
type Lib struct {
	name    string // the name dlopen accepted
	direct  bool   // per-image calls made directly ([EnvCalls])
	file    string // the file mapped, when it can be found
	api     string
	factors []ScalingFactor

	initDecompress func() uintptr
	destroy        func(h uintptr) int32
	errorStr2      func(h uintptr) string

	// The per-image calls go through purego.SyscallN on the raw symbol
	// addresses: RegisterLibFunc's reflection-based wrappers allocate on
	// every call (≈ 6 allocations each), SyscallN does not.
	decompressHeader uintptr // tjDecompressHeader3
	decompress2      uintptr // tjDecompress2

	xformOnce sync.Once
	xform     *transformSyms
}

var (
	defaultOnce sync.Once
	defaultLib  *Lib
	defaultErr  error
)

// Default loads the library once per process (honouring [EnvPath]) and
// returns it, or the reason it cannot be used.
func Default() (*Lib, error) {
	defaultOnce.Do(func() {
		p := os.Getenv(EnvPath)
		if p == "off" {
			defaultErr = fmt.Errorf("%w: disabled by %s=off", ErrNotAvailable, EnvPath)
			return
		}
		defaultLib, defaultErr = Load(p)
	})
	return defaultLib, defaultErr
}

// Load opens the TurboJPEG library at path (a file name searched by dlopen,
// or a path); an empty path tries the usual sonames. Every failure wraps
// [ErrNotAvailable] and says which names were tried and why they failed.
// A loaded library is never unloaded.
func Load(path string) (*Lib, error) {
	direct, err := directFromEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAvailable, err)
	}
	names := candidates()
	if path != "" {
		names = []string{path}
	}
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		l, err := bind(h, n)
		if err != nil {
			_ = purego.Dlclose(h)
			errs = append(errs, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		l.direct = direct
		return l, nil
	}
	return nil, fmt.Errorf("%w: %s (install libturbojpeg0, or set %s to its path)",
		ErrNotAvailable, strings.Join(errs, "; "), EnvPath)
}

// register binds the C function name to fptr, turning purego's panic on a
// missing symbol into an error.
func register(fptr any, h uintptr, name string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("symbol %s: %v", name, r)
		}
	}()
	purego.RegisterLibFunc(fptr, h, name)
	return nil
}

func bind(h uintptr, name string) (*Lib, error) {
	l := &Lib{name: name, api: "TurboJPEG 2.x API"}
	var getScalingFactors func(n *int32) unsafe.Pointer
	for _, s := range []struct {
		fptr any
		name string
	}{
		{&l.initDecompress, "tjInitDecompress"},
		{&l.destroy, "tjDestroy"},
		{&l.errorStr2, "tjGetErrorStr2"}, // TurboJPEG ≥ 2.0
		{&getScalingFactors, "tjGetScalingFactors"},
	} {
		if err := register(s.fptr, h, s.name); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.decompressHeader, "tjDecompressHeader3"},
		{&l.decompress2, "tjDecompress2"},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("symbol %s: %v", s.name, err)
		}
		*s.p = p
	}
	if _, err := purego.Dlsym(h, "tj3Init"); err == nil {
		l.api = "TurboJPEG 3.x API"
	}
	var n int32
	p := getScalingFactors(&n)
	if p == nil || n <= 0 || n > 64 {
		return nil, errors.New("tjGetScalingFactors returned no factors")
	}
	l.factors = append([]ScalingFactor(nil), unsafe.Slice((*ScalingFactor)(p), int(n))...)
	for _, f := range l.factors {
		if f.Num <= 0 || f.Denom <= 0 {
			return nil, fmt.Errorf("tjGetScalingFactors returned an invalid factor %v", f)
		}
	}
	l.file = mappedFile("turbojpeg")
	return l, nil
}

// mappedFile returns the path of the first file mapped into this process whose
// name contains substr (Linux /proc/self/maps), or "" if unknown.
func mappedFile(substr string) string {
	maps, err := kernfile.ReadMaps("/proc/self/maps")
	if err != nil {
		return ""
	}
	for _, m := range maps {
		if strings.Contains(m.Path, substr) {
			return m.Path
		}
	}
	return ""
}

// Name returns the name dlopen accepted, e.g. "libturbojpeg.so.0".
func (l *Lib) Name() string { return l.name }

// File returns the file the library was mapped from (symbolic links
// resolved by the loader), or "" where the platform does not say.
func (l *Lib) File() string { return l.file }

// API names the TurboJPEG API generation found ("TurboJPEG 2.x API" or
// "TurboJPEG 3.x API"); the library has no version function.
func (l *Lib) API() string { return l.api }

// Describe returns a one-line description for diagnostics.
func (l *Lib) Describe() string {
	s := l.name
	if l.file != "" && l.file != l.name {
		s += " (" + l.file + ")"
	}
	return s + ", " + l.api
}

// ScalingFactors returns the DCT scaling factors the library supports.
func (l *Lib) ScalingFactors() []ScalingFactor {
	return append([]ScalingFactor(nil), l.factors...)
}

// ScaledSize returns the size an image of w×h decodes to at f.
func (l *Lib) ScaledSize(w, h int, f ScalingFactor) (int, int) {
	return f.Scale(w), f.Scale(h)
}

// Decompressor is one TurboJPEG decompression handle. It is not safe for
// concurrent use: keep one per goroutine. It stays usable after decoding
// errors (the underlying handle is replaced).
type Decompressor struct {
	lib *Lib
	h   uintptr
	// out-parameters of tjDecompressHeader3, kept in the (heap-allocated)
	// handle so that passing their addresses to C allocates nothing
	w, ht, subsamp, cs int32
	// args is the argument block of the per-image C calls and pin holds the
	// buffers they read or write; see [Decompressor.call].
	args    [9]uintptr
	pin     [2]unsafe.Pointer
	cleanup runtime.Cleanup
}

// call calls the C function fn with the first n words of d.args and returns
// its int result; d.pin must hold every Go buffer whose address is in d.args.
// direct makes the call without entering a system call ([EnvCalls]).
//
// It allocates nothing, which is why it exists: RegisterLibFunc's
// reflection-based wrappers allocate several times per call, and so does
// purego.SyscallN given a list of arguments (it is go:uintptrescapes, so the
// implicit argument slice escapes). Handing SyscallN a slice of d.args, which
// lives in the heap-allocated handle, escapes nothing new.
//
// This steps outside unsafe.Pointer rule 4 (conversion to uintptr in the
// call expression) deliberately, and is sound for these reasons: storing the
// buffers' addresses as unsafe.Pointers in d.pin makes escape analysis put
// them on the heap (callers' buffers included), Go's heap objects never move,
// and d.pin keeps them alive until the call returns, when both blocks are
// cleared so the handle retains nothing. The out-parameters are fields of d,
// which the caller keeps alive. unsigned long is pointer-sized on every
// platform this file builds for, so sizes go in one word.
func (d *Decompressor) call(fn uintptr, n int, direct bool) int32 {
	var r1 uintptr
	if direct {
		r1 = directCall(fn, &d.args)
	} else {
		r1, _, _ = purego.SyscallN(fn, d.args[:n]...)
	}
	d.args = [len(d.args)]uintptr{}
	d.pin = [len(d.pin)]unsafe.Pointer{}
	return int32(r1) // C int: the upper half of the register is undefined
}

// NewDecompressor returns a new handle; Close it when done (a handle that
// becomes unreachable unclosed is destroyed by a cleanup).
func (l *Lib) NewDecompressor() (*Decompressor, error) {
	h := l.initDecompress()
	if h == 0 {
		return nil, fmt.Errorf("turbojpeg: tjInitDecompress failed: %s", l.errorStr2(0))
	}
	d := &Decompressor{lib: l, h: h}
	d.cleanup = runtime.AddCleanup(d, func(h uintptr) { l.destroy(h) }, h)
	return d, nil
}

// Close destroys the handle. It is safe to call twice.
func (d *Decompressor) Close() error {
	if d.h == 0 {
		return nil
	}
	d.cleanup.Stop()
	rc := d.lib.destroy(d.h)
	d.h = 0
	if rc != 0 {
		return errors.New("turbojpeg: tjDestroy failed")
	}
	return nil
}

// err returns the handle's error for op and replaces the handle with a fresh
// one: after a failed tjDecompressHeader3 (for example on truncated data),
// libjpeg-turbo 2.1 leaves the handle mid-stream and the next header read on
// good data fails ("Bogus DQT index"), so a handle is not reused after an error.
func (d *Decompressor) err(op string) error {
	e := fmt.Errorf("turbojpeg: %s: %s", op, d.lib.errorStr2(d.h))
	d.cleanup.Stop()
	d.lib.destroy(d.h)
	d.h = d.lib.initDecompress()
	if d.h == 0 {
		return fmt.Errorf("%w (and tjInitDecompress failed: the decompressor is unusable)", e)
	}
	l := d.lib
	d.cleanup = runtime.AddCleanup(d, func(h uintptr) { l.destroy(h) }, d.h)
	return e
}

// Header parses the JPEG header of data. A header that reports a size of
// zero is an error.
func (d *Decompressor) Header(data []byte) (Header, error) {
	if d.h == 0 {
		return Header{}, errors.New("turbojpeg: decompressor is closed")
	}
	if len(data) == 0 {
		return Header{}, errors.New("turbojpeg: empty data")
	}
	d.w, d.ht, d.subsamp, d.cs = 0, 0, -1, -1
	// int tjDecompressHeader3(tjhandle, const unsigned char *jpegBuf,
	//   unsigned long jpegSize, int *width, int *height, int *jpegSubsamp,
	//   int *jpegColorspace)
	d.pin[0] = unsafe.Pointer(&data[0])
	d.args = [len(d.args)]uintptr{d.h, uintptr(d.pin[0]), uintptr(len(data)),
		uintptr(unsafe.Pointer(&d.w)), uintptr(unsafe.Pointer(&d.ht)),
		uintptr(unsafe.Pointer(&d.subsamp)), uintptr(unsafe.Pointer(&d.cs))}
	if rc := d.call(d.lib.decompressHeader, 7, d.lib.direct); rc != 0 {
		return Header{}, d.err("reading header")
	}
	if d.w <= 0 || d.ht <= 0 {
		return Header{}, fmt.Errorf("turbojpeg: header reports an invalid size %d×%d", d.w, d.ht)
	}
	return Header{Width: int(d.w), Height: int(d.ht), Subsampling: int(d.subsamp), Colorspace: Colorspace(d.cs)}, nil
}

// Decompress decodes data into dst at scale f (use {1, 1} for full size)
// in pixel format pf, rows packed (pitch = width × channels). hdr must be the
// result of [Decompressor.Header] on the same data. dst must hold at least
// the scaled width × height × channels bytes. [FlagStopOnWarning] is always
// added to flags, and any non-zero return is an error.
func (d *Decompressor) Decompress(data []byte, hdr Header, f ScalingFactor, pf PixelFormat, flags Flags, dst []byte) error {
	if d.h == 0 {
		return errors.New("turbojpeg: decompressor is closed")
	}
	if len(data) == 0 {
		return errors.New("turbojpeg: empty data")
	}
	if hdr.Width <= 0 || hdr.Height <= 0 {
		return fmt.Errorf("turbojpeg: invalid size %d×%d", hdr.Width, hdr.Height)
	}
	if !d.lib.supports(f) {
		return fmt.Errorf("turbojpeg: scaling factor %v not supported", f)
	}
	ch := pf.Channels()
	if ch == 0 {
		return fmt.Errorf("turbojpeg: unsupported pixel format %d", int32(pf))
	}
	w, h := f.Scale(hdr.Width), f.Scale(hdr.Height)
	need := w * h * ch
	if len(dst) < need {
		return fmt.Errorf("turbojpeg: destination holds %d bytes, %d×%d×%d needs %d", len(dst), w, h, ch, need)
	}
	// int tjDecompress2(tjhandle, const unsigned char *jpegBuf,
	//   unsigned long jpegSize, unsigned char *dstBuf, int width, int pitch,
	//   int height, int pixelFormat, int flags); the sizes are positive
	// (checked above) and the C side reads the low 32 bits of each int.
	d.pin[0], d.pin[1] = unsafe.Pointer(&data[0]), unsafe.Pointer(&dst[0])
	d.args = [len(d.args)]uintptr{d.h, uintptr(d.pin[0]), uintptr(len(data)), uintptr(d.pin[1]),
		uintptr(w), uintptr(w * ch), uintptr(h), uintptr(uint32(pf)), uintptr(uint32(flags | FlagStopOnWarning))}
	if rc := d.call(d.lib.decompress2, 9, d.lib.direct && hdr.Width*hdr.Height <= DirectMaxPixels); rc != 0 {
		return d.err("decompressing")
	}
	return nil
}

func (l *Lib) supports(f ScalingFactor) bool {
	for _, g := range l.factors {
		if g == f {
			return true
		}
	}
	return false
}
