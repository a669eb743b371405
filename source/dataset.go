package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// Options configure one epoch's iteration over a dataset.
type Options struct {
	// Rank and WorldSize shard the dataset: rank r of w gets every w-th shard
	// (file, tar shard or table batch) of the epoch's shard order. When
	// WorldSize is 0 they come from RANK and WORLD_SIZE in the environment (as
	// torchrun sets them), defaulting to 0 and 1.
	Rank, WorldSize int
	// Epoch selects the shuffle of this pass.
	Epoch int
	// Seed seeds shuffling; the same seed, epoch, rank and world size give the same order.
	Seed uint64
	// Shuffle permutes the shard order per epoch.
	Shuffle bool
	// ShuffleBuffer, when > 0, also shuffles samples through a bounded buffer
	// of that many samples (for tar shards it holds their bytes).
	ShuffleBuffer int
	// Resume continues from a checkpoint taken with Position; nil starts the epoch.
	Resume *Position

	// Reader configures the readers (backend, queue depth, O_DIRECT, fadvise).
	Reader ReaderOptions
	// Workers is the number of readers (one ring each) for file datasets
	// (default GOMAXPROCS for io_uring; 4×GOMAXPROCS, at least 8, for pread).
	Workers int
	// Buffers provides read buffers; default: a [Pool] of 256 KiB slots, enough
	// for every worker's reads in flight and queued, that maps separate buffers
	// when all are in use (file
	// samples hold their buffer until Release, so a consumer that holds many
	// samples must not starve the reads it waits for). A provider that waits
	// when empty must have more buffers than the consumer holds at once.
	Buffers BufferProvider
	// Gate, when set, admits each read (permit before buffer before submit).
	Gate Gate
	// Budget, when set, is charged for each sample's bytes from before its read
	// (file datasets) or from its emission (tar shards, tables) until Release.
	Budget Budget
	// ChunkSize is the read size for tar shards (default 1 MiB).
	ChunkSize int

	// Skip turns bad input (missing file, read error, truncated tar, corrupt
	// table) into a counted skip instead of an error, up to MaxSkips (0: no limit).
	Skip     bool
	MaxSkips int64
}

// Position is a resumable point in an epoch, small and JSON-marshalable.
// Pass it back in [Options.Resume] with the same dataset, seed, rank and
// world size to get exactly the samples not yet returned.
type Position struct {
	Epoch     int    `json:"epoch"`
	Seed      uint64 `json:"seed"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	// Next is the number of entries of this rank's epoch order already consumed
	// (returned or skipped). For tar shards it counts samples.
	Next int64 `json:"next"`
	// Tar shards only: the shard being streamed (index in this rank's shard
	// order), the byte offset of its next member, the shuffle buffer's
	// contents and the shuffle generator's state.
	Shard   int    `json:"shard,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Pending []Ref  `json:"pending,omitempty"`
	RNG     []byte `json:"rng,omitempty"`
}

// Ref locates a sample inside a shard: bytes [Off, End) of shard Shard (an
// index into the dataset's shard list).
type Ref struct {
	Shard int   `json:"s"`
	Off   int64 `json:"o"`
	End   int64 `json:"e"`
}

// Field is one named part of a sample (a tar member's extension, or a file's).
type Field struct {
	Name string
	Data []byte
}

// Sample is one training example. Release it when done (in a graph, the
// graph does): it returns its buffers and its bytes of budget. It
// implements stage.Releaser, and on
// purpose not stage.Sized: its bytes are charged to the Budget by the source
// (before the read for files), so a graph must not charge them again.
type Sample struct {
	// Key identifies the sample: a file's path, or a tar member path up to the
	// first dot of its base name.
	Key string
	// Fields are the sample's parts in shard order.
	Fields []Field
	// Shard is the file or tar shard the sample came from, Off its byte offset there.
	Shard string
	Off   int64

	bytes   int64
	budget  Budget
	bufs    []Buffer
	release sync.Once
}

// Field returns the data of the field named name, or nil.
func (s *Sample) Field(name string) []byte {
	for _, f := range s.Fields {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

// Len returns the total bytes of the sample's fields.
func (s *Sample) Len() int64 { return s.bytes }

// Release returns the sample's buffers and budget. Later calls do nothing.
func (s *Sample) Release() {
	s.release.Do(func() {
		for _, b := range s.bufs {
			b.Release()
		}
		s.bufs = nil
		if s.budget != nil && s.bytes > 0 {
			s.budget.Release(s.bytes)
		}
	})
}

// Iterator yields the elements of one epoch for one rank. It is used by one goroutine.
type Iterator[T any] interface {
	// Next returns the next element, or io.EOF at the end of the epoch.
	Next(ctx context.Context) (T, error)
	// Position returns a checkpoint after the last element Next returned.
	Position() Position
	// Skipped returns how many bad inputs were skipped (Options.Skip).
	Skipped() int64
	// Close stops reading and releases what the iterator holds (not the
	// elements already returned).
	Close() error
}

// ErrTooManySkips is wrapped by the error returned when Options.MaxSkips is exceeded.
var ErrTooManySkips = errors.New("source: too many bad inputs skipped")

// resolved are Options after defaults and environment.
type resolved struct {
	Options
	rank, world int
}

func resolve(o Options) (resolved, error) {
	r := resolved{Options: o, rank: o.Rank, world: o.WorldSize}
	if r.world == 0 {
		r.world, r.rank = 1, 0
		if v := os.Getenv("WORLD_SIZE"); v != "" {
			w, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("source: WORLD_SIZE=%q: %w", v, err)
			}
			r.world = w
		}
		if v := os.Getenv("RANK"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("source: RANK=%q: %w", v, err)
			}
			r.rank = k
		}
	}
	if r.world < 1 || r.rank < 0 || r.rank >= r.world {
		return r, fmt.Errorf("source: rank %d of world size %d is out of range", r.rank, r.world)
	}
	if p := o.Resume; p != nil {
		if p.Seed != o.Seed || p.Rank != r.rank || p.WorldSize != r.world || p.Epoch != o.Epoch {
			return r, fmt.Errorf("source: resume position (epoch %d, seed %d, rank %d/%d) does not match options (epoch %d, seed %d, rank %d/%d)",
				p.Epoch, p.Seed, p.Rank, p.WorldSize, o.Epoch, o.Seed, r.rank, r.world)
		}
	}
	r.Reader.defaults()
	if r.ChunkSize <= 0 {
		r.ChunkSize = 1 << 20
	}
	return r, nil
}

// LocalRank returns LOCAL_RANK from the environment (0 when unset or invalid):
// the rank within this machine, for choosing a device.
func LocalRank() int {
	v, err := strconv.Atoi(os.Getenv("LOCAL_RANK"))
	if err != nil {
		return 0
	}
	return v
}

func (r resolved) position() Position {
	return Position{Epoch: r.Epoch, Seed: r.Seed, Rank: r.rank, WorldSize: r.world}
}

// rankShards returns the indices of n shards this rank reads this epoch:
// the epoch's permutation (when shuffling), then every world-th entry.
func (r resolved) rankShards(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if r.Shuffle {
		rng := rand.New(rand.NewPCG(r.Seed, uint64(r.Epoch)))
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	var mine []int
	for i := r.rank; i < n; i += r.world {
		mine = append(mine, order[i])
	}
	return mine
}

// sampleRNG is the generator of the bounded sample shuffle for this epoch and rank.
func (r resolved) sampleRNG() *rand.PCG {
	return rand.NewPCG(r.Seed^0x9e3779b97f4a7c15, uint64(r.Epoch)<<20|uint64(r.rank))
}

// shuffleRefs applies the bounded shuffle buffer to a known sequence.
func shuffleRefs[T any](in []T, size int, src *rand.PCG) []T {
	if size <= 1 {
		return in
	}
	rng := rand.New(src)
	out := make([]T, 0, len(in))
	buf := make([]T, 0, size)
	for _, v := range in {
		if len(buf) < size {
			buf = append(buf, v)
			continue
		}
		j := rng.IntN(size)
		out = append(out, buf[j])
		buf[j] = v
	}
	for len(buf) > 0 {
		j := rng.IntN(len(buf))
		out = append(out, buf[j])
		buf[j] = buf[len(buf)-1]
		buf = buf[:len(buf)-1]
	}
	return out
}

// skipper applies the bad-input policy.
type skipper struct {
	skip    bool
	max     int64
	skipped int64
}

// handle returns nil when err may be skipped (and counts it), else the error.
func (s *skipper) handle(err error) error {
	if !s.skip {
		return err
	}
	s.skipped++
	if s.max > 0 && s.skipped > s.max {
		return fmt.Errorf("%w (%d > %d); last: %w", ErrTooManySkips, s.skipped, s.max, err)
	}
	return nil
}

func defaultWorkers(backend Backend) int {
	n := runtime.GOMAXPROCS(0)
	if backend == BackendPread {
		return max(4*n, 8) // pread has one read in flight per worker
	}
	return n
}
