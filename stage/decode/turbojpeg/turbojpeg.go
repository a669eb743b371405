package turbojpeg

import (
	"errors"
	"fmt"
)

// PixelFormat is a TurboJPEG pixel format (TJPF_*).
type PixelFormat int32

// Pixel formats used by psiflow.
const (
	// PixelRGB is 3 bytes per pixel, R, G, B (TJPF_RGB).
	PixelRGB PixelFormat = 0
	// PixelGray is 1 byte per pixel (TJPF_GRAY).
	PixelGray PixelFormat = 6
	// PixelCMYK is 4 bytes per pixel, C, M, Y, K as stored in the file
	// (TJPF_CMYK). Adobe CMYK JPEGs store inverted values.
	PixelCMYK PixelFormat = 11
)

// Channels returns the number of bytes per pixel of f.
func (f PixelFormat) Channels() int {
	switch f {
	case PixelRGB:
		return 3
	case PixelGray:
		return 1
	case PixelCMYK:
		return 4
	}
	return 0
}

// Colorspace is the colour space of a JPEG image (TJCS_*).
type Colorspace int32

// JPEG colour spaces.
const (
	ColorspaceRGB   Colorspace = 0
	ColorspaceYCbCr Colorspace = 1
	ColorspaceGray  Colorspace = 2
	ColorspaceCMYK  Colorspace = 3
	ColorspaceYCCK  Colorspace = 4
)

// String names the colour space.
func (c Colorspace) String() string {
	switch c {
	case ColorspaceRGB:
		return "RGB"
	case ColorspaceYCbCr:
		return "YCbCr"
	case ColorspaceGray:
		return "gray"
	case ColorspaceCMYK:
		return "CMYK"
	case ColorspaceYCCK:
		return "YCCK"
	}
	return fmt.Sprintf("colorspace(%d)", int32(c))
}

// Flags are TurboJPEG decompression flags (TJFLAG_*).
type Flags int32

// Decompression flags.
const (
	// FlagFastUpsample uses nearest-neighbour chroma upsampling (TJFLAG_FASTUPSAMPLE).
	FlagFastUpsample Flags = 256
	// FlagFastDCT uses the fast, less accurate inverse DCT (TJFLAG_FASTDCT).
	// The default (accurate) DCT is bit-exact with Pillow.
	FlagFastDCT Flags = 2048
	// FlagStopOnWarning makes a warning (such as a premature end of data) an
	// error (TJFLAG_STOPONWARNING). [Decompressor.Decompress] always sets it.
	FlagStopOnWarning Flags = 8192
	// FlagLimitScans refuses progressive JPEGs with more than 500 scans
	// (TJFLAG_LIMITSCANS, libjpeg-turbo ≥ 2.1); a guard against crafted files.
	FlagLimitScans Flags = 32768
)

// ScalingFactor is a DCT scaling factor num/denom supported by the library.
type ScalingFactor struct {
	Num, Denom int32
}

// Scale returns dim scaled by f, rounded up, as TJSCALED does.
func (f ScalingFactor) Scale(dim int) int {
	return (dim*int(f.Num) + int(f.Denom) - 1) / int(f.Denom)
}

// String formats f as "num/denom".
func (f ScalingFactor) String() string { return fmt.Sprintf("%d/%d", f.Num, f.Denom) }

// Header is what the JPEG header says about an image.
type Header struct {
	// Width and Height are the full size in pixels (both > 0).
	Width, Height int
	// Subsampling is the chroma subsampling (TJSAMP_*), -1 if unknown.
	Subsampling int
	// Colorspace is the colour space of the stored data.
	Colorspace Colorspace
}

// ErrNotAvailable is wrapped by every error that says the library could not be used.
var ErrNotAvailable = errors.New("turbojpeg: library not available")
