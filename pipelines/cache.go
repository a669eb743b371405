package pipelines

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pressure"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma/umacache"
)

// The sample cache (resources.cache) keeps samples between epochs in UMA's
// preemptible memory. It spans two kinds, one service of the run: the files
// source splits each epoch's order into hits and misses and reads only the
// misses; with cache: encoded it serves the hits as read samples and the
// decode stage keeps each file it decodes; with cache: decoded the decode stage
// keeps each tensor it makes and serves the hits after decoding. An entry the
// kernel took back between the split and its read is read again in a second
// graph of the same epoch, never served.

// defaultCacheShare is the share of the memory limit the cache may hold when
// resources.cache_max is 0.
const defaultCacheShare = 0.5

// sampleCache is a run's sample cache; a nil *sampleCache is none.
type sampleCache struct {
	mode  string // "decoded" or "encoded"
	c     *umacache.Cache
	sig   uint64
	shape []int // decoded: the sample's shape
	bytes int64 // decoded: the sample's bytes

	mu      sync.Mutex
	hits    []string // the epoch's hits, from the source to the decode stage (decoded)
	late    []string // entries found reclaimed while serving hits
	lookups int64
}

// openCache makes the run's sample cache from resources.cache (nothing when
// off), registers its shed action and headroom share with rt, and says so.
func (r *runState) openCache(p *Pipeline, rt *memory.Runtime) error {
	mode := p.Resource.Cache
	if mode == "" || mode == "off" {
		return nil
	}
	if p.Source.Kind.Name != "files" {
		return fmt.Errorf("resources.cache: %s needs a files source, not %s", mode, p.Source.Kind.Name)
	}
	var dec *Component
	for _, c := range p.Stages {
		if c.Kind.Name == "decode" {
			if dec != nil {
				return fmt.Errorf("resources.cache: %s needs one decode stage, not several (%s, %s)", mode, dec.Name, c.Name)
			}
			dec = c
		}
	}
	if dec == nil {
		return fmt.Errorf("resources.cache: %s needs a decode stage", mode)
	}
	sc := &sampleCache{mode: mode}
	chunk := int64(32 << 10)
	if mode == "decoded" {
		cfg := dec.Config
		for _, k := range []string{"random_crop", "random_resized_crop"} {
			if cfg.Int(k) > 0 {
				return fmt.Errorf("resources.cache: decoded keeps the decode stage's output, which %s makes different every epoch; use cache: encoded", k)
			}
		}
		side := cfg.Int("center_crop")
		switch {
		case cfg.Float("flip") > 0:
			return errors.New("resources.cache: decoded keeps the decode stage's output, which flip makes different every epoch; use cache: encoded")
		case side == 0:
			return errors.New("resources.cache: decoded needs a decode stage of one output size (center_crop)")
		case cfg.String("normalize") != "none":
			return fmt.Errorf("resources.cache: decoded keeps the decode stage's tensors as uint8, and decode.normalize: %s makes them float32; "+
				"use cache: encoded (the files' bytes, decoded and normalised every epoch) or normalize: none", cfg.String("normalize"))
		}
		sc.shape = []int{3, int(side), int(side)}
		if cfg.String("layout") == "hwc" {
			sc.shape = []int{int(side), int(side), 3}
		}
		sc.bytes = 3 * side * side
		page := int64(4096)
		chunk = (sc.bytes + page - 1) / page * page // one entry per chunk: every tensor has one size
	}
	limit, how := p.Resource.CacheMax, "resources.cache_max"
	if limit == 0 {
		mem, src, err := cgroup.SelfMemoryLimit()
		if err != nil {
			return fmt.Errorf("sizing the sample cache: %w", err)
		}
		limit, how = int64(float64(mem)*defaultCacheShare), fmt.Sprintf("half of the memory limit (%s)", src)
	}
	// In the runtime's UMA, like the read buffers: one UMA per runtime.
	u := rt.UMA()
	if u == nil {
		return fmt.Errorf("resources.cache: %s needs UMA, which this platform lacks (the sample cache runs on Linux)", mode)
	}
	c, err := umacache.New(umacache.Config{UMA: u, Name: "sample-cache", ChunkBytes: chunk, MaxBytes: max(limit, chunk)})
	if err != nil {
		return fmt.Errorf("sample cache: %w", err)
	}
	sc.c = c
	// Within a run the decode stage's configuration is one: the signature
	// guards against an entry made under another.
	sc.sig = xxh3.HashString(fmt.Sprintf("%s|%v", mode, dec.Config.vals))
	// Closed after the graphs and before the runtime's UMA it lives in.
	r.closers = append(r.closers, sc.c.Close)
	r.cache = sc
	// At Critical the cache gives back its coldest eighth (it is rebuilt from
	// the files when the pressure is gone); it follows the headroom, holding at
	// most half of what the headroom leaves the loader beyond its budget.
	rt.OnShed(memory.ActionSampleCache, func(context.Context) (int64, error) {
		return c.Shed(max(c.Stats().Bytes/8, 1<<20)), nil
	})
	bound := c.MaxBytes()
	rt.OnHeadroom(func(rep pressure.HeadroomReport) {
		c.SetLimit(min(bound, max(0, (rep.Allowance-rep.Budget)/2)))
	})
	r.info(fmt.Sprintf("sample cache: %s samples in preemptible memory, up to %s (%s); given back first under pressure", mode, bytesize.Human(limit), how))
	if r.hooks.OnCache != nil {
		r.hooks.OnCache(c)
	}
	return nil
}

// stats returns the hits and lookups so far (zero without a cache).
func (sc *sampleCache) stats() (hits, lookups int64) {
	if sc == nil {
		return 0, 0
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.c.Stats().Hits, sc.lookups
}

// takeLate returns the entries found reclaimed since the last call.
func (sc *sampleCache) takeLate() []string {
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	late := sc.late
	sc.late = nil
	return late
}

// source is the files source under the cache: the epoch's order split into
// hits and misses, the misses read (keeping their dataset indices), the hits
// served here (encoded) or after decoding (decoded).
func (sc *sampleCache) source(b *Build, files *source.Files, o source.Options) (Stream, error) {
	idx, err := files.OrderIndices(o)
	if err != nil {
		return Stream{}, err
	}
	var hits []string
	var missIdx []int
	for _, i := range idx {
		if p := files.Path(i); sc.c.Contains(p, sc.sig) {
			hits = append(hits, p)
		} else {
			missIdx = append(missIdx, i)
		}
	}
	misses, err := files.Select(missIdx)
	if err != nil {
		return Stream{}, err
	}
	sc.mu.Lock()
	sc.lookups += int64(len(idx))
	if sc.mode == "decoded" {
		sc.hits = hits
	}
	sc.mu.Unlock()
	// The order and sharding are already in the selection: read it as it is.
	o.Epoch, o.Rank, o.WorldSize, o.Shuffle, o.ShuffleBuffer, o.DropLast, o.Resume = 0, 0, 1, false, 0, false, nil
	read := flowsrc.Files(b.Graph, b.Name, misses, o)
	if sc.mode == "encoded" && len(hits) > 0 {
		cached := hitSource(b.Graph, b.Name+"-cache", sc, hits, 0, encodedHit)
		return Wrap(SampleType, flow.Merge([]flow.Stream[*source.Sample]{read, cached}, b.Name+"-merge"))
	}
	return Wrap(SampleType, read)
}

// afterDecode is the decode stage's output under the cache: every tensor kept
// (decoded), and the epoch's hits merged in.
func (sc *sampleCache) afterDecode(b *Build, decoded flow.Stream[*tensor.Sample], labelOf func(key string) int64) flow.Stream[*tensor.Sample] {
	if sc.mode != "decoded" {
		return decoded
	}
	kept := flow.OrderedMap(decoded, b.Name+"-cache-put", 1, func(ctx context.Context, s *tensor.Sample) (*tensor.Sample, error) {
		// The sample travels on as it is (the graph releases it downstream).
		if _, err := sc.c.Put(ctx, s.Key, sc.sig, s.Tensor.U8); err != nil {
			return nil, err
		}
		return s, nil
	})
	sc.mu.Lock()
	hits := sc.hits
	sc.hits = nil
	sc.mu.Unlock()
	if len(hits) == 0 {
		return kept
	}
	shape := sc.shape
	cached := hitSource(b.Graph, b.Name+"-cache", sc, hits, sc.bytes, func(key string, data []byte) *tensor.Sample {
		return &tensor.Sample{Key: key, Label: labelOf(key), Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: shape, U8: data}}
	})
	return flow.Merge([]flow.Stream[*tensor.Sample]{kept, cached}, b.Name+"-cache-merge")
}

// putEncoded keeps a file's bytes read from disk (encoded; a hit is not kept again).
func (sc *sampleCache) putEncoded(s *source.Sample, data []byte) {
	if sc == nil || sc.mode != "encoded" || fromCache(s) {
		return
	}
	_, _ = sc.c.Put(context.Background(), s.Key, sc.sig, data) // a full cache keeps what it has
}

// hitSource adds a source that serves hits from the cache. Entries the kernel
// reclaimed since the split are kept in late for a read pass.
func hitSource[T any](g *flow.Graph, name string, sc *sampleCache, hits []string, size int64, make func(key string, data []byte) T) flow.Stream[T] {
	return flow.Source(g, name, func(ctx context.Context, out *flow.Emitter[T]) error {
		for _, key := range hits {
			if err := out.Reserve(ctx, size); err != nil {
				return err
			}
			data, ok, err := sc.c.Get(ctx, key, sc.sig, nil)
			if err != nil {
				out.Cancel()
				return err
			}
			if !ok {
				out.Cancel()
				sc.mu.Lock()
				sc.late = append(sc.late, key)
				sc.mu.Unlock()
				continue
			}
			if err := out.Emit(ctx, make(key, data)); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodedHit turns cached file bytes back into a read sample. Its offset is -1:
// it was not read from a shard (see fromCache).
func encodedHit(key string, data []byte) *source.Sample {
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(key)), ".")
	return &source.Sample{Key: key, Fields: []source.Field{{Name: ext, Data: data}}, Shard: "sample-cache", Off: -1}
}

// fromCache says whether s was served by the cache rather than read.
func fromCache(s *source.Sample) bool { return s.Off < 0 }
