//go:build !(linux && amd64)

package turbojpeg

import (
	"fmt"
	"runtime"
)

// EnvLibJPEG names the environment variable that overrides the libjpeg
// library region decoding loads, or "off" to turn region decoding off.
const EnvLibJPEG = "PSIFLOW_LIBJPEG"

var errRegionPlatform = fmt.Errorf("%w: region decoding is implemented for linux/amd64, not %s/%s",
	ErrNotAvailable, runtime.GOOS, runtime.GOARCH)

// RegionLib is libjpeg loaded for region decoding; on this platform none
// can be loaded.
type RegionLib struct{}

// DefaultRegion always fails on this platform.
func DefaultRegion() (*RegionLib, error) { return nil, errRegionPlatform }

// LoadRegion always fails on this platform.
func LoadRegion(path string) (*RegionLib, error) { return nil, errRegionPlatform }

// Describe returns "".
func (l *RegionLib) Describe() string { return "" }

// Region is a rectangle of an image, in pixels.
type Region struct {
	X, Y, W, H int
}

// RegionDecoder decodes part of a JPEG; on this platform none can be made.
type RegionDecoder struct{}

// NewRegionDecoder always fails on this platform.
func (l *RegionLib) NewRegionDecoder() (*RegionDecoder, error) { return nil, errRegionPlatform }

// Close does nothing.
func (d *RegionDecoder) Close() error { return nil }

// DecodeRegion always fails on this platform.
func (d *RegionDecoder) DecodeRegion(data []byte, f ScalingFactor, pf PixelFormat, flags Flags, rect Region, buf []byte) (Region, []byte, error) {
	return Region{}, buf, errRegionPlatform
}
