package decode

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Per-sample randomness. A sample's random crop and flip come from a stream
// seeded by a hash of (seed, epoch, index), not from a stream shared by the
// samples a worker happens to decode: the same sample of the same epoch gets
// the same crop and flip whatever the number of workers, the order samples
// arrive in, or whether the epoch was resumed half-way.

// mix64 is SplitMix64's finaliser: a bijection of 64-bit words whose output
// bits each depend on every input bit.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// sampleSeed derives the two PCG seed words of sample (epoch, index) under
// seed: a counter-based derivation (each input is hashed in turn), so
// neighbouring indices and epochs give unrelated streams.
func sampleSeed(seed uint64, epoch, index int64) (uint64, uint64) {
	const golden, k1, k2 = 0x9e3779b97f4a7c15, 0xd1b54a32d192ed03, 0x8cb92ba72f3d8dd7
	h := mix64(seed + golden)
	h = mix64(h ^ mix64(uint64(epoch)+k1))
	h = mix64(h ^ mix64(uint64(index)+k2))
	return h, mix64(h + golden)
}

// SampleRand returns the random stream of sample index in epoch under seed:
// what [Processor] draws that sample's random crop and flip from. The same
// arguments always give the same stream.
func SampleRand(seed uint64, epoch, index int64) *rand.Rand {
	return rand.New(rand.NewPCG(sampleSeed(seed, epoch, index)))
}

// ResizedCrop configures torchvision's RandomResizedCrop: a box of a random
// area and aspect ratio, cropped and resized to Size×Size.
type ResizedCrop struct {
	// Size is the output's side in pixels; 0 disables the transform.
	Size int
	// Scale is the range of the box's area as a fraction of the image's;
	// zero means torchvision's default (0.08, 1).
	Scale [2]float64
	// Ratio is the range of the box's aspect ratio (width / height), drawn
	// log-uniformly; zero means torchvision's default (3/4, 4/3).
	Ratio [2]float64
}

// withDefaults returns rc with zero ranges replaced by torchvision's defaults.
func (rc ResizedCrop) withDefaults() ResizedCrop {
	if rc.Scale == [2]float64{} {
		rc.Scale = [2]float64{0.08, 1}
	}
	if rc.Ratio == [2]float64{} {
		rc.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	return rc
}

// validate checks the ranges (after defaults).
func (rc ResizedCrop) validate() error {
	rc = rc.withDefaults()
	switch {
	case rc.Size < 0:
		return fmt.Errorf("transform: negative random resized crop size %d", rc.Size)
	case !(rc.Scale[0] > 0 && rc.Scale[0] <= rc.Scale[1] && rc.Scale[1] <= 1):
		return fmt.Errorf("transform: random resized crop scale %v: want 0 < min ≤ max ≤ 1", rc.Scale)
	case !(rc.Ratio[0] > 0 && rc.Ratio[0] <= rc.Ratio[1] && !math.IsInf(rc.Ratio[1], 0)):
		return fmt.Errorf("transform: random resized crop ratio %v: want 0 < min ≤ max", rc.Ratio)
	}
	return nil
}

// RandomResizedCropBox draws the box torchvision's
// RandomResizedCrop.get_params draws for a w×h image, from rng: up to ten
// tries of an area uniform in rc.Scale × w·h and an aspect ratio
// log-uniform in rc.Ratio, sides rounded half to even, kept when the box
// fits, at a uniform position; else the centre fallback (the whole image,
// or its central part clamped to the ratio range). It returns the box's
// top-left corner and size; zero ranges in rc mean torchvision's defaults.
func RandomResizedCropBox(w, h int, rc ResizedCrop, rng *rand.Rand) (x, y, cw, ch int) {
	rc = rc.withDefaults()
	area := float64(w) * float64(h)
	lr0, lr1 := math.Log(rc.Ratio[0]), math.Log(rc.Ratio[1])
	for range 10 {
		target := area * (rc.Scale[0] + (rc.Scale[1]-rc.Scale[0])*rng.Float64())
		aspect := math.Exp(lr0 + (lr1-lr0)*rng.Float64())
		bw := int(math.RoundToEven(math.Sqrt(target * aspect)))
		bh := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < bw && bw <= w && 0 < bh && bh <= h {
			y := rng.IntN(h - bh + 1)
			x := rng.IntN(w - bw + 1)
			return x, y, bw, bh
		}
	}
	in := float64(w) / float64(h)
	bw, bh := w, h
	switch {
	case in < rc.Ratio[0]:
		bh = int(math.RoundToEven(float64(bw) / rc.Ratio[0]))
	case in > rc.Ratio[1]:
		bw = int(math.RoundToEven(float64(bh) * rc.Ratio[1]))
	}
	return (w - bw) / 2, (h - bh) / 2, bw, bh
}
