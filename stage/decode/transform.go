package decode

import (
	"fmt"
	"math/rand/v2"

	"github.com/psiflow/psiflow/tensor"
)

// Transform is the per-image processing after decode, in the order
// torchvision applies it: Resize, then CenterCrop or RandomCrop, then a
// random horizontal flip, then conversion to a tensor.
type Transform struct {
	// Resize makes the shorter side this long (torchvision Resize(n) on a PIL
	// image, antialiased bilinear). 0 keeps the size.
	Resize int
	// CenterCrop cuts the central CenterCrop×CenterCrop square (padding with
	// zeros when the image is smaller). 0 disables it.
	CenterCrop int
	// RandomCrop cuts a RandomCrop×RandomCrop square at a random position.
	// 0 disables it; it cannot be combined with CenterCrop.
	RandomCrop int
	// FlipProb is the probability of a horizontal flip (0 disables).
	FlipProb float64
	// Layout is the output tensor layout (HWC by default).
	Layout tensor.Layout
	// Normalize, when set, makes float32 output (v/255 - mean)/std; else the
	// output is uint8.
	Normalize *Normalizer
	// Seed seeds the random crop and flip; each Processor derives its own
	// stream from Seed and the processor's index.
	Seed uint64
}

// Validate checks the transform's fields.
func (t Transform) Validate() error {
	switch {
	case t.Resize < 0:
		return fmt.Errorf("transform: negative resize %d", t.Resize)
	case t.CenterCrop < 0 || t.RandomCrop < 0:
		return fmt.Errorf("transform: negative crop size")
	case t.CenterCrop > 0 && t.RandomCrop > 0:
		return fmt.Errorf("transform: both center crop (%d) and random crop (%d) set", t.CenterCrop, t.RandomCrop)
	case t.FlipProb < 0 || t.FlipProb > 1:
		return fmt.Errorf("transform: flip probability %v outside [0, 1]", t.FlipProb)
	case t.Layout != tensor.HWC && t.Layout != tensor.CHW:
		return fmt.Errorf("transform: unknown layout %d", t.Layout)
	}
	return nil
}

// checkLimit refuses sizes that make every image over the pixel limit.
func (t Transform) checkLimit(limit int64) error {
	for _, c := range []struct {
		what string
		n    int
	}{{"resize (shorter side squared)", t.Resize}, {"center crop", t.CenterCrop}, {"random crop", t.RandomCrop}} {
		if c.n > 0 {
			if err := checkPixels("transform: "+c.what, int64(c.n), int64(c.n), limit); err != nil {
				return err
			}
		}
	}
	return nil
}

// Processor decodes samples and applies a [Transform], reusing its scratch
// images so that steady-state calls allocate nothing beyond what the decoder
// itself needs. It is not safe for concurrent use: keep one per goroutine.
type Processor struct {
	dec     *Decoder
	tr      Transform
	resizer Resizer
	a, b    Image
	rng     *rand.Rand
}

// NewProcessor returns a processor over dec. index distinguishes the random
// streams of processors sharing one seed.
func NewProcessor(dec *Decoder, tr Transform, index uint64) (*Processor, error) {
	if dec == nil {
		return nil, fmt.Errorf("processor: nil decoder")
	}
	if err := tr.Validate(); err != nil {
		return nil, err
	}
	if err := tr.checkLimit(dec.MaxPixels()); err != nil {
		return nil, err
	}
	return &Processor{dec: dec, tr: tr, rng: rand.New(rand.NewPCG(tr.Seed, index))}, nil
}

// maxRetained is the largest scratch buffer a Processor, a decoder handle or
// a pooled sample keeps for the next image: a rare large image's buffers go
// back to the garbage collector instead of staying, unbudgeted, for the rest
// of the run.
const maxRetained = 32 << 20

// Process decodes data (named name in errors) and writes the transformed
// image into out.
func (p *Processor) Process(out *tensor.Tensor, data []byte, name string) error {
	defer p.trim()
	m, err := p.Image(data, name)
	if err != nil {
		return err
	}
	if err := ToTensor(out, m, p.tr.Layout, p.tr.Normalize); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// trim drops scratch buffers larger than maxRetained.
func (p *Processor) trim() {
	big := false
	for _, m := range []*Image{&p.a, &p.b, &p.resizer.tmp} {
		if cap(m.Pix) > maxRetained {
			*m = Image{}
			big = true
		}
	}
	if big {
		clear(p.resizer.cache) // taps for a huge size are not kept either
	}
}

// Plan is what processing one image will make and allocate, computed from
// its header by [Processor.Plan] before anything is decoded.
type Plan struct {
	Info
	// OutW and OutH are the size of the transformed image (the tensor's).
	OutW, OutH int
	// Bytes bounds what [Processor.Process] allocates for the image: the
	// decoder's buffers and RGB result ([Info.DecodeBytes]), the resize's
	// intermediate, output and filter taps, the crop and the tensor.
	Bytes int64
}

// Plan reads data's header and returns the sizes and bytes that processing
// it will need. An image, or a resize result, over the decoder's pixel limit
// is a [*LimitError] inside an [*Error] naming the sample; so is a header
// that cannot be parsed.
func (p *Processor) Plan(data []byte, name string) (Plan, error) {
	info, err := p.dec.Inspect(data, name, p.tr.Resize)
	if err != nil {
		return Plan{}, err
	}
	pl := Plan{Info: info, OutW: info.DecodedW, OutH: info.DecodedH, Bytes: info.DecodeBytes}
	fail := func(err error) (Plan, error) { return Plan{}, &Error{Name: name, Format: info.Format, Err: err} }
	crop := max(p.tr.CenterCrop, p.tr.RandomCrop)
	if p.tr.Resize > 0 {
		w, h := ShorterSide(info.Width, info.Height, p.tr.Resize)
		if err := checkPixels("resize result", int64(w), int64(h), p.dec.MaxPixels()); err != nil {
			return fail(err)
		}
		cw, ch := w, h
		if crop > 0 && crop <= w && crop <= h {
			cw, ch, crop = crop, crop, 0
		}
		mid := satMul(satMul(int64(cw), int64(info.DecodedH)), 3)
		taps := satMul(int64(info.DecodedW)+int64(info.DecodedH)+int64(w)+int64(h), 64)
		pl.Bytes = satAdd(pl.Bytes, satAdd(satAdd(mid, taps), satMul(satMul(int64(cw), int64(ch)), 3)))
		pl.OutW, pl.OutH = cw, ch
	}
	if crop > 0 {
		pl.OutW, pl.OutH = crop, crop
		pl.Bytes = satAdd(pl.Bytes, satMul(satMul(int64(crop), int64(crop)), 3))
	}
	per := int64(3)
	if p.tr.Normalize != nil {
		per = 12
	}
	pl.Bytes = satAdd(pl.Bytes, satMul(satMul(int64(pl.OutW), int64(pl.OutH)), per))
	return pl, nil
}

// Image decodes data and applies the geometric part of the transform. The
// returned image belongs to the processor and is valid until the next call.
func (p *Processor) Image(data []byte, name string) (*Image, error) {
	if err := p.dec.Decode(&p.a, data, name, p.tr.Resize); err != nil {
		return nil, err
	}
	cur, spare := &p.a, &p.b
	crop := max(p.tr.CenterCrop, p.tr.RandomCrop)
	if p.tr.Resize > 0 {
		// torchvision computes the size from the original image, not from a
		// DCT-scaled decode whose sides were rounded up.
		w, h := ShorterSide(cur.SrcW, cur.SrcH, p.tr.Resize)
		if err := checkPixels("resize result", int64(w), int64(h), p.dec.MaxPixels()); err != nil {
			return nil, &Error{Name: name, Format: Format(data), Err: err}
		}
		x0, y0, cw, ch := 0, 0, w, h
		if crop > 0 && crop <= w && crop <= h {
			// crop fused into the resize: only the kept pixels are computed
			cw, ch = crop, crop
			if p.tr.CenterCrop > 0 {
				x0, y0 = CenterOffset(w, h, crop, crop)
			} else {
				y0, x0 = p.rng.IntN(h-crop+1), p.rng.IntN(w-crop+1)
			}
			crop = 0
		}
		if err := p.resizer.ResizeWindow(spare, cur, w, h, x0, y0, cw, ch); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cur, spare = spare, cur
	}
	switch {
	case crop == 0:
	case p.tr.CenterCrop > 0:
		if err := CenterCrop(spare, cur, crop, crop); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cur = spare
	default:
		if err := RandomCrop(spare, cur, crop, crop, p.rng); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cur = spare
	}
	if p.tr.FlipProb > 0 && p.rng.Float64() < p.tr.FlipProb {
		HFlip(cur)
	}
	return cur, nil
}
