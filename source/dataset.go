package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"github.com/psiflow/psiflow/stage"
)

// Options configure one epoch's iteration over a dataset.
type Options struct {
	// Rank and WorldSize shard the dataset. Files are dealt as PyTorch's
	// DistributedSampler deals them: rank r of w reads positions r, r+w, … of
	// the epoch's order, padded or cut (DropLast) so every rank reads the same
	// count ([Share]). Tar shards and tables are dealt by shard (file, tar
	// shard or table batch): rank r gets every w-th of the epoch's shard order.
	// WorldSize 0 means 1: the library never reads the environment; a
	// front-end that follows torchrun's RANK and WORLD_SIZE calls [EnvSharding]
	// and passes them here.
	Rank, WorldSize int
	// Epoch selects the shuffle of this pass.
	Epoch int
	// Seed seeds shuffling; the same seed and epoch give the same global order.
	Seed uint64
	// Shuffle permutes the epoch's order (files: every sample; tar shards and
	// tables: the shard order), differently every epoch.
	Shuffle bool
	// DropLast cuts the end of a file dataset's epoch so every rank reads
	// ⌊remaining/WorldSize⌋ files; without it the order is padded by repeating
	// its first entries so every rank reads ⌈remaining/WorldSize⌉
	// (DistributedSampler's drop_last). It has no effect on tar shards and tables.
	DropLast bool
	// ShuffleBuffer, when > 0, also shuffles samples through a bounded buffer
	// of that many samples (for tar shards it holds their bytes).
	ShuffleBuffer int
	// Resume continues from a checkpoint taken with Position; nil starts the
	// epoch. A file dataset resumes at the position's global offset under any
	// rank and world size (see [Position.Consumed]); tar shards and tables, and
	// files with a ShuffleBuffer, only under the rank and world size that took it.
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
	// MaxMember is the largest tar member read (default [DefaultMaxMember]);
	// a larger one is an error (with Skip, that member alone is dropped).
	// Member sizes are also checked against the bytes left in the shard
	// before anything is allocated. For tables it bounds an Arrow IPC record
	// batch's body and a Parquet column chunk's declared uncompressed size.
	MaxMember int64

	// Skip turns bad input (missing file, read error, truncated tar, corrupt
	// table) into a counted skip instead of an error, up to MaxSkips (0: no limit).
	// A tar member over MaxMember is dropped alone; after a corrupt tar header
	// reading resumes at the next valid header; a truncated shard (no
	// end-of-archive marker) ends there. [LossReporter] says how many bytes
	// were passed over.
	Skip     bool
	MaxSkips int64
	// OnSkip, when set, receives every skip as a [*Skipped]: what was passed over
	// (a file, a tar member, the rest of a shard), where, and the bytes lost. It
	// is called on the goroutine that calls Next.
	OnSkip func(error)
	// SkipPolicy is the decode stage's policy ([stage.SkipPolicy]) applied to
	// bad input: under stage.Skip a file or member that cannot be opened or
	// read is skipped and counted within the policy's MaxSkips and MaxRate
	// (measured over the samples seen), and named through OnSkip, or through
	// the policy's Log when OnSkip is nil. It is an alternative to Skip and
	// MaxSkips: set one or the other.
	SkipPolicy stage.SkipPolicy
}

// Position is a resumable point in an epoch, small and JSON-marshalable.
// Pass it back in [Options.Resume] with the same dataset, seed and epoch to
// get exactly the samples not yet returned.
//
// For files the position is global: Consumed counts the entries of the
// epoch's global order that every rank together has consumed, and a resume
// under another world size deals the rest of the epoch among the new ranks.
// That is exact when the position was taken where every rank stood at the same
// point, as data-parallel ranks do (each consumes one batch per step): take it
// at the same step on every rank (any rank's, they agree) and load it on every
// new rank.
type Position struct {
	Epoch     int    `json:"epoch"`
	Seed      uint64 `json:"seed"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	// Files: the global offset reached (every rank's consumed entries and
	// those before them: rank r of w, having consumed k entries from offset
	// s, stands at s + k·w), the dataset's size, and whether it was shuffled.
	Consumed int64 `json:"consumed,omitempty"`
	Samples  int   `json:"samples,omitempty"`
	Shuffle  bool  `json:"shuffle,omitempty"`
	// Next is the number of entries of this rank's epoch order already consumed
	// (returned or skipped): tar shards (it counts samples), tables, and files
	// read through a ShuffleBuffer.
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
	// Index identifies the sample within its dataset, the same in every epoch
	// and under every rank and world size: for files, its position in the
	// dataset's base order ([Files.Paths]; a padded epoch repeats indices); for
	// tar shards, the shard's index × 2⁴⁰ plus the byte offset of the sample's
	// first member. A decoder derives per-sample randomness from (seed, epoch,
	// Index), so a resumed epoch gets the same augmentation.
	Index int64
	// Epoch is the epoch the sample was read in ([Options.Epoch]): with Index,
	// what a random transform draws from.
	Epoch int64

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

// MissingField returns the error for a sample that has no field called name (a
// tar sample without its image): it names the sample, where it was read, the
// member it lacks and the members it has.
func (s *Sample) MissingField(name string) error {
	if s.Shard == s.Key { // one file, one field
		have := make([]string, len(s.Fields))
		for i, f := range s.Fields {
			have[i] = f.Name
		}
		return fmt.Errorf("%s has no field %q (it has %s)", s.Key, name, strings.Join(have, ", "))
	}
	have := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		have[i] = s.Key + "." + f.Name
	}
	return &ReadError{Op: "tar", Path: s.Shard, Off: s.Off, Err: fmt.Errorf("sample %q has no member %q (it has %s)", s.Key, s.Key+"."+name, strings.Join(have, ", "))}
}

// EncodedImage returns the sample as a decode stage reads it (stage/decode's
// Image, so that decode.Images needs no accessor): its key, the bytes of its
// image field, its Index and its Epoch. The image field is the first whose
// name is jpg, jpeg or png (in any case), else the sample's only field; a
// sample with neither (a tar sample without its image) returns the error of
// [Sample.MissingField] for "jpg", naming the members it has.
func (s *Sample) EncodedImage() (key string, data []byte, index, epoch int64, err error) {
	for _, f := range s.Fields {
		switch strings.ToLower(f.Name) {
		case "jpg", "jpeg", "png":
			return s.Key, f.Data, s.Index, s.Epoch, nil
		}
	}
	if len(s.Fields) == 1 {
		return s.Key, s.Fields[0].Data, s.Index, s.Epoch, nil
	}
	return s.Key, nil, s.Index, s.Epoch, s.MissingField("jpg")
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

// DefaultMaxMember is the default of [Options.MaxMember]: 1 GiB.
const DefaultMaxMember = 1 << 30

// LossReporter is implemented by iterators that can say how many bytes of
// input their skips passed over (tar shards).
type LossReporter interface {
	LostBytes() int64
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
		r.world = 1
	}
	if r.world < 1 || r.rank < 0 || r.rank >= r.world {
		return r, fmt.Errorf("source: rank %d of world size %d is out of range", r.rank, r.world)
	}
	if p := o.Resume; p != nil && (p.Seed != o.Seed || p.Epoch != o.Epoch) {
		return r, fmt.Errorf("source: resume position (epoch %d, seed %d) does not match options (epoch %d, seed %d)",
			p.Epoch, p.Seed, o.Epoch, o.Seed)
	}
	if o.MaxMember < 0 || o.MaxSkips < 0 {
		return r, fmt.Errorf("source: negative option (MaxMember %d, MaxSkips %d)", o.MaxMember, o.MaxSkips)
	}
	if err := o.SkipPolicy.Validate(); err != nil {
		return r, fmt.Errorf("source: %w", err)
	}
	if o.SkipPolicy.OnError == stage.Skip && (o.Skip || o.MaxSkips != 0) {
		return r, errors.New("source: set Skip and MaxSkips, or SkipPolicy, not both")
	}
	if r.MaxMember == 0 {
		r.MaxMember = DefaultMaxMember
	}
	r.Reader.defaults()
	if r.ChunkSize <= 0 {
		r.ChunkSize = 1 << 20
	}
	return r, nil
}

func (r resolved) position() Position {
	return Position{Epoch: r.Epoch, Seed: r.Seed, Rank: r.rank, WorldSize: r.world}
}

// checkRank refuses a resume position taken under another rank or world
// size: tar shards and tables resume only where they stopped.
func (r resolved) checkRank() error {
	if p := r.Resume; p != nil && (p.Rank != r.rank || max(p.WorldSize, 1) != r.world) {
		return fmt.Errorf("source: resume position of rank %d of %d does not match options (rank %d of %d)", p.Rank, p.WorldSize, r.rank, r.world)
	}
	return nil
}

// rankShards returns the indices of n shards this rank reads this epoch:
// the epoch's permutation (when shuffling), then every world-th entry. A
// sharded dataset with fewer shards than ranks is an error naming rank,
// world size and shard count: some rank would read nothing, and a rank that
// ends early desynchronises the others.
func (r resolved) rankShards(n int) ([]int, error) {
	if err := r.checkRank(); err != nil {
		return nil, err
	}
	if r.world > 1 && n < r.world {
		return nil, fmt.Errorf("source: rank %d of world size %d gets no shards: the dataset has %d, fewer than the world size", r.rank, r.world, n)
	}
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
	return mine, nil
}

// tarIndex is [Sample.Index] of a tar sample whose first member starts at
// byte off of shard (an index in the dataset's shard list).
func tarIndex(shard int, off int64) int64 { return int64(shard)<<40 | off }

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

func defaultWorkers(backend Backend) int {
	n := runtime.GOMAXPROCS(0)
	if backend == BackendPread {
		return max(4*n, 8) // pread has one read in flight per worker
	}
	return n
}
