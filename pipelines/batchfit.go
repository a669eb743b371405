package pipelines

import (
	"fmt"

	"github.com/psiflow/psiflow/internal/bytesize"
)

// batchNeed is what one batch of decoded samples takes, known before the run
// from a batch stage's size and the output size of the decode stage that feeds
// it: exact for a crop (center_crop, random_crop, random_resized_crop: every
// sample is side×side), at least side×side for a resize alone (side is the
// shorter side), unknown when the decode stage keeps each image's size (then
// each image is bounded by max_pixels, and decoded on an overdraft when it does
// not fit: stage/decode's reserver).
type batchNeed struct {
	batch, decode *Component
	size          int64  // the batch stage's size
	side          int64  // the output's side (a crop) or shorter side (resize)
	key           string // the decode parameter that sets side
	exact         bool   // side×side exactly (a crop), else at least that
	elem          int64  // bytes per value of the collated batch: 4 with normalize, else 1
}

// bytes is the collated batch's size in bytes (its smallest for a resize).
func (n batchNeed) bytes() int64 { return n.size * 3 * n.side * n.side * n.elem }

// batchNeeds returns, for each batch stage of p fed by a decode stage whose
// output size is known before the run, what one batch takes.
func batchNeeds(p *Pipeline) []batchNeed {
	byName := map[string]*Component{}
	for _, c := range p.Nodes() {
		byName[c.Name] = c
	}
	var out []batchNeed
	for _, b := range p.Stages {
		if b.Kind.Name != "batch" {
			continue
		}
		for _, in := range b.Inputs {
			d := byName[in]
			if d == nil || d.Kind.Name != "decode" {
				continue
			}
			n := batchNeed{batch: b, decode: d, size: b.Config.Int("size"), elem: 1}
			for _, k := range []string{"center_crop", "random_crop", "random_resized_crop", "resize"} {
				if v := d.Config.Int(k); v > 0 {
					n.side, n.key, n.exact = v, k, k != "resize"
					break
				}
			}
			if n.side == 0 || n.size <= 0 {
				continue
			}
			if d.Config.String("normalize") != "none" {
				n.elem = 4
			}
			out = append(out, n)
		}
	}
	return out
}

// checkBatchesFit refuses, before anything is read or mapped, a pipeline one
// of whose batches cannot fit in the byte budget it was given
// (resources.budget): every image of such a run would be decoded on an
// overdraft and the loader would hold many times its budget (a resize of 5000
// in batches of 8 under 64 MiB held 2 GB). The error names the keys as the
// front-end's user knows them (hooks.Option: flags) and the numbers.
func checkBatchesFit(p *Pipeline, hooks Hooks, budget int64) error {
	for _, n := range batchNeeds(p) {
		need := n.bytes()
		if need <= budget {
			continue
		}
		key := func(node, param string) string {
			if hooks.Option != nil {
				if s := hooks.Option(node, param); s != "" {
					return s
				}
			}
			return node + "." + param
		}
		dtype := "uint8"
		if n.elem == 4 {
			dtype = fmt.Sprintf("float32 (%s %s)", key(n.decode.Name, "normalize"), n.decode.Config.String("normalize"))
		}
		least, why := "", fmt.Sprintf("%s %d", key(n.decode.Name, n.key), n.side)
		fix := fmt.Sprintf("Lower %s or %s", key(n.batch.Name, "size"), key(n.decode.Name, n.key))
		if !n.exact {
			least = "at least "
			why += fmt.Sprintf(" without a crop: %d is the shorter side", n.side)
			fix += fmt.Sprintf(", crop (%s)", key(n.decode.Name, "center_crop"))
		}
		return fmt.Errorf("one batch does not fit in the byte budget: a batch of %d (%s) samples of %s%d×%d×3 %s values (%s; %s each) is %s%s, more than the budget of %s (%s): "+
			"the decoded samples of one batch alone would exceed it, and the loader would hold several times its budget. %s, or raise %s to at least %s",
			n.size, key(n.batch.Name, "size"), least, n.side, n.side, dtype, why, bytesize.Human(need/n.size), least, bytesize.Human(need),
			bytesize.Human(budget), key("resources", "budget"), fix, key("resources", "budget"), bytesize.Human(need))
	}
	return nil
}
