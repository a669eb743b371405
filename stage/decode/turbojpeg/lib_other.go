//go:build !(linux || darwin)

package turbojpeg

import (
	"errors"
	"fmt"
	"runtime"
)

// EnvPath names the environment variable that overrides the library to load.
const EnvPath = "PSIFLOW_TURBOJPEG"

var errPlatform = fmt.Errorf("%w: run-time loading is implemented for linux and darwin, not %s", ErrNotAvailable, runtime.GOOS)

// Lib is a loaded TurboJPEG library; on this platform none can be loaded.
type Lib struct{}

// Default always fails on this platform.
func Default() (*Lib, error) { return nil, errPlatform }

// Load always fails on this platform.
func Load(path string) (*Lib, error) { return nil, errPlatform }

// Name returns "".
func (l *Lib) Name() string { return "" }

// File returns "".
func (l *Lib) File() string { return "" }

// API returns "".
func (l *Lib) API() string { return "" }

// Describe returns "".
func (l *Lib) Describe() string { return "" }

// ScalingFactors returns nil.
func (l *Lib) ScalingFactors() []ScalingFactor { return nil }

// ScaledSize returns the size an image of w×h decodes to at f.
func (l *Lib) ScaledSize(w, h int, f ScalingFactor) (int, int) { return f.Scale(w), f.Scale(h) }

// Decompressor is a TurboJPEG handle; on this platform none can be made.
type Decompressor struct{}

// NewDecompressor always fails on this platform.
func (l *Lib) NewDecompressor() (*Decompressor, error) { return nil, errPlatform }

// Close does nothing.
func (d *Decompressor) Close() error { return nil }

// Header always fails on this platform.
func (d *Decompressor) Header(data []byte) (Header, error) { return Header{}, errPlatform }

// Decompress always fails on this platform.
func (d *Decompressor) Decompress(data []byte, hdr Header, f ScalingFactor, pf PixelFormat, flags Flags, dst []byte) error {
	return errors.Join(errPlatform)
}

// MCUSize returns the MCU size of the chroma subsampling sub.
func MCUSize(sub int) (w, h int, ok bool) {
	ws, hs := [...]int{8, 16, 16, 8, 8, 32}, [...]int{8, 8, 16, 8, 16, 8}
	if sub < 0 || sub >= len(ws) {
		return 0, 0, false
	}
	return ws[sub], hs[sub], true
}

// Transformer is a TurboJPEG transform handle; on this platform none can be made.
type Transformer struct{}

// NewTransformer always fails on this platform.
func (l *Lib) NewTransformer() (*Transformer, error) { return nil, errPlatform }

// Close does nothing.
func (t *Transformer) Close() error { return nil }

// CropBufSize returns 0 on this platform.
func (t *Transformer) CropBufSize(w, h, sub int) int { return 0 }

// Crop always fails on this platform.
func (t *Transformer) Crop(dst, data []byte, x, y, w, h, sub int) (int, error) { return 0, errPlatform }
