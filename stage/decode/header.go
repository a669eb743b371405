package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// DefaultMaxPixels is the largest image (width × height) decoded when
// [Options.MaxPixels] is 0: Pillow's decompression-bomb limit
// (PIL.Image.MAX_IMAGE_PIXELS, 1024 × 1024 × 1024 / 4 / 3).
const DefaultMaxPixels = 89_478_485

// Info is what an image's header says, read without decoding anything, and
// what decoding it will allocate. [Decoder.Inspect] returns it.
type Info struct {
	// Format is "jpeg" or "png".
	Format string
	// Width and Height are the stored size in pixels (both > 0).
	Width, Height int
	// Components is the number of stored channels: 1 (gray), 3 (YCbCr or
	// RGB), 4 (CMYK, YCCK) for JPEG; 1 to 4 for PNG (palette: 1).
	Components int
	// Progressive is true for a progressive (multi-scan) JPEG or an
	// interlaced PNG: the decoder keeps the whole image's coefficients or
	// passes, not one row band.
	Progressive bool
	// BitDepth is the PNG bit depth (1, 2, 4, 8, 16); 8 for JPEG.
	BitDepth int
	// DecodedW and DecodedH are the size the decoder produces: smaller than
	// Width × Height when TurboJPEG scales the DCT.
	DecodedW, DecodedH int
	// DecodeBytes bounds what decoding allocates: the decoder's own buffers
	// (libjpeg's coefficient buffer for progressive files, image/jpeg's
	// YCbCr planes, image/png's image) plus the packed RGB result.
	DecodeBytes int64
}

// Pixels is Width × Height.
func (in Info) Pixels() int64 { return int64(in.Width) * int64(in.Height) }

// LimitError is the error for an image or a size over the pixel limit.
type LimitError struct {
	// What is the size that is too large ("image", "resize", "center crop"...).
	What string
	// W and H are that size in pixels.
	W, H int64
	// Limit is the pixel limit in force.
	Limit int64
	// Option names the setting that raises the limit where the user set it (a
	// flag, a pipeline file's key); "" names Options.MaxPixels. Front-ends set
	// it on the error they report.
	Option string
}

// Error formats the sizes and the limit, and says how to change it.
func (e *LimitError) Error() string {
	opt := e.Option
	if opt == "" {
		opt = "Options.MaxPixels"
	}
	return fmt.Sprintf("%s of %d×%d = %d pixels exceeds the limit of %d pixels (a decompression bomb? raise %s if it is meant)",
		e.What, e.W, e.H, satMul(e.W, e.H), e.Limit, opt)
}

// checkPixels returns a *LimitError when w×h is over limit (limit ≤ 0: none).
func checkPixels(what string, w, h, limit int64) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("%s has an empty size %d×%d", what, w, h)
	}
	if limit > 0 && satMul(w, h) > limit {
		return &LimitError{What: what, W: w, H: h, Limit: limit}
	}
	return nil
}

// satMul is a×b for non-negative a and b, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// satAdd is a+b for non-negative a and b, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// jpegHeader is what the first SOF segment of a JPEG says.
type jpegHeader struct {
	w, h, comps int
	progressive bool
	// hmax, vmax are the largest sampling factors (the MCU is 8·hmax × 8·vmax).
	hmax, vmax int
}

var (
	errTruncatedHeader = errors.New("truncated before the frame header (SOF)")
	errNoFrame         = errors.New("no frame header (SOF) before the first scan")
)

// parseJPEGHeader walks the marker segments of data up to the first SOF and
// reads it. It trusts no length: every one is checked against len(data).
func parseJPEGHeader(data []byte) (jpegHeader, error) {
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return jpegHeader{}, errors.New("not a JPEG (no SOI marker)")
	}
	i := 2
	for {
		// a marker: one or more 0xFF, then the code
		if i >= len(data) {
			return jpegHeader{}, errTruncatedHeader
		}
		// bytes before a marker are skipped, as libjpeg and image/jpeg do
		for i < len(data) && data[i] != 0xFF {
			i++
		}
		for i < len(data) && data[i] == 0xFF {
			i++
		}
		if i >= len(data) {
			return jpegHeader{}, errTruncatedHeader
		}
		code := data[i]
		i++
		switch {
		case code == 0x01 || (code >= 0xD0 && code <= 0xD7): // TEM, RSTn: no length
			continue
		case code == 0xD8:
			return jpegHeader{}, fmt.Errorf("second SOI marker at offset %d", i-2)
		case code == 0xD9:
			return jpegHeader{}, errNoFrame
		case code == 0xDA:
			return jpegHeader{}, errNoFrame
		}
		if i+2 > len(data) {
			return jpegHeader{}, errTruncatedHeader
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 {
			return jpegHeader{}, fmt.Errorf("segment 0x%02x at offset %d has length %d", code, i-2, n)
		}
		if i+n > len(data) {
			return jpegHeader{}, errTruncatedHeader
		}
		seg := data[i+2 : i+n]
		if code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC {
			return parseSOF(code, seg)
		}
		i += n
	}
}

func parseSOF(code byte, seg []byte) (jpegHeader, error) {
	if len(seg) < 6 {
		return jpegHeader{}, fmt.Errorf("frame header of %d bytes", len(seg))
	}
	h := jpegHeader{
		h:     int(binary.BigEndian.Uint16(seg[1:])),
		w:     int(binary.BigEndian.Uint16(seg[3:])),
		comps: int(seg[5]),
		// SOF2, SOF6, SOF10, SOF14 are progressive
		progressive: code&0x3 == 0x2,
	}
	if h.w == 0 || h.h == 0 {
		// a height of 0 defers it to a DNL marker, which neither decoder supports
		return jpegHeader{}, fmt.Errorf("frame header says %d×%d", h.w, h.h)
	}
	if h.comps < 1 || h.comps > 4 || len(seg) < 6+3*h.comps {
		return jpegHeader{}, fmt.Errorf("frame header with %d components in %d bytes", h.comps, len(seg))
	}
	for c := range h.comps {
		s := seg[6+3*c+1]
		hs, vs := int(s>>4), int(s&0xF)
		if hs < 1 || hs > 4 || vs < 1 || vs > 4 {
			return jpegHeader{}, fmt.Errorf("component %d has sampling factors %d×%d", c, hs, vs)
		}
		h.hmax, h.vmax = max(h.hmax, hs), max(h.vmax, vs)
	}
	return h, nil
}

// pngHeader is what IHDR and the chunks before the first IDAT say.
type pngHeader struct {
	w, h        int
	depth       int
	colorType   int
	interlaced  bool
	transparent bool // a tRNS chunk: gray and RGB images decode with alpha
}

// parsePNGHeader reads IHDR (which must come first) and walks the chunks up
// to the first IDAT, checking every length against len(data).
func parsePNGHeader(data []byte) (pngHeader, error) {
	if len(data) < 8 || string(data[:8]) != string(pngMagic) {
		return pngHeader{}, errors.New("not a PNG (no signature)")
	}
	if len(data) < 33 {
		return pngHeader{}, errors.New("truncated before the end of IHDR")
	}
	if binary.BigEndian.Uint32(data[8:]) != 13 || string(data[12:16]) != "IHDR" {
		return pngHeader{}, errors.New("first chunk is not a 13-byte IHDR")
	}
	w, h := binary.BigEndian.Uint32(data[16:]), binary.BigEndian.Uint32(data[20:])
	if w == 0 || h == 0 || w > math.MaxInt32 || h > math.MaxInt32 {
		return pngHeader{}, fmt.Errorf("IHDR says %d×%d (each side must be within 1…2³¹-1)", w, h)
	}
	p := pngHeader{w: int(w), h: int(h), depth: int(data[24]), colorType: int(data[25]), interlaced: data[28] == 1}
	ok := false
	switch p.colorType {
	case 0:
		ok = p.depth == 1 || p.depth == 2 || p.depth == 4 || p.depth == 8 || p.depth == 16
	case 3:
		ok = p.depth == 1 || p.depth == 2 || p.depth == 4 || p.depth == 8
	case 2, 4, 6:
		ok = p.depth == 8 || p.depth == 16
	}
	if !ok {
		return pngHeader{}, fmt.Errorf("IHDR has colour type %d with bit depth %d", p.colorType, p.depth)
	}
	if data[26] != 0 || data[27] != 0 || data[28] > 1 {
		return pngHeader{}, fmt.Errorf("IHDR has compression %d, filter %d, interlace %d", data[26], data[27], data[28])
	}
	for i := 33; i+8 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[i:]))
		typ := string(data[i+4 : i+8])
		if typ == "IDAT" {
			break
		}
		if typ == "tRNS" {
			p.transparent = true
		}
		next := int64(i) + 12 + n
		if next > int64(len(data)) {
			break // the decoder reports the truncation
		}
		i = int(next)
	}
	return p, nil
}

// pngBytesPerPixel is what image/png allocates per pixel for the image it
// returns (Gray, Gray16, Paletted, RGBA, NRGBA, RGBA64, NRGBA64).
func (p pngHeader) bytesPerPixel() int64 {
	wide := p.depth == 16
	switch p.colorType {
	case 3:
		return 1
	case 0:
		switch {
		case p.transparent && wide:
			return 8
		case p.transparent:
			return 4
		case wide:
			return 2
		}
		return 1
	}
	if wide {
		return 8
	}
	return 4
}

func (p pngHeader) channels() int {
	switch p.colorType {
	case 0, 3:
		return 1
	case 4:
		return 2
	case 2:
		return 3
	}
	return 4
}

// Format identifies an encoded sample by its first bytes: "jpeg", "png" or
// "unknown".
func Format(data []byte) string {
	switch {
	case len(data) >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF:
		return "jpeg"
	case len(data) >= 8 && bytes.Equal(data[:8], pngMagic):
		return "png"
	}
	return "unknown"
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")
