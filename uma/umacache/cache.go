package umacache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/psiflow/psiflow/uma"
)

// Config configures a [Cache].
type Config struct {
	// UMA owns the cache's arena (required).
	UMA *uma.UMA
	// Name names the arena (in UMA's ledger and metrics) and the cache in errors.
	Name string
	// ChunkBytes is the unit of allocation, a multiple of the page size; an entry
	// takes as many chunks as its bytes need. Zero: UMA's page size rounded up to
	// 64 KiB.
	ChunkBytes int64
	// MaxBytes bounds the arena (its address space; only written chunks are
	// charged). [Cache.SetLimit] can lower what is held below it.
	MaxBytes int64
}

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses int64 // Get calls that served an entry / found none
	Reclaimed    int64 // entries found taken by the kernel (each was also a miss)
	Evicted      int64 // entries dropped by the cache itself (limit, Shed)
	Puts         int64 // entries stored
	TooBig       int64 // Put calls refused: the entry is larger than the limit
	Entries      int64 // entries held now
	Bytes        int64 // bytes of the chunks held now
	Limit        int64 // the current limit in bytes
}

type entry struct {
	key     string
	sig     uint64
	n       int
	chunks  []int
	elem    *list.Element // in lru, front = most recent
	readers int
}

// Cache is a key → bytes cache in one preemptible UMA arena. It is safe for
// concurrent use.
type Cache struct {
	name  string
	arena *uma.Arena
	chunk int64

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List
	free    []int // chunk indices not in use
	limit   int   // chunks the cache may hold
	held    int   // chunks held by entries
	stats   Stats
	closed  bool
}

// New creates a cache with its own arena in cfg.UMA.
func New(cfg Config) (*Cache, error) {
	if cfg.UMA == nil {
		return nil, errors.New("umacache: no UMA given")
	}
	if cfg.Name == "" {
		cfg.Name = "sample-cache"
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = 64 << 10
	}
	if cfg.MaxBytes < cfg.ChunkBytes {
		return nil, fmt.Errorf("umacache %q: max bytes %d: must hold at least one chunk of %d bytes", cfg.Name, cfg.MaxBytes, cfg.ChunkBytes)
	}
	size := cfg.MaxBytes / cfg.ChunkBytes * cfg.ChunkBytes
	a, err := cfg.UMA.NewArena(cfg.Name, size, uma.ArenaOptions{ChunkSize: cfg.ChunkBytes, PreemptWithoutSource: true, NoHugePages: true})
	if err != nil {
		return nil, fmt.Errorf("umacache %q: %w", cfg.Name, err)
	}
	c := &Cache{name: cfg.Name, arena: a, chunk: cfg.ChunkBytes, entries: map[string]*entry{}, lru: list.New(), limit: a.Chunks()}
	for i := a.Chunks() - 1; i >= 0; i-- {
		c.free = append(c.free, i)
	}
	return c, nil
}

// ChunkBytes is the cache's unit of allocation.
func (c *Cache) ChunkBytes() int64 { return c.chunk }

// MaxBytes is the most the cache can hold (its arena's size).
func (c *Cache) MaxBytes() int64 { return c.arena.Size() }

// Contains says whether key is cached with signature sig. It does not check the
// bytes: a later Get may still find them reclaimed.
func (c *Cache) Contains(key string, sig uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return ok && e.sig == sig
}

// Put stores a copy of data under key with signature sig (what produced the
// bytes: a different signature is a different entry) and marks its chunks
// preemptible. It makes room by evicting the coldest entries; it returns false,
// storing nothing, when data is larger than the whole limit. An existing entry
// for key is replaced.
func (c *Cache) Put(ctx context.Context, key string, sig uint64, data []byte) (bool, error) {
	need := int((int64(len(data)) + c.chunk - 1) / c.chunk)
	if need == 0 {
		need = 1
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false, fmt.Errorf("umacache %q: put after Close", c.name)
	}
	if old, ok := c.entries[key]; ok && old.readers == 0 {
		c.dropLocked(old)
		c.free = append(c.free, old.chunks...)
	} else if ok {
		c.mu.Unlock()
		return true, nil // being read: keep the old bytes
	}
	if need > c.limit {
		c.stats.TooBig++
		c.mu.Unlock()
		return false, nil
	}
	// Make room: the coldest entries' chunks are reused as they are (the write
	// overwrites them), not given back.
	for c.held+need > c.limit || len(c.free) < need {
		e := c.coldestLocked()
		if e == nil {
			c.mu.Unlock()
			return false, nil // everything is being read
		}
		c.dropLocked(e)
		c.free = append(c.free, e.chunks...)
		c.stats.Evicted++
	}
	chunks := append([]int(nil), c.free[len(c.free)-need:]...)
	c.free = c.free[:len(c.free)-need]
	c.held += need
	c.mu.Unlock()

	err := c.write(ctx, chunks, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || c.closed {
		c.free = append(c.free, chunks...)
		c.held -= need
		if err == nil {
			err = fmt.Errorf("umacache %q: closed during put", c.name)
		}
		return false, err
	}
	e := &entry{key: key, sig: sig, n: len(data), chunks: chunks}
	e.elem = c.lru.PushFront(e)
	c.entries[key] = e
	c.stats.Puts++
	return true, nil
}

// write copies data into the chunks (whole chunks, padded with zeros, so that a
// chunk whose old bytes the kernel took is simply overwritten) and marks them
// preemptible.
func (c *Cache) write(ctx context.Context, chunks []int, data []byte) error {
	var pad []byte
	for k, ch := range chunks {
		off := int64(ch) * c.chunk
		lo := int64(k) * c.chunk
		piece := data[min(lo, int64(len(data))):min(lo+c.chunk, int64(len(data)))]
		if int64(len(piece)) < c.chunk {
			if pad == nil {
				pad = make([]byte, c.chunk)
			}
			clear(pad[copy(pad, piece):])
			piece = pad
		}
		if err := c.arena.Write(ctx, off, piece); err != nil {
			return fmt.Errorf("umacache %q: %w", c.name, err)
		}
		if _, err := c.arena.MarkRangePreemptible(ctx, off, c.chunk); err != nil {
			return fmt.Errorf("umacache %q: %w", c.name, err)
		}
	}
	return nil
}

// Get appends the bytes cached under key with signature sig to dst[:0] and
// returns them with true. It returns false when there is no such entry or when
// the kernel reclaimed any of its chunks (the entry is then dropped and counted);
// bytes the kernel took are never returned.
func (c *Cache) Get(ctx context.Context, key string, sig uint64, dst []byte) ([]byte, bool, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok || e.sig != sig || c.closed {
		c.stats.Misses++
		c.mu.Unlock()
		return dst[:0], false, nil
	}
	e.readers++
	c.lru.MoveToFront(e.elem)
	c.mu.Unlock()

	dst = dst[:0]
	var err error
	reclaimed := false
	for k, ch := range e.chunks {
		off := int64(ch) * c.chunk
		l, lerr := c.arena.Lease(ctx, off, c.chunk, nil)
		if errors.Is(lerr, uma.ErrNoRehydrate) {
			reclaimed = true
			break
		}
		if lerr != nil {
			err = fmt.Errorf("umacache %q: entry %q: %w", c.name, key, lerr)
			break
		}
		n := min(int64(e.n)-int64(k)*c.chunk, c.chunk)
		dst = append(dst, l.Bytes()[:n]...)
		l.Release()
		if _, merr := c.arena.MarkRangePreemptible(ctx, off, c.chunk); merr != nil {
			err = fmt.Errorf("umacache %q: entry %q: %w", c.name, key, merr)
			break
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	e.readers--
	switch {
	case reclaimed:
		c.stats.Reclaimed++
		c.stats.Misses++
		if c.entries[key] == e {
			c.dropLocked(e)
			c.free = append(c.free, e.chunks...)
		}
		return dst[:0], false, nil
	case err != nil:
		return dst[:0], false, err
	}
	c.stats.Hits++
	return dst, true, nil
}

// coldestLocked returns the least recently used entry nobody is reading.
func (c *Cache) coldestLocked() *entry {
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*entry); e.readers == 0 {
			return e
		}
	}
	return nil
}

// dropLocked forgets e. The caller puts its chunks back on the free list, at
// once (a later Put overwrites them) or after giving their memory back.
func (c *Cache) dropLocked(e *entry) {
	delete(c.entries, e.key)
	c.lru.Remove(e.elem)
	c.held -= len(e.chunks)
}

// giveBack returns the chunks' memory to the kernel (MADV_DONTNEED) and only then
// puts them on the free list, so that no Put writes into a chunk being dropped. It
// returns the bytes given back.
func (c *Cache) giveBack(chunks []int) int64 {
	var freed int64
	for _, ch := range chunks {
		n, _ := c.arena.EvictRange(int64(ch)*c.chunk, c.chunk)
		freed += n
	}
	c.mu.Lock()
	if !c.closed {
		c.free = append(c.free, chunks...)
	}
	c.mu.Unlock()
	return freed
}

// Shed drops the coldest entries until at least want bytes were given back to the
// kernel (or nothing is left to drop) and returns the bytes given back.
func (c *Cache) Shed(want int64) int64 {
	c.mu.Lock()
	var chunks []int
	for int64(len(chunks))*c.chunk < want {
		e := c.coldestLocked()
		if e == nil {
			break
		}
		chunks = append(chunks, e.chunks...)
		c.dropLocked(e)
		c.stats.Evicted++
	}
	c.mu.Unlock()
	c.giveBack(chunks)
	return int64(len(chunks)) * c.chunk
}

// SetLimit bounds what the cache holds to bytes (at most its MaxBytes), dropping
// the coldest entries beyond it at once, and returns the limit in force.
func (c *Cache) SetLimit(bytes int64) int64 {
	c.mu.Lock()
	c.limit = int(min(max(bytes, 0)/c.chunk, int64(c.arena.Chunks())))
	var chunks []int
	for c.held > c.limit {
		e := c.coldestLocked()
		if e == nil {
			break
		}
		chunks = append(chunks, e.chunks...)
		c.dropLocked(e)
		c.stats.Evicted++
	}
	limit := int64(c.limit) * c.chunk
	c.mu.Unlock()
	c.giveBack(chunks)
	return limit
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = int64(len(c.entries))
	s.Bytes = int64(c.held) * c.chunk
	s.Limit = int64(c.limit) * c.chunk
	return s
}

// Close drops every entry and unmaps the arena. Gets and Puts in flight must have
// returned.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.entries, c.lru, c.free, c.held = map[string]*entry{}, list.New(), nil, 0
	c.mu.Unlock()
	return c.arena.Close()
}

// PageOut makes the kernel take the pages of about share of the cache's entries
// now, the least recently used first, as memory pressure would ([uma.Arena.PageOut]),
// without telling the cache: the next Get of each such entry finds the loss. It makes
// reclaim deterministic for tests and benchmarks, and returns the number of entries
// paged out.
func (c *Cache) PageOut(share float64) (int, error) {
	c.mu.Lock()
	want := int(share * float64(len(c.entries)))
	var chunks [][]int
	for el := c.lru.Back(); el != nil && len(chunks) < want; el = el.Prev() {
		chunks = append(chunks, el.Value.(*entry).chunks)
	}
	c.mu.Unlock()
	n := 0
	for _, chs := range chunks {
		paged := 0
		for _, ch := range chs {
			k, err := c.arena.PageOut(int64(ch)*c.chunk, c.chunk)
			if err != nil {
				return n, fmt.Errorf("umacache %q: %w", c.name, err)
			}
			paged += k
		}
		if paged > 0 {
			n++
		}
	}
	return n, nil
}

// Taken counts the entries of which the kernel has reclaimed at least one page, by
// mincore and without touching them; their next Get is a miss.
func (c *Cache) Taken() (int, error) {
	c.mu.Lock()
	var chunks [][]int
	for _, e := range c.entries {
		chunks = append(chunks, e.chunks)
	}
	c.mu.Unlock()
	n := 0
	for _, chs := range chunks {
		for _, ch := range chs {
			r, pages, err := c.arena.Resident(int64(ch)*c.chunk, c.chunk)
			if err != nil {
				return n, fmt.Errorf("umacache %q: %w", c.name, err)
			}
			if r < pages {
				n++
				break
			}
		}
	}
	return n, nil
}
