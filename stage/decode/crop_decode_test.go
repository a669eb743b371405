package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"testing"
)

// TestCropDecodingEqualsWhole: a random resized crop decoded from the box's
// part of the JPEG is the same bytes as one decoded from the whole image,
// exact and at reduced size, for many boxes of images of several sizes and
// layouts; a progressive JPEG is decoded whole.
func TestCropDecodingEqualsWhole(t *testing.T) {
	part := newDecoder(t, BackendTurbo)
	if lib, err := part.CropDecoding(); err != nil {
		t.Skipf("crop decoding not available here: %v", err)
	} else if lib == "" {
		t.Fatal("CropDecoding: no library named and no error")
	}
	whole := newDecoder(t, BackendTurbo, func(o *Options) { o.NoCropDecoding = true })
	if _, err := whole.CropDecoding(); err == nil {
		t.Fatal("NoCropDecoding: CropDecoding reports no reason")
	}
	gray := image.NewGray(image.Rect(0, 0, 640, 480))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i*7 + i/640)
	}
	var gb bytes.Buffer
	if err := jpeg.Encode(&gb, gray, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(goTestdata(t, "video-001.progressive.jpeg"))
	if err != nil {
		t.Fatal(err)
	}
	images := []struct {
		name        string
		data        []byte
		progressive bool
	}{
		{"500x375", encodeJPEG(t, synthRGB(500, 375, 3, 20), 85), false},
		{"1024x768", encodeJPEG(t, synthRGB(1024, 768, 4, 20), 85), false},
		{"333x251", encodeJPEG(t, synthRGB(333, 251, 5, 20), 90), false},
		{"gray 640x480", gb.Bytes(), false},
		{"progressive", prog, true},
	}
	for _, exact := range []bool{true, false} {
		tr := Transform{RandomResizedCrop: ResizedCrop{Size: 224}, FlipProb: 0.5, Seed: 3, Exact: exact}
		pp, err := NewProcessor(part, tr)
		if err != nil {
			t.Fatal(err)
		}
		pw, err := NewProcessor(whole, tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range images {
			nPart := 0
			for k := range int64(30) {
				e := Encoded{Key: im.name, Data: im.data, Index: k}
				a, err := pp.Image(e)
				if err != nil {
					t.Fatal(err)
				}
				if pp.g.part {
					nPart++
				}
				if pw.g.part {
					t.Fatal("decoded in part with NoCropDecoding")
				}
				b, err := pw.Image(e)
				if err != nil {
					t.Fatal(err)
				}
				if pp.g.box != pw.g.box || pp.g.f != pw.g.f {
					t.Fatalf("%s: boxes %v at %v and %v at %v", im.name, pp.g.box, pp.g.f, pw.g.box, pw.g.f)
				}
				if a.W != b.W || a.H != b.H || !bytes.Equal(a.Pix, b.Pix) {
					mean, maxd := diff(t, a, b)
					t.Fatalf("%s exact=%v box %v scale %v: decoded in part differs from the whole decode (mean %.3f, max %d)",
						im.name, exact, pp.g.box, pp.g.f, mean, maxd)
				}
			}
			if want := !im.progressive; (nPart > 0) != want {
				t.Errorf("%s exact=%v: %d of 30 decoded in part", im.name, exact, nPart)
			}
		}
	}
}

// Options.NoCropDecoding turns crop decoding off; CropDecoding says which
// library decodes a random resized crop's box, or why none does.
func ExampleDecoder_CropDecoding() {
	d, err := NewDecoder(Options{NoCropDecoding: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	_, why := d.CropDecoding()
	fmt.Println(why != nil)
	// Output: true
}
