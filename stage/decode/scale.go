package decode

import (
	"math"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
)

func less(a, b turbojpeg.ScalingFactor) bool {
	return int64(a.Num)*int64(b.Denom) < int64(b.Num)*int64(a.Denom)
}

// Scale returns the DCT scaling factor Decode would use for a JPEG of w×h
// and the given target shorter side, as num/denom (1/1 when none).
func (d *Decoder) Scale(w, h, minShort int) (num, denom int) {
	f := d.pickScale(w, h, minShort)
	return int(f.Num), int(f.Denom)
}

// reducedScale is the DCT scale of reduced-size decoding for a region of
// w×h source pixels that the transform resizes to needW×needH next: when
// the next size is at most half the region in both directions, the
// smallest factor whose scaled region still holds at least needW×needH
// (exact scaled sizes: w × num / denom, not rounded up), else 1/1.
func (d *Decoder) reducedScale(w, h, needW, needH int) turbojpeg.ScalingFactor {
	if d.opts.NoDCTScaling || d.lib == nil || 2*needW > w || 2*needH > h {
		return one
	}
	for _, f := range d.factors { // smallest first
		if int64(w)*int64(f.Num) >= int64(needW)*int64(f.Denom) && int64(h)*int64(f.Num) >= int64(needH)*int64(f.Denom) {
			return f
		}
	}
	return one
}

func (d *Decoder) pickScale(w, h, minShort int) turbojpeg.ScalingFactor {
	one := turbojpeg.ScalingFactor{Num: 1, Denom: 1}
	if d.opts.NoDCTScaling || minShort <= 0 || d.lib == nil {
		return one
	}
	m := d.opts.DCTScaleMargin
	if m <= 0 {
		m = 2
	}
	need := int(math.Ceil(float64(minShort) * m))
	short := min(w, h)
	for _, f := range d.factors { // smallest first
		if f.Scale(short) >= need {
			return f
		}
	}
	return one
}
