//go:build linux || darwin

package turbojpeg_test

import (
	"fmt"
	"os"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
)

// Decode a JPEG at half size into a caller-owned RGB buffer. (Not run as a
// test: it needs the library and a file.)
func ExampleLib_NewDecompressor() {
	lib, err := turbojpeg.Default()
	if err != nil {
		fmt.Println("falling back:", err)
		return
	}
	d, err := lib.NewDecompressor()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	data, err := os.ReadFile("photo.jpg")
	if err != nil {
		fmt.Println(err)
		return
	}
	hdr, err := d.Header(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	half := turbojpeg.ScalingFactor{Num: 1, Denom: 2}
	w, h := lib.ScaledSize(hdr.Width, hdr.Height, half)
	rgb := make([]byte, w*h*3)
	if err := d.Decompress(data, hdr, half, turbojpeg.PixelRGB, 0, rgb); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w, h)
}
