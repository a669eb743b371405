//go:build linux && amd64

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
	"golang.org/x/sys/unix"
)

// EnvLibJPEG names the environment variable that overrides the libjpeg
// library region decoding loads (a file name or path given to dlopen), or
// "off" to turn region decoding off.
const EnvLibJPEG = "PSIFLOW_LIBJPEG"

// libjpeg 6.2 ABI (Debian's libjpeg62-turbo, LP64), from jpeglib.h:
// sizeof(struct jpeg_decompress_struct) and the offsets of the fields used.
const (
	jpegLibVersion    = 62
	cinfoSize         = 632
	offImageWidth     = 48
	offImageHeight    = 52
	offJPEGColorSpace = 60
	offOutColorSpace  = 64
	offScaleNum       = 68
	offScaleDenom     = 72
	offDCTMethod      = 96
	offFancyUpsample  = 100
	offOutputWidth    = 136
	offOutputHeight   = 140
	offOutComponents  = 148
	offOutputScanline = 168
	offProgressive    = 312

	errMgrSize       = 168 // sizeof(struct jpeg_error_mgr)
	offErrorExit     = 0
	offEmitMessage   = 8
	offOutputMessage = 16
	offFormatMessage = 24
	msgLengthMax     = 200 // JMSG_LENGTH_MAX

	jcsGray   = 1
	jcsRGB    = 2
	jcsYCbCr  = 3
	jcsExtRGB = 6 // libjpeg-turbo's JCS_EXT_RGB
	jdctIFast = 1
)

// The decoder's off-heap page: the libjpeg objects, the frame of the
// protected calls (see region_amd64.s) and small out-parameters.
const (
	pageSize  = 4096
	memCinfo  = 0
	memErr    = 640
	memFrameP = memErr + errMgrSize // the frame's address, read by regionErrorExit
	memFrame  = 832
	memMsg    = 1024
	memXOff   = 1280 // JDIMENSION in-out parameters of jpeg_crop_scanline
	memWidth  = 1284
)

// frame word indexes (region_amd64.s)
const (
	frFn     = 0
	frArg    = 1
	frResult = 5
	frMode   = 13
	frRows   = 14
	frFirst  = 15
	frTarget = 16
)

// The four are defined in region_amd64.s and reached only through their
// addresses (regionAddrs), which staticcheck does not see.
//
//lint:ignore U1000 defined in region_amd64.s, its address taken there
func regionCall()

//lint:ignore U1000 defined in region_amd64.s, its address taken there
func regionErrorExit()

//lint:ignore U1000 defined in region_amd64.s, its address taken there
func regionEmitMessage()

//lint:ignore U1000 defined in region_amd64.s, its address taken there
func regionOutputMessage()
func regionAddrs() (call, errorExit, emitMessage, outputMessage uintptr)

// RegionLib is libjpeg (libjpeg-turbo's libjpeg 6.2 ABI) loaded for region
// decoding. It is safe for concurrent use; its [RegionDecoder] values are not.
type RegionLib struct {
	name, file string
	direct     bool // calls made directly ([EnvCalls])

	createDecompress, destroyDecompress, abortDecompress uintptr
	stdError, memSrc, readHeader, startDecompress        uintptr
	cropScanline, skipScanlines, readScanlines           uintptr
}

var (
	regionOnce sync.Once
	regionLib  *RegionLib
	regionErr  error
)

// DefaultRegion loads libjpeg once per process (honouring [EnvLibJPEG]) and
// returns it, or the reason region decoding is unavailable.
func DefaultRegion() (*RegionLib, error) {
	regionOnce.Do(func() {
		p := os.Getenv(EnvLibJPEG)
		if p == "off" {
			regionErr = fmt.Errorf("%w: region decoding disabled by %s=off", ErrNotAvailable, EnvLibJPEG)
			return
		}
		regionLib, regionErr = LoadRegion(p)
	})
	return regionLib, regionErr
}

// LoadRegion opens libjpeg at path ("" tries libjpeg.so.62) and checks that
// it is libjpeg-turbo with the libjpeg 6.2 ABI this file is written for (it
// has jpeg_crop_scanline and jpeg_skip_scanlines, and jpeg_CreateDecompress
// accepts version 62 and this structure size). Every failure wraps
// [ErrNotAvailable].
func LoadRegion(path string) (*RegionLib, error) {
	name := "libjpeg.so.62"
	if path != "" {
		name = path
	}
	fail := func(err error) (*RegionLib, error) {
		return nil, fmt.Errorf("%w: region decoding: %s: %v (install libjpeg62-turbo, or set %s to its path)",
			ErrNotAvailable, name, err, EnvLibJPEG)
	}
	direct, err := directFromEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: region decoding: %v", ErrNotAvailable, err)
	}
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return fail(err)
	}
	l := &RegionLib{name: name, direct: direct}
	for _, s := range []struct {
		p   *uintptr
		sym string
	}{
		{&l.createDecompress, "jpeg_CreateDecompress"},
		{&l.destroyDecompress, "jpeg_destroy_decompress"},
		{&l.abortDecompress, "jpeg_abort_decompress"},
		{&l.stdError, "jpeg_std_error"},
		{&l.memSrc, "jpeg_mem_src"},
		{&l.readHeader, "jpeg_read_header"},
		{&l.startDecompress, "jpeg_start_decompress"},
		{&l.cropScanline, "jpeg_crop_scanline"},
		{&l.skipScanlines, "jpeg_skip_scanlines"},
		{&l.readScanlines, "jpeg_read_scanlines"},
	} {
		p, err := purego.Dlsym(h, s.sym)
		if err != nil || p == 0 {
			_ = purego.Dlclose(h)
			return fail(fmt.Errorf("symbol %s: %v", s.sym, err))
		}
		*s.p = p
	}
	d, err := l.NewRegionDecoder() // checks the ABI
	if err != nil {
		_ = purego.Dlclose(h)
		return fail(err)
	}
	_ = d.Close()
	l.file = mappedFile("libjpeg.so")
	return l, nil
}

// Describe returns a one-line description for diagnostics.
func (l *RegionLib) Describe() string {
	if l.file != "" && l.file != l.name {
		return l.name + " (" + l.file + ")"
	}
	return l.name
}

// Region is a rectangle of an image, in pixels.
type Region struct {
	X, Y, W, H int
}

// RegionDecoder decodes part of a JPEG with libjpeg's partial decoding:
// jpeg_skip_scanlines skips the rows above the part (their entropy-coded
// data is read, the inverse DCT, upsampling and colour conversion are not),
// jpeg_crop_scanline limits every row to the part's columns (rounded out to
// the iMCU grid), and decoding stops after its last row. libjpeg reports a
// fatal error by calling error_exit, which must not return; here it
// restores the state saved when the call into libjpeg began and returns
// from that call with an error (the setjmp/longjmp of C callers, in
// region_amd64.s). Not safe for concurrent use: keep one per goroutine.
type RegionDecoder struct {
	lib     *RegionLib
	mem     []byte // the off-heap page
	base    uintptr
	rows    []uintptr  // row pointers of the current decode
	args    [9]uintptr // regionCall's one argument, the frame; 9 for directCall
	cleanup runtime.Cleanup
}

var addrCall, addrErrorExit, addrEmitMessage, addrOutputMessage = regionAddrs()

// NewRegionDecoder returns a decoder; Close it when done (one that becomes
// unreachable unclosed is destroyed by a cleanup).
func (l *RegionLib) NewRegionDecoder() (*RegionDecoder, error) {
	mem, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("turbojpeg: region decoder: mmap: %w", err)
	}
	d := &RegionDecoder{lib: l, mem: mem, base: uintptr(unsafe.Pointer(&mem[0]))}
	b := d.base
	d.protect(l.stdError, b+memErr, 0, 0, 0)
	d.setWord(memErr+offErrorExit, addrErrorExit)
	d.setWord(memErr+offEmitMessage, addrEmitMessage)
	d.setWord(memErr+offOutputMessage, addrOutputMessage)
	d.setWord(memFrameP, b+memFrame)
	d.setWord(memCinfo, b+memErr) // cinfo->err, kept by jpeg_CreateDecompress
	if _, ok := d.protect(l.createDecompress, b+memCinfo, jpegLibVersion, cinfoSize, 0); !ok {
		msg := d.message()
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("jpeg_CreateDecompress(version %d, size %d): %s", jpegLibVersion, cinfoSize, msg)
	}
	d.cleanup = runtime.AddCleanup(d, func(m []byte) { destroyRegion(l, m) }, mem)
	return d, nil
}

func destroyRegion(l *RegionLib, mem []byte) {
	fn := uintptr(unsafe.Pointer(&mem[0]))
	_, _, _ = purego.SyscallN(l.destroyDecompress, fn+memCinfo)
	_ = unix.Munmap(mem)
}

// Close destroys the decoder. It is safe to call twice.
func (d *RegionDecoder) Close() error {
	if d.mem == nil {
		return nil
	}
	d.cleanup.Stop()
	d.protect(d.lib.destroyDecompress, d.base+memCinfo, 0, 0, 0)
	err := unix.Munmap(d.mem)
	d.mem, d.base = nil, 0
	return err
}

func (d *RegionDecoder) word(off int) *uintptr      { return (*uintptr)(unsafe.Pointer(&d.mem[off])) }
func (d *RegionDecoder) setWord(off int, v uintptr) { *d.word(off) = v }
func (d *RegionDecoder) u32(off int) *uint32        { return (*uint32)(unsafe.Pointer(&d.mem[off])) }
func (d *RegionDecoder) i32(off int) *int32         { return (*int32)(unsafe.Pointer(&d.mem[off])) }

func (d *RegionDecoder) frame() *[17]uintptr {
	return (*[17]uintptr)(unsafe.Pointer(&d.mem[memFrame]))
}

// protect calls the C function fn(a0, a1, a2, a3) through regionCall and
// returns its result, or ok false when libjpeg raised an error (the message
// is then [RegionDecoder.message]).
func (d *RegionDecoder) protect(fn, a0, a1, a2, a3 uintptr) (r uintptr, ok bool) {
	f := d.frame()
	*f = [17]uintptr{frFn: fn, frArg: a0, frArg + 1: a1, frArg + 2: a2, frArg + 3: a3}
	return f[frResult], d.run(d.lib.direct) == 0
}

// run calls regionCall with the frame, directly or as a system call
// ([EnvCalls]), and returns its result (0, or 1 when libjpeg raised an error).
func (d *RegionDecoder) run(direct bool) uintptr {
	d.args[0] = d.base + memFrame
	if direct {
		return directCall(addrCall, &d.args)
	}
	r1, _, _ := purego.SyscallN(addrCall, d.args[:1]...)
	return r1
}

// message formats libjpeg's last error (format_message of the error manager).
func (d *RegionDecoder) message() string {
	fm := *d.word(memErr + offFormatMessage)
	clear(d.mem[memMsg : memMsg+msgLengthMax])
	if _, ok := d.protect(fm, d.base+memCinfo, d.base+memMsg, 0, 0); !ok {
		return "unknown libjpeg error"
	}
	msg := d.mem[memMsg : memMsg+msgLengthMax]
	if i := strings.IndexByte(string(msg), 0); i >= 0 {
		msg = msg[:i]
	}
	return string(msg)
}

// fail aborts the current decompression (libjpeg's way back to a reusable
// object after an error) and returns the error for op.
func (d *RegionDecoder) fail(op string, libErr bool, detail string) error {
	if libErr {
		detail = d.message()
	}
	if _, ok := d.protect(d.lib.abortDecompress, d.base+memCinfo, 0, 0, 0); !ok {
		// never seen; a fresh object is the safe way on
		d.protect(d.lib.destroyDecompress, d.base+memCinfo, 0, 0, 0)
		d.setWord(memCinfo, d.base+memErr)
		if _, ok := d.protect(d.lib.createDecompress, d.base+memCinfo, jpegLibVersion, cinfoSize, 0); !ok {
			_ = d.Close()
			return fmt.Errorf("libjpeg: %s: %s (and the decoder could not be reset: it is closed)", op, detail)
		}
	}
	return fmt.Errorf("libjpeg: %s: %s", op, detail)
}

// DecodeRegion decodes, at scale f (1/1, 1/2, 1/4 or 1/8), the part of the
// JPEG in data that holds rect, a rectangle of the scaled image, in pixel
// format pf ([PixelRGB] or [PixelGray]; flags [FlagFastDCT] and
// [FlagFastUpsample] as for [Decompressor.Decompress]). It returns the
// region decoded, which contains rect: one pixel more on every side where
// the image has one, the columns rounded out to the iMCU grid; its pixels,
// rows packed, are the first W×H×channels bytes of the returned buffer
// (buf, grown when too small). The pixels of rect equal those of a full
// decode; the region's outermost row and column may not (chroma
// upsampling at its edges lacks the neighbouring samples). Baseline JPEGs
// in gray, YCbCr or RGB only: progressive ones are refused (every scan is
// read before the first row either way, so there is nothing to save), and
// so are CMYK and YCCK. A warning (corrupt or truncated data) is an error.
func (d *RegionDecoder) DecodeRegion(data []byte, f ScalingFactor, pf PixelFormat, flags Flags, rect Region, buf []byte) (Region, []byte, error) {
	if d.mem == nil {
		return Region{}, buf, errors.New("libjpeg: region decoder is closed")
	}
	if len(data) == 0 {
		return Region{}, buf, errors.New("libjpeg: empty data")
	}
	if f.Num != 1 || (f.Denom != 1 && f.Denom != 2 && f.Denom != 4 && f.Denom != 8) {
		return Region{}, buf, fmt.Errorf("libjpeg: region decoding at scale %v: want 1/1, 1/2, 1/4 or 1/8", f)
	}
	ch := pf.Channels()
	if pf != PixelRGB && pf != PixelGray {
		return Region{}, buf, fmt.Errorf("libjpeg: region decoding to pixel format %d: want RGB or gray", int32(pf))
	}
	if rect.W <= 0 || rect.H <= 0 || rect.X < 0 || rect.Y < 0 {
		return Region{}, buf, fmt.Errorf("libjpeg: invalid region %d×%d at (%d,%d)", rect.W, rect.H, rect.X, rect.Y)
	}
	cinfo := d.base + memCinfo
	pin := unsafe.Pointer(&data[0])
	defer runtime.KeepAlive(pin)
	if _, ok := d.protect(d.lib.memSrc, cinfo, uintptr(pin), uintptr(len(data)), 0); !ok {
		return Region{}, buf, d.fail("jpeg_mem_src", true, "")
	}
	if _, ok := d.protect(d.lib.readHeader, cinfo, 1, 0, 0); !ok {
		return Region{}, buf, d.fail("reading header", true, "")
	}
	w, h := int(*d.u32(offImageWidth)), int(*d.u32(offImageHeight))
	if w <= 0 || h <= 0 {
		return Region{}, buf, d.fail("reading header", false, fmt.Sprintf("invalid size %d×%d", w, h))
	}
	if *d.i32(offProgressive) != 0 {
		return Region{}, buf, d.fail("region decoding", false, "progressive JPEG (decode it whole)")
	}
	switch cs := *d.i32(offJPEGColorSpace); cs {
	case jcsGray, jcsYCbCr, jcsRGB:
	default:
		return Region{}, buf, d.fail("region decoding", false, fmt.Sprintf("libjpeg colour space %d: want gray, YCbCr or RGB", cs))
	}
	if pf == PixelGray {
		*d.i32(offOutColorSpace) = jcsGray
	} else {
		*d.i32(offOutColorSpace) = jcsExtRGB
	}
	*d.u32(offScaleNum), *d.u32(offScaleDenom) = uint32(f.Num), uint32(f.Denom)
	if flags&FlagFastDCT != 0 {
		*d.i32(offDCTMethod) = jdctIFast
	}
	if flags&FlagFastUpsample != 0 {
		*d.i32(offFancyUpsample) = 0
	}
	if _, ok := d.protect(d.lib.startDecompress, cinfo, 0, 0, 0); !ok {
		return Region{}, buf, d.fail("starting decompression", true, "")
	}
	sw, sh := int(*d.u32(offOutputWidth)), int(*d.u32(offOutputHeight))
	if sw != f.Scale(w) || sh != f.Scale(h) || int(*d.i32(offOutComponents)) != ch {
		return Region{}, buf, d.fail("starting decompression", false,
			fmt.Sprintf("output %d×%d×%d, want %d×%d×%d at %v", sw, sh, *d.i32(offOutComponents), f.Scale(w), f.Scale(h), ch, f))
	}
	if rect.X+rect.W > sw || rect.Y+rect.H > sh {
		return Region{}, buf, d.fail("region decoding", false,
			fmt.Sprintf("region %d×%d at (%d,%d) outside the %d×%d image", rect.W, rect.H, rect.X, rect.Y, sw, sh))
	}
	x0, x1 := max(rect.X-1, 0), min(rect.X+rect.W+1, sw)
	y0, y1 := max(rect.Y-1, 0), min(rect.Y+rect.H+1, sh)
	*d.u32(memXOff), *d.u32(memWidth) = uint32(x0), uint32(x1-x0)
	if x0 > 0 || x1 < sw {
		if _, ok := d.protect(d.lib.cropScanline, cinfo, d.base+memXOff, d.base+memWidth, 0); !ok {
			return Region{}, buf, d.fail("jpeg_crop_scanline", true, "")
		}
	} else {
		*d.u32(memXOff), *d.u32(memWidth) = 0, uint32(sw)
	}
	reg := Region{X: int(*d.u32(memXOff)), Y: y0, W: int(*d.u32(memWidth)), H: y1 - y0}
	if reg.X > x0 || reg.X+reg.W < x1 || reg.X+reg.W > sw {
		return Region{}, buf, d.fail("jpeg_crop_scanline", false, fmt.Sprintf("columns %d+%d for %d..%d", reg.X, reg.W, x0, x1))
	}
	if y0 > 0 {
		n, ok := d.protect(d.lib.skipScanlines, cinfo, uintptr(y0), 0, 0)
		if !ok {
			return Region{}, buf, d.fail("jpeg_skip_scanlines", true, "")
		}
		if int(uint32(n)) != y0 || int(*d.u32(offOutputScanline)) != y0 {
			return Region{}, buf, d.fail("jpeg_skip_scanlines", false, fmt.Sprintf("skipped %d rows of %d", uint32(n), y0))
		}
	}
	stride := reg.W * ch
	need := stride * reg.H
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	if cap(d.rows) < reg.H {
		d.rows = make([]uintptr, reg.H)
	}
	rows := d.rows[:reg.H]
	p0 := uintptr(unsafe.Pointer(&buf[0]))
	for i := range rows {
		rows[i] = p0 + uintptr(i*stride)
	}
	fr := d.frame()
	*fr = [17]uintptr{frFn: d.lib.readScanlines, frArg: cinfo, frMode: 1,
		frRows: uintptr(unsafe.Pointer(&rows[0])), frFirst: uintptr(y0), frTarget: uintptr(y1)}
	r1 := d.run(d.lib.direct && w*h <= DirectMaxPixels)
	runtime.KeepAlive(buf)
	runtime.KeepAlive(rows)
	if r1 != 0 {
		return Region{}, buf, d.fail("reading scanlines", true, "")
	}
	if got := int(*d.u32(offOutputScanline)); got != y1 {
		return Region{}, buf, d.fail("reading scanlines", false, fmt.Sprintf("stopped at row %d of %d", got, y1))
	}
	if _, ok := d.protect(d.lib.abortDecompress, cinfo, 0, 0, 0); !ok {
		return Region{}, buf, d.fail("jpeg_abort_decompress", true, "")
	}
	return reg, buf, nil
}
