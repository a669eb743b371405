package source

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Sharding and shuffling of a file dataset, as PyTorch's DistributedSampler
// deals them (see the package documentation, "Sharding and shuffling"):
//
//   - the epoch's global order is a permutation of the dataset's n entries
//     (per seed and epoch; the base order without Options.Shuffle);
//   - that order is padded by repeating its start (DistributedSampler's
//     drop_last=False) or cut (Options.DropLast) so that what remains after
//     the start offset divides evenly among the ranks;
//   - rank r of w reads global positions start+r, start+r+w, start+r+2w, …
//
// The permutation is computed one position at a time (a Feistel network on
// the smallest even power of two ≥ n, cycle-walked into [0, n)), so an epoch's
// order costs no memory and a resume at any offset costs nothing to reach.

// feistelRounds is the number of rounds of the permutation's Feistel network:
// six rounds of a 64-bit mixer leave no detectable structure in the order.
const feistelRounds = 6

// permutation is a pseudo-random permutation of [0, n) evaluated one index at
// a time. The zero value (n 0) is the identity.
type permutation struct {
	n    uint64
	half uint   // bits in each half of the network's domain
	mask uint64 // (1 << half) - 1
	keys [feistelRounds]uint64
}

// newPermutation returns the permutation of [0, n) for seed and epoch.
func newPermutation(n int, seed uint64, epoch int) permutation {
	if n <= 1 {
		return permutation{}
	}
	b := uint(bits.Len64(uint64(n - 1)))
	half := max((b+1)/2, 1)
	p := permutation{n: uint64(n), half: half, mask: 1<<half - 1}
	rng := rand.New(rand.NewPCG(seed, uint64(epoch)^0x5851f42d4c957f2d))
	for i := range p.keys {
		p.keys[i] = rng.Uint64()
	}
	return p
}

// at returns the entry at position i (0 ≤ i < n).
func (p *permutation) at(i uint64) uint64 {
	if p.n == 0 {
		return i
	}
	// Cycle walking: the network permutes [0, 4^half), which is less than 4n;
	// following it until it lands below n permutes [0, n), in fewer than 4
	// steps on average.
	x := i
	for {
		x = p.encrypt(x)
		if x < p.n {
			return x
		}
	}
}

func (p *permutation) encrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.keys {
		l, r = r, l^(mix64(r^k)&p.mask)
	}
	return l<<p.half | r
}

// mix64 is splitmix64's finaliser: every input bit changes every output bit
// with probability about one half.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Share is one rank's part of one epoch of a dataset of Samples entries, as
// [Files.Samples] reads it: positions Start+Rank, Start+Rank+WorldSize, … of
// the epoch's global order. Count says how many; [Share.At] which entry each
// is.
type Share struct {
	Samples         int   // entries in the dataset
	Rank, WorldSize int   // this rank of the world
	Start           int64 // global positions consumed before (by all ranks together)
	Count           int64 // entries this rank reads from Start on
	DropLast        bool  // the remainder was cut, not padded

	shuffle bool
	perm    permutation
}

// NewShare returns rank's share of an epoch of n entries with opts' seed, epoch,
// shuffle and DropLast, starting at global position start. WorldSize 0 is 1.
// A sharded dataset (WorldSize > 1) with fewer entries than ranks is an error
// naming rank, world size and dataset size: some rank would have nothing of its
// own to read, and ranks that differ in batch counts desynchronise training.
func NewShare(n int, opts Options, start int64) (Share, error) {
	r, err := resolve(opts)
	if err != nil {
		return Share{}, err
	}
	return r.share(n, start)
}

func (r resolved) share(n int, start int64) (Share, error) {
	if n < 0 || start < 0 {
		return Share{}, fmt.Errorf("source: share of %d entries from position %d: negative", n, start)
	}
	if r.world > 1 && n < r.world {
		what := "only repeats of other ranks' samples (padding)"
		if r.DropLast {
			what = "no samples (the remainder is dropped)"
		}
		return Share{}, fmt.Errorf("source: rank %d of world size %d gets no samples of its own: the dataset has %d, fewer than the world size, so rank %d would read %s",
			r.rank, r.world, n, r.rank, what)
	}
	s := Share{Samples: n, Rank: r.rank, WorldSize: r.world, Start: start, DropLast: r.DropLast, shuffle: r.Shuffle}
	if r.Shuffle {
		s.perm = newPermutation(n, r.Seed, r.Epoch)
	}
	if left := int64(n) - start; left > 0 {
		w := int64(r.world)
		if r.DropLast {
			s.Count = left / w
		} else {
			s.Count = (left + w - 1) / w
		}
	}
	return s, nil
}

// At returns the dataset index (in the base order) of the rank's k-th entry,
// 0 ≤ k < Count. Positions past the end of the epoch (padding) repeat the
// epoch's first entries, as DistributedSampler pads.
func (s *Share) At(k int64) int {
	p := uint64(s.Start+int64(s.Rank)+k*int64(s.WorldSize)) % uint64(s.Samples)
	if s.shuffle {
		p = s.perm.at(p)
	}
	return int(p)
}

// Consumed returns the global position after the rank's first k entries:
// where every rank stands when each has read k (the ranks of a data-parallel
// job advance in lockstep, one batch per step).
func (s *Share) Consumed(k int64) int64 { return s.Start + k*int64(s.WorldSize) }

// Order returns the paths of one epoch for one rank in the order [Files.Samples]
// reads them with the same opts, without reading anything (padding included;
// with Options.ShuffleBuffer, after the bounded shuffle). A caller that serves
// some samples from elsewhere (a cache) uses it to keep the epoch's order and
// sharding, then reads the rest through [Files.Select].
func (d *Files) Order(opts Options) ([]string, error) {
	idx, err := d.OrderIndices(opts)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = d.paths[k]
	}
	return out, nil
}

// OrderIndices is [Files.Order] as dataset indices (positions in the base order).
func (d *Files) OrderIndices(opts Options) ([]int, error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return d.rankOrder(r)
}

// rankOrder materialises the rank's order from the resume point on.
func (d *Files) rankOrder(r resolved) ([]int, error) {
	sh, skip, err := d.start(r)
	if err != nil {
		return nil, err
	}
	order := make([]int, sh.Count)
	for k := range order {
		order[k] = sh.At(int64(k))
	}
	order = shuffleRefs(order, r.ShuffleBuffer, r.sampleRNG())
	return order[min(skip, len(order)):], nil
}

// start returns the rank's share and how many of its entries a resume skips.
// Without a shuffle buffer a resume starts the share at the position's global
// offset, under any world size; with one, the buffer mixes entries across
// offsets, so the rank and world size must match and the rank's own count of
// consumed entries is skipped.
func (d *Files) start(r resolved) (Share, int, error) {
	p := r.Resume
	if p == nil {
		sh, err := r.share(len(d.paths), 0)
		return sh, 0, err
	}
	n := len(d.paths)
	switch {
	case p.Samples != 0 && p.Samples != n:
		return Share{}, 0, fmt.Errorf("source: resume position is for a dataset of %d samples, this one has %d", p.Samples, n)
	case p.Shuffle != r.Shuffle:
		return Share{}, 0, fmt.Errorf("source: resume position has shuffle %v, options have %v", p.Shuffle, r.Shuffle)
	case p.Consumed < 0 || p.Next < 0:
		return Share{}, 0, fmt.Errorf("source: resume position: negative offset (consumed %d, next %d)", p.Consumed, p.Next)
	}
	if r.ShuffleBuffer > 1 {
		if p.Rank != r.rank || p.WorldSize != r.world {
			return Share{}, 0, fmt.Errorf("source: resume position of rank %d of %d, options are rank %d of %d: with a shuffle buffer an epoch resumes only under the same rank and world size",
				p.Rank, p.WorldSize, r.rank, r.world)
		}
		sh, err := r.share(n, 0)
		return sh, int(min(p.Next, sh.Count)), err
	}
	if limit := int64(n) + int64(max(p.WorldSize, r.world)); p.Consumed > limit {
		return Share{}, 0, fmt.Errorf("source: resume position: %d entries consumed of an epoch of %d", p.Consumed, n)
	}
	sh, err := r.share(n, p.Consumed)
	return sh, 0, err
}

// Select returns a dataset of the entries at indices (positions in d's base
// order), in that order, that keeps their indices: [Sample.Index] of its
// samples is their index in d. Iterate it with the zero Options' sharding
// (rank 0 of 1, no shuffle) to read exactly those entries.
func (d *Files) Select(indices []int) (*Files, error) {
	out := &Files{paths: make([]string, len(indices)), index: make([]int, len(indices))}
	for i, k := range indices {
		if k < 0 || k >= len(d.paths) {
			return nil, fmt.Errorf("source: select: index %d outside the dataset's %d files", k, len(d.paths))
		}
		out.paths[i] = d.paths[k]
		out.index[i] = d.indexOf(k)
	}
	return out, nil
}

// indexOf returns the dataset index of base entry k.
func (d *Files) indexOf(k int) int {
	if d.index != nil {
		return d.index[k]
	}
	return k
}
