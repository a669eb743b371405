package imagefolder

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
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma"
	"github.com/psiflow/psiflow/uma/umacache"
)

// CacheMode says what the sample cache keeps between epochs.
type CacheMode string

const (
	// CacheOff keeps nothing: every epoch reads and decodes every sample.
	CacheOff CacheMode = "off"
	// CacheDecoded keeps each sample's tensor after Resize and CenterCrop, the
	// deterministic part of the pipeline: a hit skips read, decode and resize.
	CacheDecoded CacheMode = "decoded"
	// CacheEncoded keeps each file's bytes: a hit skips only the read (2–3×
	// smaller than decoded tensors for typical JPEGs).
	CacheEncoded CacheMode = "encoded"
)

// ParseCacheMode parses "off", "decoded" or "encoded".
func ParseCacheMode(s string) (CacheMode, error) {
	switch m := CacheMode(s); m {
	case CacheOff, CacheDecoded, CacheEncoded:
		return m, nil
	case "":
		return CacheOff, nil
	}
	return "", fmt.Errorf("cache mode %q: want off, decoded or encoded", s)
}

// defaultCacheShare is the share of the memory limit the cache may hold when
// Config.CacheMax is zero.
const defaultCacheShare = 0.5

// sampleCache is the pipeline's side of a umacache.Cache: what is cached, under
// which signature, and how hits become samples.
type sampleCache struct {
	mode    CacheMode
	c       *umacache.Cache
	sig     uint64
	labelOf func(string) int64
	u       *uma.UMA // owned when the pipeline made it for the cache alone
}

// newSampleCache makes the cache for cfg in u (nil: one of its own) and says so
// through hooks.Info.
func newSampleCache(cfg Config, u *uma.UMA, dec *decode.Decoder, labelOf func(string) int64, hooks Hooks) (*sampleCache, error) {
	if cfg.Cache == CacheOff || cfg.Cache == "" {
		return nil, nil
	}
	limit := cfg.CacheMax
	how := "Config.CacheMax"
	if limit == 0 {
		mem, src, err := cgroup.SelfMemoryLimit()
		if err != nil {
			return nil, fmt.Errorf("imagefolder: sizing the sample cache: %w", err)
		}
		limit = int64(float64(mem) * defaultCacheShare)
		how = fmt.Sprintf("half of the memory limit (%s)", src)
	}
	sc := &sampleCache{mode: cfg.Cache, labelOf: labelOf}
	if u == nil {
		var err error
		if u, err = uma.New(uma.Config{MemoryLimit: memory.SelfMemoryLimit}); err != nil {
			return nil, fmt.Errorf("imagefolder: sample cache: %w", err)
		}
		sc.u = u
	}
	chunk := int64(32 << 10)
	if cfg.Cache == CacheDecoded {
		// One entry per chunk: every tensor has the same size.
		page := int64(4096)
		chunk = (int64(3*cfg.Crop*cfg.Crop) + page - 1) / page * page
	}
	c, err := umacache.New(umacache.Config{UMA: u, Name: "sample-cache", ChunkBytes: chunk, MaxBytes: max(limit, chunk)})
	if err != nil {
		sc.close()
		return nil, fmt.Errorf("imagefolder: sample cache: %w", err)
	}
	sc.c = c
	sc.sig = xxh3.HashString(fmt.Sprintf("%s|resize=%d|crop=%d|layout=CHW|jpeg=%s", cfg.Cache, cfg.Resize, cfg.Crop, dec.Backend()))
	hooks.info("sample cache: %s samples in preemptible memory, up to %s (%s); given back first under pressure", cfg.Cache, bytesize.Human(limit), how)
	if hooks.OnCache != nil {
		hooks.OnCache(c)
	}
	return sc, nil
}

func (sc *sampleCache) close() error {
	if sc == nil {
		return nil
	}
	var err error
	if sc.c != nil {
		err = sc.c.Close()
	}
	if sc.u != nil {
		err = errors.Join(err, sc.u.Close())
	}
	return err
}

// split divides an epoch's paths into those the cache holds now and those to read.
func (sc *sampleCache) split(paths []string) (hits, misses []string) {
	for _, p := range paths {
		if sc.c.Contains(p, sc.sig) {
			hits = append(hits, p)
		} else {
			misses = append(misses, p)
		}
	}
	return hits, misses
}

// put keeps a decoded sample's tensor (CacheDecoded).
func (sc *sampleCache) put(ctx context.Context, s *tensor.Sample) error {
	_, err := sc.c.Put(ctx, s.Key, sc.sig, s.Tensor.U8)
	return err
}

// putEncoded keeps a file's bytes (CacheEncoded).
func (sc *sampleCache) putEncoded(key string, data []byte) error {
	_, err := sc.c.Put(context.Background(), key, sc.sig, data)
	return err
}

// hitSource adds a source that serves the paths hits from the cache. Entries the
// kernel reclaimed since split are appended to *late (under mu) for a read pass.
func hitSource[T any](g *flow.Graph, sc *sampleCache, hits []string, size int64, late *[]string, mu *sync.Mutex,
	make func(key string, data []byte) T) flow.Stream[T] {
	return flow.Source(g, "cache", func(ctx context.Context, out *flow.Emitter[T]) error {
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
				mu.Lock()
				*late = append(*late, key)
				mu.Unlock()
				continue
			}
			if err := out.Emit(ctx, make(key, data)); err != nil {
				return err
			}
		}
		return nil
	})
}

// decodedHit turns cached tensor bytes back into a sample of crop×crop CHW uint8.
func (sc *sampleCache) decodedHit(crop int) func(key string, data []byte) *tensor.Sample {
	return func(key string, data []byte) *tensor.Sample {
		return &tensor.Sample{Key: key, Label: sc.labelOf(key), Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: []int{3, crop, crop}, U8: data}}
	}
}

// encodedHit turns cached file bytes back into a read sample. Its offset is -1:
// it was not read from a shard (see fromCache).
func encodedHit(key string, data []byte) *source.Sample {
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(key)), ".")
	return &source.Sample{Key: key, Fields: []source.Field{{Name: ext, Data: data}}, Shard: "sample-cache", Off: -1}
}

// fromCache says whether s was served by the cache rather than read.
func fromCache(s *source.Sample) bool { return s.Off < 0 }

// tapPut stores every decoded sample passing by.
func tapPut(sc *sampleCache, in flow.Stream[*tensor.Sample]) flow.Stream[*tensor.Sample] {
	// The sample travels on as it is (the graph releases it downstream).
	return flow.OrderedMap(in, "cache-put", 1, func(ctx context.Context, s *tensor.Sample) (*tensor.Sample, error) {
		if err := sc.put(ctx, s); err != nil {
			return nil, err
		}
		return s, nil
	})
}
