package decode

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
	"github.com/psiflow/psiflow/tensor"
)

// Transform is the per-image processing after decode, in the order
// torchvision applies it: Resize, then CenterCrop or RandomCrop (or
// RandomResizedCrop instead of all three), then a random horizontal flip,
// then conversion to a tensor, normalised or not.
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
	// RandomResizedCrop, when its Size is set, crops a box of random area
	// and aspect ratio and resizes it to Size×Size (torchvision's
	// RandomResizedCrop, the ImageNet training transform). It replaces
	// Resize and the crops, which must then be 0.
	RandomResizedCrop ResizedCrop
	// FlipProb is the probability of a horizontal flip (0 disables).
	FlipProb float64
	// Layout is the output tensor layout (HWC by default).
	Layout tensor.Layout
	// Normalize, when set, makes float32 output (v/255 - mean)/std; else the
	// output is uint8.
	Normalize *Normalizer
	// Seed seeds the random crops and flip. Each sample's draws come from
	// (Seed, [Encoded.Epoch], [Encoded.Index]) alone ([SampleRand]), so a
	// sample gets the same crop and flip in a re-run or resumed epoch,
	// whatever the worker count or order.
	Seed uint64
	// Exact turns reduced-size decoding off: every JPEG is decoded at full
	// size, and the output is the same bytes as Pillow + torchvision's
	// transform. By default (false) a JPEG whose next size (the resize's
	// result, or the random resized crop's output against its box) is at
	// most half the source in both directions is decoded at the smallest
	// DCT scale (1/2, 1/4, 1/8) that keeps at least that size, then resized
	// the rest of the way; see docs/DECODE.md for what that costs in
	// accuracy.
	Exact bool
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
	case t.RandomResizedCrop.Size > 0 && (t.Resize > 0 || t.CenterCrop > 0 || t.RandomCrop > 0):
		return fmt.Errorf("transform: random resized crop (%d) replaces resize (%d), center crop (%d) and random crop (%d): set only one",
			t.RandomResizedCrop.Size, t.Resize, t.CenterCrop, t.RandomCrop)
	case t.FlipProb < 0 || t.FlipProb > 1 || math.IsNaN(t.FlipProb):
		return fmt.Errorf("transform: flip probability %v outside [0, 1]", t.FlipProb)
	case t.Layout != tensor.HWC && t.Layout != tensor.CHW:
		return fmt.Errorf("transform: unknown layout %d", t.Layout)
	}
	return t.RandomResizedCrop.validate()
}

// Random reports whether the transform draws random numbers (a random crop,
// a random resized crop or a flip), so that its output depends on the
// sample's [Encoded.Epoch] and [Encoded.Index].
func (t Transform) Random() bool {
	return t.RandomCrop > 0 || t.RandomResizedCrop.Size > 0 || t.FlipProb > 0
}

// checkLimit refuses sizes that make every image over the pixel limit.
func (t Transform) checkLimit(limit int64) error {
	for _, c := range []struct {
		what string
		n    int
	}{{"resize (shorter side squared)", t.Resize}, {"center crop", t.CenterCrop}, {"random crop", t.RandomCrop},
		{"random resized crop", t.RandomResizedCrop.Size}} {
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
	pcg     rand.PCG
	rng     *rand.Rand
	g       geometry // the current sample's, from [Processor.geometry]
}

// NewProcessor returns a processor over dec.
func NewProcessor(dec *Decoder, tr Transform) (*Processor, error) {
	if dec == nil {
		return nil, fmt.Errorf("processor: nil decoder")
	}
	if err := tr.Validate(); err != nil {
		return nil, err
	}
	if err := tr.checkLimit(dec.MaxPixels()); err != nil {
		return nil, dec.limitErr(err)
	}
	tr.RandomResizedCrop = tr.RandomResizedCrop.withDefaults()
	p := &Processor{dec: dec, tr: tr}
	p.rng = rand.New(&p.pcg)
	return p, nil
}

// maxRetained is the largest scratch buffer a Processor, a decoder handle or
// a pooled sample keeps for the next image: a rare large image's buffers go
// back to the garbage collector instead of staying, unbudgeted, for the rest
// of the run.
const maxRetained = 32 << 20

// Process decodes e.Data (named e.Key in errors) and writes the transformed
// image into out; e.Epoch and e.Index select the sample's random draws.
func (p *Processor) Process(out *tensor.Tensor, e Encoded) error {
	defer p.trim()
	m, err := p.image(e, false)
	if err != nil {
		return err
	}
	// the flip is fused into the tensor's write (one pass over the pixels, not two)
	if err := toTensor(out, m, p.tr.Layout, p.tr.Normalize, p.g.flip); err != nil {
		return fmt.Errorf("%s: %w", e.Key, err)
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
		p.resizer.sh, p.resizer.sv = coeffs{}, coeffs{}
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

// geometry is what the transform does to one image, decided from its
// header and the sample's random draws before anything is decoded.
type geometry struct {
	f turbojpeg.ScalingFactor // DCT scale of the decode
	// resize: reg of the decoded image is resampled to outW×outH, of which
	// the cw×ch window at (x0, y0) is kept; cache says whether its filter
	// taps repeat from image to image
	resize           bool
	reg              region
	cache            bool
	outW, outH       int
	x0, y0, cw, ch   int
	crop             int // a crop after the resize (or without one); 0: none
	cropX, cropY     int // its position when random
	flip             bool
	box              [4]int // the random resized crop's box (x, y, w, h) in the original
	part             bool   // only the box's part of the JPEG was decoded
	resultW, resultH int    // of the transformed image
}

// seed starts sample e's random stream.
func (p *Processor) seed(e Encoded) {
	p.pcg.Seed(sampleSeed(p.tr.Seed, e.Epoch, e.Index))
}

// geometry decides what is done to sample e, a w×h image in format format,
// and stores it in p.g. Random draws come in torchvision's order: the
// resized crop's box or the crop's position, then the flip.
func (p *Processor) geometry(e Encoded, format string, w, h int) error {
	tr := &p.tr
	g := geometry{f: one}
	if tr.Random() {
		p.seed(e)
	}
	jpeg := format == "jpeg"
	switch {
	case tr.RandomResizedCrop.Size > 0:
		s := tr.RandomResizedCrop.Size
		bx, by, bw, bh := RandomResizedCropBox(w, h, tr.RandomResizedCrop, p.rng)
		if jpeg && !tr.Exact {
			g.f = p.dec.reducedScale(bw, bh, s, s)
		}
		g.resize, g.outW, g.outH, g.cw, g.ch = true, s, s, s, s
		g.box = [4]int{bx, by, bw, bh}
		g.reg = scaledRegion(bx, by, bw, bh, w, h, g.f)
	case tr.Resize > 0:
		rw, rh := ShorterSide(w, h, tr.Resize)
		if err := checkPixels("resize result", int64(rw), int64(rh), p.dec.MaxPixels()); err != nil {
			return p.dec.limitErr(err)
		}
		if jpeg && !tr.Exact {
			g.f = p.dec.reducedScale(w, h, rw, rh)
		}
		// torchvision computes the size from the original image, not from
		// a DCT-scaled decode whose sides were rounded up
		g.resize, g.cache, g.outW, g.outH = true, true, rw, rh
		g.reg = scaledRegion(0, 0, w, h, w, h, g.f)
		g.cw, g.ch = rw, rh
		crop := max(tr.CenterCrop, tr.RandomCrop)
		switch {
		case crop > 0 && crop <= rw && crop <= rh:
			// crop fused into the resize: only the kept pixels are computed
			g.cw, g.ch = crop, crop
			if tr.CenterCrop > 0 {
				g.x0, g.y0 = CenterOffset(rw, rh, crop, crop)
			} else {
				g.y0, g.x0 = p.rng.IntN(rh-crop+1), p.rng.IntN(rw-crop+1)
			}
		case crop > 0:
			g.crop = crop
		}
	default:
		g.crop = max(tr.CenterCrop, tr.RandomCrop)
		g.cw, g.ch = w, h
	}
	g.resultW, g.resultH = g.cw, g.ch
	if g.crop > 0 {
		if tr.RandomCrop > 0 {
			if g.crop > g.cw || g.crop > g.ch {
				return fmt.Errorf("random crop: size %d×%d does not fit the %d×%d image", g.crop, g.crop, g.cw, g.ch)
			}
			g.cropY, g.cropX = p.rng.IntN(g.ch-g.crop+1), p.rng.IntN(g.cw-g.crop+1)
		}
		g.resultW, g.resultH = g.crop, g.crop
	}
	g.flip = tr.FlipProb > 0 && p.rng.Float64() < tr.FlipProb
	p.g = g
	return nil
}

var one = turbojpeg.ScalingFactor{Num: 1, Denom: 1}

// scaledRegion is the region of an image decoded at scale f that holds the
// bw×bh box at (bx, by) of the w×h original. At full size it is the box
// itself (the crop torchvision makes); scaled, the box's edges fall between
// pixels: the region is the pixels the scaled box touches, and the box
// within it fractional, so that the resize samples the same part of the
// picture.
func scaledRegion(bx, by, bw, bh, w, h int, f turbojpeg.ScalingFactor) region {
	if f == one {
		return region{x: bx, y: by, w: bw, h: bh, bx1: float64(bw), by1: float64(bh)}
	}
	s := float64(f.Num) / float64(f.Denom)
	axis := func(b, n, full int) (int, int, float64, float64) {
		lo, hi := float64(b)*s, math.Min(float64(b+n)*s, float64(f.Scale(full)))
		x0 := int(math.Floor(lo))
		x1 := min(int(math.Ceil(hi)), f.Scale(full))
		return x0, x1 - x0, lo - float64(x0), hi - float64(x0)
	}
	var g region
	g.x, g.w, g.bx0, g.bx1 = axis(bx, bw, w)
	g.y, g.h, g.by0, g.by1 = axis(by, bh, h)
	return g
}

// Plan reads e's header and returns the sizes and bytes that processing it
// will need. An image, or a resize result, over the decoder's pixel limit
// is a [*LimitError] inside an [*Error] naming the sample; so is a header
// that cannot be parsed.
func (p *Processor) Plan(e Encoded) (Plan, error) {
	info, err := p.inspect(e)
	if err != nil {
		return Plan{}, err
	}
	g := &p.g
	pl := Plan{Info: info, OutW: g.resultW, OutH: g.resultH, Bytes: info.DecodeBytes}
	if g.resize {
		rows := int64(g.reg.h)
		mid := satMul(satMul(int64(g.cw), rows), 3)
		taps := satMul(int64(g.reg.w)+int64(g.reg.h)+int64(g.outW)+int64(g.outH), 64)
		pl.Bytes = satAdd(pl.Bytes, satAdd(satAdd(mid, taps), satMul(satMul(int64(g.cw), int64(g.ch)), 3)))
	}
	if g.crop > 0 {
		pl.Bytes = satAdd(pl.Bytes, satMul(satMul(int64(g.crop), int64(g.crop)), 3))
	}
	per := int64(3)
	if p.tr.Normalize != nil {
		per = 12
	}
	pl.Bytes = satAdd(pl.Bytes, satMul(satMul(int64(pl.OutW), int64(pl.OutH)), per))
	return pl, nil
}

// inspect reads e's header, decides the sample's geometry (p.g) and sizes
// the decode at its scale.
func (p *Processor) inspect(e Encoded) (Info, error) {
	format := Format(e.Data)
	var gerr error
	decided := false
	info, err := p.dec.inspect(format, e.Data, func(w, h int) turbojpeg.ScalingFactor {
		gerr, decided = p.geometry(e, format, w, h), true
		return p.g.f
	})
	if err == nil && !decided {
		// only a TurboJPEG decode asks for its scale
		gerr = p.geometry(e, format, info.Width, info.Height)
	}
	if err == nil && gerr != nil {
		err = gerr
	}
	if err != nil {
		return Info{}, &Error{Name: e.Key, Format: format, Err: err}
	}
	return info, nil
}

// Image decodes e.Data and applies the geometric part of the transform. The
// returned image belongs to the processor and is valid until the next call.
func (p *Processor) Image(e Encoded) (*Image, error) { return p.image(e, true) }

// image is [Processor.Image]; without flip the sample's horizontal flip (p.g.flip)
// is left to the caller.
func (p *Processor) image(e Encoded, flip bool) (*Image, error) {
	info, err := p.inspect(e)
	if err != nil {
		return nil, err
	}
	g := &p.g
	cur, spare := &p.a, &p.b
	decoded := false
	if p.tr.RandomResizedCrop.Size > 0 {
		// only the box's rows and columns (the resize's taps stop at the
		// box's edges): the same bytes as the whole decode
		reg, ok, err := p.dec.decodeRegion(cur, e.Data, e.Key, info, g.f,
			turbojpeg.Region{X: g.reg.x, Y: g.reg.y, W: g.reg.w, H: g.reg.h})
		if err != nil {
			return nil, err
		}
		if ok {
			g.reg.x -= reg.X
			g.reg.y -= reg.Y
			decoded, g.part = true, true
		}
	}
	if !decoded {
		if err := p.dec.decodeAt(cur, e.Data, e.Key, info, g.f); err != nil {
			return nil, err
		}
	}
	if !decoded && g.f != one && (cur.W != g.f.Scale(info.Width) || cur.H != g.f.Scale(info.Height)) {
		// the standard library's fallback for a layout TurboJPEG refuses
		// decodes at full size
		g.f = one
		if p.tr.RandomResizedCrop.Size > 0 {
			g.reg = scaledRegion(g.box[0], g.box[1], g.box[2], g.box[3], info.Width, info.Height, one)
		} else {
			g.reg = scaledRegion(0, 0, info.Width, info.Height, info.Width, info.Height, one)
		}
	}
	if g.resize {
		if err := p.resizer.resizeRegion(spare, cur, g.reg, g.cache, g.outW, g.outH, g.x0, g.y0, g.cw, g.ch); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Key, err)
		}
		cur, spare = spare, cur
	}
	if g.crop > 0 {
		var err error
		if p.tr.CenterCrop > 0 {
			err = CenterCrop(spare, cur, g.crop, g.crop)
		} else {
			err = Crop(spare, cur, g.cropX, g.cropY, g.crop, g.crop)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Key, err)
		}
		cur = spare
	}
	if flip && g.flip {
		HFlip(cur)
	}
	return cur, nil
}
