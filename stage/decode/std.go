package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// decodeStdJPEG decodes with image/jpeg (the fallback) and converts to RGB.
func decodeStdJPEG(dst *Image, data []byte) error {
	m, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return toRGB(dst, m)
}

func decodeStdPNG(dst *Image, data []byte) error {
	m, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return toRGB(dst, m)
}

// toRGB writes m into dst as packed RGB, dropping alpha without compositing
// (what Pillow's convert("RGB") does). Common concrete types are converted
// with direct loops; others through the color model.
func toRGB(dst *Image, m image.Image) error {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return fmt.Errorf("image has an empty size %d×%d", w, h)
	}
	dst.Reset(w, h, 3)
	out := dst.Pix
	switch src := m.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			row := out[y*w*3 : (y+1)*w*3]
			yi := src.YOffset(b.Min.X, b.Min.Y+y)
			for x := 0; x < w; x++ {
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(src.Y[yi+x], src.Cb[ci], src.Cr[ci])
				row[3*x], row[3*x+1], row[3*x+2] = r, g, bb
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := out[y*w*3 : (y+1)*w*3]
			in := src.Pix[(y)*src.Stride:]
			for x := 0; x < w; x++ {
				v := in[x]
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			cmykToRGB(out[y*w*3:(y+1)*w*3], src.Pix[y*src.Stride:y*src.Stride+4*w], false)
		}
	case *image.RGBA:
		copyRGBX(out, src.Pix, src.Stride, w, h)
	case *image.NRGBA:
		copyRGBX(out, src.Pix, src.Stride, w, h)
	case *image.Paletted:
		var lut [256][3]uint8
		for i, c := range src.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			if rgba, ok := c.(color.RGBA); ok && rgba.A == 255 {
				n = color.NRGBA{rgba.R, rgba.G, rgba.B, 255}
			}
			lut[i] = [3]uint8{n.R, n.G, n.B}
		}
		for y := 0; y < h; y++ {
			row := out[y*w*3 : (y+1)*w*3]
			in := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				p := lut[in[x]]
				row[3*x], row[3*x+1], row[3*x+2] = p[0], p[1], p[2]
			}
		}
	default:
		// 16-bit and other rare types: through the colour model.
		for y := 0; y < h; y++ {
			row := out[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				n := color.NRGBA64Model.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				row[3*x], row[3*x+1], row[3*x+2] = uint8(n.R>>8), uint8(n.G>>8), uint8(n.B>>8)
			}
		}
	}
	return nil
}

func copyRGBX(out, pix []uint8, stride, w, h int) {
	for y := 0; y < h; y++ {
		row := out[y*w*3 : (y+1)*w*3]
		in := pix[y*stride : y*stride+4*w]
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = in[4*x], in[4*x+1], in[4*x+2]
		}
	}
}
