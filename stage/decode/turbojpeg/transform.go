//go:build linux || darwin

package turbojpeg

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// MCUSize returns the width and height in pixels of a minimum coded unit for
// the chroma subsampling sub (TJSAMP_*: tjMCUWidth, tjMCUHeight), the grid a
// lossless crop's corner must lie on; ok is false for an unknown value.
func MCUSize(sub int) (w, h int, ok bool) {
	ws, hs := [...]int{8, 16, 16, 8, 8, 32}, [...]int{8, 8, 16, 8, 16, 8}
	if sub < 0 || sub >= len(ws) {
		return 0, 0, false
	}
	return ws[sub], hs[sub], true
}

// transformSyms are the optional symbols of lossless transforms, bound on
// first use.
type transformSyms struct {
	initTransform func() uintptr
	bufSize       func(w, h, sub int32) uint64
	transform     uintptr // tjTransform
	err           error
}

func (l *Lib) transformSymbols() (*transformSyms, error) {
	l.xformOnce.Do(func() {
		s := &transformSyms{}
		h, err := purego.Dlopen(l.name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			err = register(&s.initTransform, h, "tjInitTransform")
		}
		if err == nil {
			err = register(&s.bufSize, h, "tjBufSize")
		}
		if err == nil {
			s.transform, err = purego.Dlsym(h, "tjTransform")
		}
		if err != nil {
			s.err = fmt.Errorf("turbojpeg: lossless transforms unavailable in %s: %w", l.name, err)
		}
		l.xform = s
	})
	return l.xform, l.xform.err
}

// Transformer is a TurboJPEG transform handle (tjInitTransform): lossless
// operations on a JPEG's DCT coefficients. It is not safe for concurrent
// use. psiflow uses it only to measure crop-aware decoding (see
// docs/DECODE.md): the lossless crop reads every coefficient of the image,
// so it costs most of a full decode.
type Transformer struct {
	lib     *Lib
	syms    *transformSyms
	h       uintptr
	xf      tjtransform
	dstPtr  uintptr // the cell tjTransform reads the output buffer's address from
	dstSize uint64
	args    [8]uintptr
	pin     [2]unsafe.Pointer
	cleanup runtime.Cleanup
}

// tjtransform is TurboJPEG's struct tjtransform: a tjregion (x, y, w, h),
// op, options, data and customFilter.
type tjtransform struct {
	x, y, w, h  int32
	op, options int32
	data        uintptr
	filter      uintptr
}

// TurboJPEG transform options (TJXOPT_*).
const (
	xoptCrop      = 4
	xoptCopyNone  = 64
	flagNoRealloc = 1024
)

// NewTransformer returns a transform handle; Close it when done.
func (l *Lib) NewTransformer() (*Transformer, error) {
	s, err := l.transformSymbols()
	if err != nil {
		return nil, err
	}
	h := s.initTransform()
	if h == 0 {
		return nil, fmt.Errorf("turbojpeg: tjInitTransform failed: %s", l.errorStr2(0))
	}
	t := &Transformer{lib: l, syms: s, h: h}
	t.cleanup = runtime.AddCleanup(t, func(h uintptr) { l.destroy(h) }, h)
	return t, nil
}

// Close destroys the handle. It is safe to call twice.
func (t *Transformer) Close() error {
	if t.h == 0 {
		return nil
	}
	t.cleanup.Stop()
	rc := t.lib.destroy(t.h)
	t.h = 0
	if rc != 0 {
		return errors.New("turbojpeg: tjDestroy failed")
	}
	return nil
}

// CropBufSize is the size of the buffer [Transformer.Crop] needs for a crop
// of w×h pixels of an image with subsampling sub (tjBufSize).
func (t *Transformer) CropBufSize(w, h, sub int) int {
	return int(t.syms.bufSize(int32(w), int32(h), int32(sub)))
}

// Crop losslessly crops the w×h region at (x, y) of the JPEG in data into
// dst (TJXOPT_CROP, markers not copied) and returns the cropped JPEG's
// length. x and y must be multiples of the MCU size ([MCUSize]); dst must
// hold at least [Transformer.CropBufSize] bytes. Any non-zero return is an
// error, after which the handle is replaced.
func (t *Transformer) Crop(dst, data []byte, x, y, w, h, sub int) (int, error) {
	if t.h == 0 {
		return 0, errors.New("turbojpeg: transformer is closed")
	}
	if len(data) == 0 || w <= 0 || h <= 0 || x < 0 || y < 0 {
		return 0, fmt.Errorf("turbojpeg: invalid crop %d×%d at (%d,%d) of %d bytes", w, h, x, y, len(data))
	}
	if need := t.CropBufSize(w, h, sub); len(dst) < need {
		return 0, fmt.Errorf("turbojpeg: crop buffer holds %d bytes, %d×%d needs %d", len(dst), w, h, need)
	}
	t.xf = tjtransform{x: int32(x), y: int32(y), w: int32(w), h: int32(h), options: xoptCrop | xoptCopyNone}
	t.pin[0], t.pin[1] = unsafe.Pointer(&data[0]), unsafe.Pointer(&dst[0])
	t.dstPtr, t.dstSize = uintptr(t.pin[1]), uint64(len(dst))
	// int tjTransform(tjhandle, const unsigned char *jpegBuf,
	//   unsigned long jpegSize, int n, unsigned char **dstBufs,
	//   unsigned long *dstSizes, tjtransform *transforms, int flags)
	t.args = [len(t.args)]uintptr{t.h, uintptr(t.pin[0]), uintptr(len(data)), 1,
		uintptr(unsafe.Pointer(&t.dstPtr)), uintptr(unsafe.Pointer(&t.dstSize)), uintptr(unsafe.Pointer(&t.xf)),
		uintptr(uint32(flagNoRealloc | FlagStopOnWarning | FlagLimitScans))}
	r1, _, _ := purego.SyscallN(t.syms.transform, t.args[:]...)
	t.args = [len(t.args)]uintptr{}
	t.pin = [len(t.pin)]unsafe.Pointer{}
	t.dstPtr = 0
	if int32(r1) != 0 {
		e := fmt.Errorf("turbojpeg: lossless crop: %s", t.lib.errorStr2(t.h))
		t.cleanup.Stop()
		t.lib.destroy(t.h)
		l := t.lib
		if t.h = t.syms.initTransform(); t.h == 0 {
			return 0, fmt.Errorf("%w (and tjInitTransform failed: the transformer is unusable)", e)
		}
		t.cleanup = runtime.AddCleanup(t, func(h uintptr) { l.destroy(h) }, t.h)
		return 0, e
	}
	if t.dstSize > uint64(len(dst)) {
		return 0, fmt.Errorf("turbojpeg: lossless crop reports %d bytes in a %d-byte buffer", t.dstSize, len(dst))
	}
	return int(t.dstSize), nil
}
