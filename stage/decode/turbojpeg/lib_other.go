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
