package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOrderMatchesSamples checks that Order lists exactly what Samples reads, in
// the same order, for several sharding and shuffling options.
func TestOrderMatchesSamples(t *testing.T) {
	ds := NewFiles(writeNumbered(t, 23))
	tests := []Options{
		{WorldSize: 1},
		{Rank: 1, WorldSize: 3, Epoch: 2, Seed: 9, Shuffle: true},
		{Rank: 2, WorldSize: 3, Epoch: 2, Seed: 9, Shuffle: true, DropLast: true},
		{WorldSize: 1, Epoch: 1, Seed: 4, Shuffle: true, ShuffleBuffer: 5},
		{Rank: 1, WorldSize: 2, Seed: 4, Shuffle: true, Resume: &Position{Seed: 4, Consumed: 9, Samples: 23, Shuffle: true, WorldSize: 3}},
	}
	for _, opts := range tests {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			want, err := ds.Order(opts)
			if err != nil {
				t.Fatal(err)
			}
			got := readKeys(t, ds, opts)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Samples read %v\nOrder says  %v", got, want)
			}
		})
	}
}

// writeNumbered writes n small files 00.bin, 01.bin, … holding their own path.
func writeNumbered(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%04d.bin", i))
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// readKeys reads one epoch and returns the keys in order, checking each
// sample's Index against its path.
func readKeys(t *testing.T, ds *Files, opts Options) []string {
	t.Helper()
	keys, _ := readUpTo(t, ds, opts, -1)
	return keys
}

// readUpTo reads at most n samples (n < 0: all) and returns their keys and the
// position after them.
func readUpTo(t *testing.T, ds *Files, opts Options, n int) ([]string, Position) {
	t.Helper()
	it, err := ds.Samples(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for n < 0 || len(got) < n {
		s, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ds.Path(int(s.Index)) != s.Key {
			t.Fatalf("sample %s has Index %d, which is %s", s.Key, s.Index, ds.Path(int(s.Index)))
		}
		got = append(got, s.Key)
		s.Release()
	}
	return got, it.Position()
}

func TestPermutationIsABijection(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 16, 17, 64, 65, 1000, 4097, 1 << 16} {
		for _, seed := range []uint64{0, 1, 0xdeadbeef} {
			p := newPermutation(n, seed, 3)
			seen := make([]bool, n)
			for i := range n {
				v := p.at(uint64(i))
				if v >= uint64(n) || seen[v] {
					t.Fatalf("n %d seed %d: position %d gives %d (outside, or twice)", n, seed, i, v)
				}
				seen[v] = true
			}
		}
	}
}

func TestPermutationChangesWithSeedAndEpoch(t *testing.T) {
	const n = 1000
	order := func(seed uint64, epoch int) []uint64 {
		p := newPermutation(n, seed, epoch)
		out := make([]uint64, n)
		for i := range out {
			out[i] = p.at(uint64(i))
		}
		return out
	}
	a := order(1, 0)
	if !slices.Equal(a, order(1, 0)) {
		t.Fatal("the same seed and epoch gave two orders")
	}
	for _, other := range [][]uint64{order(1, 1), order(2, 0), order(1, 2)} {
		same := 0
		for i := range a {
			if a[i] == other[i] {
				same++
			}
		}
		// Two independent permutations agree at about one position (Poisson(1)).
		if same > 8 {
			t.Fatalf("%d of %d positions agree between two epochs or seeds", same, n)
		}
	}
}

// TestPermutationIsUniform checks the shuffle statistically: over many epochs,
// where entry 0 lands is uniform (chi-squared), and consecutive positions hold
// unrelated entries.
func TestPermutationIsUniform(t *testing.T) {
	const n, epochs = 10, 20000
	var where [n]int
	for e := range epochs {
		p := newPermutation(n, 7, e)
		for i := range n {
			if p.at(uint64(i)) == 0 {
				where[i]++
			}
		}
	}
	chi := 0.0
	for _, c := range where {
		d := float64(c) - epochs/n
		chi += d * d / (epochs / n)
	}
	// 9 degrees of freedom: P(chi² > 27.9) = 0.001.
	if chi > 27.9 {
		t.Fatalf("entry 0's position is not uniform: counts %v, chi² %.1f", where, chi)
	}
	const m = 100000
	p := newPermutation(m, 11, 0)
	adjacent := 0
	var sum, sumSq float64
	prev := p.at(0)
	for i := 1; i < m; i++ {
		v := p.at(uint64(i))
		if v == prev+1 || prev == v+1 {
			adjacent++
		}
		d := float64(v) - float64(prev)
		sum += d
		sumSq += d * d
		prev = v
	}
	// Neighbours in a random order are adjacent entries with probability 2/m.
	if adjacent > 10 {
		t.Fatalf("%d of %d neighbours are adjacent entries", adjacent, m)
	}
	// The step between neighbours of a random order has variance m²/6.
	if v := sumSq / m; math.Abs(v/(m*m/6.0)-1) > 0.05 {
		t.Fatalf("variance of the step between neighbours %.3g, want about %.3g", v, m*m/6.0)
	}
}

// distributedSampler is torch.utils.data.DistributedSampler's __iter__,
// transcribed, over a given epoch order.
func distributedSampler(order []int, rank, world int, dropLast bool) []int {
	n := len(order)
	var num int
	if dropLast && n%world != 0 {
		num = int(math.Ceil(float64(n-world) / float64(world)))
	} else {
		num = int(math.Ceil(float64(n) / float64(world)))
	}
	total := num * world
	indices := slices.Clone(order)
	if !dropLast {
		pad := total - n
		if pad <= n {
			indices = append(indices, indices[:pad]...)
		} else {
			for len(indices) < total {
				indices = append(indices, order...)
			}
			indices = indices[:total]
		}
	} else {
		indices = indices[:total]
	}
	var out []int
	for i := rank; i < total; i += world {
		out = append(out, indices[i])
	}
	return out
}

// TestShareIsDistributedSampler checks every rank's share against
// DistributedSampler's, over the epoch order the share shuffles into.
func TestShareIsDistributedSampler(t *testing.T) {
	for _, n := range []int{1, 2, 5, 20, 23, 64, 1001} {
		for _, world := range []int{1, 2, 3, 8} {
			if world > 1 && n < world {
				continue
			}
			for _, drop := range []bool{false, true} {
				for _, shuffle := range []bool{false, true} {
					opts := Options{WorldSize: world, Seed: 5, Epoch: 2, Shuffle: shuffle, DropLast: drop}
					full, err := NewShare(n, Options{Seed: 5, Epoch: 2, Shuffle: shuffle}, 0)
					if err != nil {
						t.Fatal(err)
					}
					order := make([]int, n)
					for k := range order {
						order[k] = full.At(int64(k))
					}
					if !shuffle && !slices.Equal(order, seq(n)) {
						t.Fatalf("unshuffled order is not the base order: %v", order)
					}
					counts := map[int]int{}
					for rank := range world {
						opts.Rank = rank
						sh, err := NewShare(n, opts, 0)
						if err != nil {
							t.Fatal(err)
						}
						var got []int
						for k := range sh.Count {
							got = append(got, sh.At(k))
							counts[sh.At(k)]++
						}
						if want := distributedSampler(order, rank, world, drop); !slices.Equal(got, want) {
							t.Fatalf("n %d, rank %d of %d, drop %v, shuffle %v:\n got %v\nwant %v", n, rank, world, drop, shuffle, got, want)
						}
					}
					checkCover(t, fmt.Sprintf("n %d world %d drop %v", n, world, drop), counts, n, world, drop)
				}
			}
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// checkCover checks the multiset of indices one epoch delivered across ranks:
// every index once, plus fewer than world repeats (padding) or fewer than
// world missing (DropLast).
func checkCover(t *testing.T, what string, counts map[int]int, n, world int, drop bool) {
	t.Helper()
	missing, extra := 0, 0
	for i := range n {
		switch c := counts[i]; {
		case c == 0:
			missing++
		case c > 1:
			extra += c - 1
		}
	}
	if len(counts) > n-missing {
		t.Fatalf("%s: indices outside the dataset: %v", what, counts)
	}
	if drop && (extra != 0 || missing >= world) || !drop && (missing != 0 || extra >= world) {
		t.Fatalf("%s: %d indices missing, %d repeated (want none repeated and < %d missing with DropLast, none missing and < %d repeated without)", what, missing, extra, world, world)
	}
}

// TestShareResumesUnderAnotherWorldSize stops an epoch in lockstep under one
// world size and finishes it under another: across both, every sample is read
// exactly once, apart from the padding of the last step.
func TestShareResumesUnderAnotherWorldSize(t *testing.T) {
	const n = 101
	for _, tc := range []struct{ before, after, steps int }{
		{2, 1, 10}, {1, 2, 33}, {3, 2, 5}, {2, 3, 25}, {4, 4, 7}, {2, 1, 0}, {2, 5, 50}, {2, 1, 51},
	} {
		for _, drop := range []bool{false, true} {
			base := Options{Seed: 3, Epoch: 1, Shuffle: true, DropLast: drop}
			counts := map[int]int{}
			var consumed int64
			for rank := range tc.before {
				o := base
				o.Rank, o.WorldSize = rank, tc.before
				sh, err := NewShare(n, o, 0)
				if err != nil {
					t.Fatal(err)
				}
				k := min(int64(tc.steps), sh.Count)
				for j := range k {
					counts[sh.At(j)]++
				}
				c := sh.Consumed(k)
				if rank > 0 && c != consumed {
					t.Fatalf("ranks in lockstep stand at different positions: %d and %d", consumed, c)
				}
				consumed = c
			}
			for rank := range tc.after {
				o := base
				o.Rank, o.WorldSize = rank, tc.after
				sh, err := NewShare(n, o, consumed)
				if err != nil {
					t.Fatal(err)
				}
				for j := range sh.Count {
					counts[sh.At(j)]++
				}
			}
			checkCover(t, fmt.Sprintf("%d → %d ranks after %d steps, drop %v", tc.before, tc.after, tc.steps, drop), counts, n, max(tc.before, tc.after), drop)
			// No sample read before the switch is read again after it, except
			// as padding at the very end.
			dups := 0
			for _, c := range counts {
				dups += max(c-1, 0)
			}
			if dups >= tc.after+tc.before {
				t.Fatalf("%d → %d: %d repeats", tc.before, tc.after, dups)
			}
		}
	}
}

func TestRankWithoutSamplesIsAnError(t *testing.T) {
	for _, drop := range []bool{false, true} {
		_, err := NewShare(20, Options{Rank: 25, WorldSize: 30, DropLast: drop}, 0)
		if err == nil {
			t.Fatalf("drop %v: rank 25 of 30 on 20 samples accepted", drop)
		}
		for _, want := range []string{"rank 25", "world size 30", "has 20"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("drop %v: error %q does not say %q", drop, err, want)
			}
		}
	}
	// The files dataset refuses it before reading.
	ds := NewFiles(writeNumbered(t, 3))
	if _, err := ds.Samples(Options{Rank: 3, WorldSize: 4}); err == nil || !strings.Contains(err.Error(), "world size 4") {
		t.Fatalf("Samples with 3 files and 4 ranks: %v", err)
	}
	// Not sharded, an empty dataset is an empty epoch.
	if sh, err := NewShare(0, Options{}, 0); err != nil || sh.Count != 0 {
		t.Fatalf("empty, unsharded: %+v, %v", sh, err)
	}
}

// TestFilesShardAndResumeAcrossWorldSizes reads real files: two ranks, two
// epochs (every file once per epoch, different orders); then an epoch stopped
// on two ranks at the same step and finished on one from a JSON position, and
// the other way round.
func TestFilesShardAndResumeAcrossWorldSizes(t *testing.T) {
	paths := writeNumbered(t, 20)
	ds := NewFiles(paths)
	var epochs [][]string
	for epoch := range 2 {
		var all []string
		counts := map[string]int{}
		for rank := range 2 {
			keys := readKeys(t, ds, Options{Rank: rank, WorldSize: 2, Epoch: epoch, Seed: 1, Shuffle: true})
			if len(keys) != 10 {
				t.Fatalf("rank %d read %d files, want 10", rank, len(keys))
			}
			for _, k := range keys {
				counts[k]++
			}
			all = append(all, keys...)
		}
		for _, p := range paths {
			if counts[p] != 1 {
				t.Fatalf("epoch %d: %s read %d times", epoch, p, counts[p])
			}
		}
		epochs = append(epochs, all)
	}
	if slices.Equal(epochs[0], epochs[1]) {
		t.Fatal("two epochs in the same order")
	}
	// 20 files: the rest after the switch divides evenly, so nothing is padded.
	for _, tc := range []struct{ before, after, steps int }{{2, 1, 3}, {1, 2, 4}, {2, 4, 4}} {
		counts := map[string]int{}
		var pos Position
		for rank := range tc.before {
			keys, p := readUpTo(t, ds, Options{Rank: rank, WorldSize: tc.before, Seed: 1, Shuffle: true}, tc.steps)
			for _, k := range keys {
				counts[k]++
			}
			js, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			pos = Position{}
			if err := json.Unmarshal(js, &pos); err != nil {
				t.Fatal(err)
			}
		}
		for rank := range tc.after {
			p := pos
			for _, k := range readKeys(t, ds, Options{Rank: rank, WorldSize: tc.after, Seed: 1, Shuffle: true, Resume: &p}) {
				counts[k]++
			}
		}
		for _, path := range paths {
			if counts[path] != 1 {
				t.Fatalf("%d → %d ranks: %s read %d times (position %+v)", tc.before, tc.after, path, counts[path], pos)
			}
		}
	}
	// A position for another dataset, or another shuffle, is refused.
	for _, bad := range []Position{{Samples: 21, Shuffle: true, Seed: 1}, {Samples: 20, Seed: 1}} {
		if _, err := ds.Samples(Options{Seed: 1, Shuffle: true, Resume: &bad}); err == nil {
			t.Fatalf("resume from %+v accepted", bad)
		}
	}
}

// TestFilesSelectKeepsIndices reads a selection and checks that every sample
// keeps its index in the whole dataset.
func TestFilesSelectKeepsIndices(t *testing.T) {
	paths := writeNumbered(t, 9)
	ds := NewFiles(paths)
	sel, err := ds.Select([]int{7, 2, 2, 5})
	if err != nil {
		t.Fatal(err)
	}
	it, err := sel.Samples(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []int64
	for {
		s, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if s.Key != paths[s.Index] {
			t.Fatalf("sample %s has index %d (%s)", s.Key, s.Index, paths[s.Index])
		}
		got = append(got, s.Index)
		s.Release()
	}
	if !slices.Equal(got, []int64{7, 2, 2, 5}) {
		t.Fatalf("indices %v", got)
	}
	if _, err := ds.Select([]int{9}); err == nil {
		t.Fatal("index outside the dataset accepted")
	}
}

// BenchmarkShareAt is the cost of the shuffled order: one position of a
// 1.28 M-entry epoch (cpu-ns/op: the process's CPU time, which a loaded machine
// does not inflate as it does wall-clock time).
func BenchmarkShareAt(b *testing.B) {
	sh, err := NewShare(1281167, Options{Rank: 3, WorldSize: 8, Shuffle: true, Seed: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var sink int
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		sink += sh.At(int64(i) % sh.Count)
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	_ = sink
}

// BenchmarkShuffleTable is what a table of the epoch's order costs instead: a
// Fisher–Yates shuffle of 1.28 M entries, per entry.
func BenchmarkShuffleTable(b *testing.B) {
	const n = 1281167
	order := make([]int32, n)
	rng := rand.New(rand.NewPCG(1, 2))
	cpu := cpuTime()
	for b.Loop() {
		for i := range order {
			order[i] = int32(i)
		}
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N)/n, "cpu-ns/entry")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkResume1M is the start of a resumed epoch of a 1.28 M-sample index
// (1,281,167 entries naming 64 real files in turn): the dataset from the
// index, the share at a global offset 80% into the epoch as rank 3 of 8,
// and the first sample read. Nothing in it grows with the offset.
func BenchmarkResume1M(b *testing.B) {
	const n = 1281167
	dir := b.TempDir()
	real := make([]string, 64)
	for i := range real {
		real[i] = filepath.Join(dir, fmt.Sprintf("%02d.jpg", i))
		if err := os.WriteFile(real[i], make([]byte, 110<<10), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	index := make([]string, n)
	for i := range index {
		index[i] = real[i%len(real)]
	}
	pos := Position{Seed: 1, Epoch: 7, Shuffle: true, Samples: n, Consumed: n * 8 / 10}
	cpu := cpuTime()
	for b.Loop() {
		ds := NewFiles(index)
		p := pos
		it, err := ds.Samples(Options{Rank: 3, WorldSize: 8, Seed: 1, Epoch: 7, Shuffle: true, Resume: &p})
		if err != nil {
			b.Fatal(err)
		}
		s, err := it.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
		it.Close()
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
}
