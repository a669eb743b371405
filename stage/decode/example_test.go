package decode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"slices"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

func samplePNG(w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, m)
	return b.Bytes()
}

// Decode an image and apply torchvision's Resize(256) + CenterCrop(224),
// producing a normalised CHW float32 tensor.
func ExampleProcessor() {
	dec, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dec.Close()
	p, err := decode.NewProcessor(dec, decode.Transform{
		Resize: 256, CenterCrop: 224, Layout: tensor.CHW, Normalize: decode.ImageNet(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var t tensor.Tensor
	if err := p.Process(&t, decode.Encoded{Data: samplePNG(400, 300), Key: "sample.png"}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.DType, t.Shape)
	// Output: float32 [3 224 224]
}

// Resize the shorter side to 256 as torchvision's Resize(256) does.
func ExampleResizer() {
	dec, _ := decode.NewDecoder(decode.Options{})
	defer dec.Close()
	var src, dst decode.Image
	if err := dec.Decode(&src, samplePNG(500, 375), "a.png", 0); err != nil {
		fmt.Println(err)
		return
	}
	var r decode.Resizer
	if err := r.ResizeShorter(&dst, &src, 256); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dst.W, dst.H)
	// Output: 341 256
}

// Decoding errors name the sample.
func ExampleDecoder_Decode() {
	dec, _ := decode.NewDecoder(decode.Options{})
	defer dec.Close()
	var m decode.Image
	err := dec.Decode(&m, []byte("not an image"), "shard-3/000042.jpg", 0)
	fmt.Println(err)
	// Output: decode shard-3/000042.jpg (unknown): unrecognised data (first bytes 6e 6f 74 20 61 6e 20 69)
}

// Which JPEG decoder is in use, and why not TurboJPEG when it is not.
func ExampleDecoder_FallbackReason() {
	dec, _ := decode.NewDecoder(decode.Options{Backend: decode.BackendStd})
	defer dec.Close()
	fmt.Println(dec.Backend(), "-", dec.FallbackReason())
	// Output: stdlib - standard library selected by configuration
}

// Read an image's header before decoding: its size, what decoding it will
// allocate, and a refusal of decompression bombs before anything is allocated.
func ExampleDecoder_Inspect() {
	dec, err := decode.NewDecoder(decode.Options{Backend: decode.BackendStd})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dec.Close()
	info, err := dec.Inspect(samplePNG(64, 48), "a.png", 0)
	fmt.Println(info.Format, info.Width, info.Height, info.DecodeBytes >= 64*48*3, err)

	// a PNG whose header claims 100000×100000 (the rest does not matter)
	bomb := samplePNG(1, 1)
	copy(bomb[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
	_, err = dec.Inspect(bomb, "bomb.png", 0)
	var le *decode.LimitError
	fmt.Println(errors.As(err, &le), le.W, le.H, le.Limit)
	// Output:
	// png 64 48 true <nil>
	// true 100000 100000 89478485
}

// The training transform: RandomResizedCrop(224) and a horizontal flip,
// drawn from the sample's (seed, epoch, index): the same sample gets the
// same crop in any run, whatever the order.
func ExampleTransform_randomResizedCrop() {
	dec, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dec.Close()
	p, err := decode.NewProcessor(dec, decode.Transform{
		RandomResizedCrop: decode.ResizedCrop{Size: 224}, FlipProb: 0.5, Seed: 1,
		Layout: tensor.CHW, Normalize: decode.ImageNet(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	data := samplePNG(400, 300)
	var a, b tensor.Tensor
	_ = p.Process(&a, decode.Encoded{Data: data, Key: "x.png", Index: 7, Epoch: 2})
	_ = p.Process(&b, decode.Encoded{Data: data, Key: "x.png", Index: 7, Epoch: 2})
	fmt.Println(a.DType, a.Shape, slices.Equal(a.F32, b.F32))
	// Output: float32 [3 224 224] true
}

// The box torchvision's RandomResizedCrop.get_params would draw, here from
// sample 0's stream under seed 1.
func ExampleRandomResizedCropBox() {
	x, y, w, h := decode.RandomResizedCropBox(500, 375, decode.ResizedCrop{}, decode.SampleRand(1, 0, 0))
	fmt.Println(x >= 0 && y >= 0 && x+w <= 500 && y+h <= 375)
	// Output: true
}

// photo is an element that carries its encoded image (a decode.Input);
// package source's *Sample is one too.
type photo struct {
	name string
	png  []byte
}

func (p photo) EncodedImage() (key string, data []byte, index, epoch int64, err error) {
	return p.name, p.png, 0, 0, nil
}

// A decode step in a graph: the stage owns its decoder, runs GOMAXPROCS
// workers and reserves each image's bytes from the graph's budget.
func ExampleImages() {
	g := flow.New("decode", flow.WithBudget(16<<20))
	photos := flow.FromSlice(g, "photos", []photo{{"a.png", samplePNG(320, 240)}, {"b.png", samplePNG(200, 300)}})
	images := decode.Images(photos, "decode", decode.Transform{Resize: 64, CenterCrop: 56, Layout: tensor.CHW})
	flow.Sink(images, "print", func(_ context.Context, s *tensor.Sample) error {
		fmt.Println(s.Tensor.DType, s.Tensor.Shape, s.Label)
		return nil
	})
	fmt.Println(g.Run(context.Background()))
	// Unordered output:
	// uint8 [3 56 56] -1
	// uint8 [3 56 56] -1
	// <nil>
}
