package source

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
)

// TarShards is a dataset of tar files in WebDataset layout: consecutive
// members whose paths share a key (the path up to the first dot of the base
// name) form one sample, each member a field named by the rest of the base
// name ("0001.jpg" and "0001.cls" are fields "jpg" and "cls" of sample "0001").
type TarShards struct {
	paths []string
}

// NewTar returns a dataset of the given tar shards in the given order.
func NewTar(paths []string) *TarShards { return &TarShards{paths: slices.Clone(paths)} }

// TarGlob returns a dataset of the tar shards matching patterns (each sorted).
func TarGlob(patterns ...string) (*TarShards, error) {
	f, err := Glob(patterns...)
	if err != nil {
		return nil, err
	}
	return &TarShards{paths: f.paths}, nil
}

// Paths returns the shards in their base order.
func (d *TarShards) Paths() []string { return slices.Clone(d.paths) }

// SplitKey splits a member path into its sample key and field name.
func SplitKey(name string) (key, field string) {
	dir, base := path.Split(name)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		return dir + base[:i], base[i+1:]
	}
	return name, ""
}

// Samples starts an epoch over the shards for one rank. Shards are streamed
// one at a time in chunks of ChunkSize by a read-ahead goroutine with up to
// min(QueueDepth, 8) reads in flight, each admitted by the Gate, into the
// iterator's own registered chunk pool; fields are copied out of the chunks
// into off-heap slots of 256 KiB (fields under 4 KiB or over a slot go to the
// Go heap), or into Options.Buffers when set, and charged to the Budget when
// Next returns the sample. With ShuffleBuffer > 0 the
// buffer holds that many samples' bytes (not charged to the Budget). Next,
// Position and Close must be called from one goroutine.
func (d *TarShards) Samples(opts Options) (Iterator[*Sample], error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	shards, err := r.rankShards(len(d.paths))
	if err != nil {
		return nil, err
	}
	depth := min(r.Reader.QueueDepth, 8)
	// Chunks always come from the iterator's own pool, registered with its
	// ring: in flight, queued for the parser and parsed, 2×depth+2 slots never
	// run out.
	pool, err := NewPool(2*depth+2, r.ChunkSize)
	if err != nil {
		return nil, err
	}
	ropts := r.Reader
	ropts.Buffers = pool
	reader, err := NewReader(ropts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	it := &tarIter{d: d, r: r, reader: reader, pool: pool, depth: depth, shards: shards, skip: newSkipper(r)}
	if r.Buffers == nil {
		// Fields are copied into off-heap slots (no zeroing, no GC work); the
		// pool overflows rather than wait, since samples are held downstream.
		fp, err := NewPool(max(r.ShuffleBuffer, 0)+64, fieldSlot)
		if err != nil {
			pool.Close()
			reader.Close()
			return nil, err
		}
		fp.SetOverflow(true)
		it.fieldPool = fp
		it.fields = fp
	} else {
		it.fields = r.Buffers
	}
	it.src = r.sampleRNG()
	if p := r.Resume; p != nil {
		it.consumed = p.Next
		it.shard, it.offset = p.Shard, p.Offset
		if len(p.RNG) > 0 {
			if err := it.src.UnmarshalBinary(p.RNG); err != nil {
				it.Close()
				return nil, fmt.Errorf("source: resume position: shuffle state: %w", err)
			}
		}
		for _, ref := range p.Pending {
			s, err := it.readRef(context.Background(), ref)
			if err != nil {
				it.Close()
				return nil, fmt.Errorf("source: resume position: %w", err)
			}
			it.buf = append(it.buf, pending{s, ref})
		}
	}
	it.rng = rand.New(it.src)
	return it, nil
}

type pending struct {
	s   *Sample
	ref Ref
}

// fieldSlot is the slot size of a tar iterator's field pool; smaller fields
// than heapField and larger ones than a slot go to the Go heap.
const (
	fieldSlot = 256 << 10
	heapField = 4 << 10
)

type tarIter struct {
	d         *TarShards
	r         resolved
	reader    Reader
	pool      *Pool
	fieldPool *Pool
	fields    BufferProvider
	depth     int
	shards    []int
	skip      skipper

	shard  int   // index in shards of the shard being streamed
	offset int64 // where the next sample of that shard starts
	stream *chunkStream
	revoke *revokeAhead // the chunk pool's registration given back at a pause (one per iterator)
	tr     *tar.Reader
	ahead  *member // first member of the next sample, already read
	// deferred is an error met after the members of the sample before it:
	// that sample is returned first, the error by the next read.
	deferred error
	ended    bool  // the stream's end was seen (marker, or a resync found no header)
	lost     int64 // bytes of shards passed over by skips

	buf      []pending
	src      *rand.PCG
	rng      *rand.Rand
	consumed int64
	err      error
	closed   bool
}

type member struct {
	key, field string
	start, end int64 // header start, padded data end
	data       []byte
	buf        Buffer // holds data when it is off-heap
}

func (it *tarIter) Next(ctx context.Context) (*Sample, error) {
	if it.closed {
		return nil, ErrClosed
	}
	if it.err != nil {
		return nil, it.err
	}
	size := it.r.ShuffleBuffer
	for {
		p, err := it.readSample(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				it.err = err
				return nil, err
			}
			// The samples from it.offset to the end of the shard are lost.
			sk := Skipped{Path: it.d.paths[it.shards[it.shard]], What: "the rest of the shard", Off: it.offset, Lost: -1}
			if it.offset == 0 {
				sk.What = "the shard"
			}
			if it.stream != nil {
				sk.Lost = max(0, it.stream.f.Size-it.offset)
			}
			it.closeStream()
			it.shard++
			it.offset = 0
			it.consumed++
			if errors.Is(err, ErrTooManySkips) {
				it.err = err
				return nil, err
			}
			if serr := it.skip.handle(err, sk); serr != nil {
				it.err = serr
				return nil, serr
			}
			continue
		}
		if size <= 1 {
			return it.emit(ctx, p)
		}
		if len(it.buf) < size {
			it.buf = append(it.buf, p)
			continue
		}
		j := it.rng.IntN(size)
		out := it.buf[j]
		it.buf[j] = p
		return it.emit(ctx, out)
	}
	if len(it.buf) == 0 {
		return nil, io.EOF
	}
	j := it.rng.IntN(len(it.buf))
	out := it.buf[j]
	it.buf[j] = it.buf[len(it.buf)-1]
	it.buf[len(it.buf)-1] = pending{}
	it.buf = it.buf[:len(it.buf)-1]
	return it.emit(ctx, out)
}

func (it *tarIter) emit(ctx context.Context, p pending) (*Sample, error) {
	if it.r.Budget != nil && p.s.bytes > 0 {
		if err := it.r.Budget.Acquire(ctx, p.s.bytes); err != nil {
			p.s.Release()
			it.err = err // the sample is lost to this iterator; resume from a Position taken before
			return nil, err
		}
		p.s.budget = it.r.Budget
	}
	it.consumed++
	return p.s, nil
}

// readSample reads the next sample of the stream, opening shards as needed; io.EOF when none is left.
func (it *tarIter) readSample(ctx context.Context) (pending, error) {
	for {
		if it.shard >= len(it.shards) {
			return pending{}, io.EOF
		}
		if err := it.deferred; err != nil {
			it.deferred = nil
			return pending{}, err
		}
		if it.stream == nil {
			if err := it.openStream(ctx); err != nil {
				return pending{}, err
			}
		}
		it.stream.ctx = ctx
		first := it.ahead
		it.ahead = nil
		if first == nil {
			m, err := it.nextMember()
			if err == io.EOF {
				it.closeStream()
				it.shard++
				it.offset = 0
				continue
			}
			if err != nil {
				return pending{}, err
			}
			first = m
		}
		shardPath := it.d.paths[it.shards[it.shard]]
		s := &Sample{Key: first.key, Shard: shardPath, Off: first.start, Index: tarIndex(it.shards[it.shard], first.start), Epoch: int64(it.r.Epoch)}
		s.add(first)
		ref := Ref{Shard: it.shards[it.shard], Off: first.start, End: first.end}
		for {
			m, err := it.nextMember()
			if err == io.EOF {
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					s.Release()
					return pending{}, err
				}
				// The members read so far are whole: deliver them, then the error.
				it.deferred = err
				break
			}
			if m.key != s.Key {
				it.ahead = m
				break
			}
			s.add(m)
			ref.End = m.end
		}
		it.offset = ref.End
		if it.ahead != nil {
			it.offset = it.ahead.start
		}
		return pending{s, ref}, nil
	}
}

func (it *tarIter) openStream(ctx context.Context) error {
	p := it.d.paths[it.shards[it.shard]]
	f, err := it.reader.Open(p)
	if err != nil {
		return err
	}
	if it.revoke == nil {
		it.revoke = &revokeAhead{}
		if rev, ok := it.r.Buffers.(Revocable); ok {
			if fr, ok := it.reader.(fixedReader); ok && fr.FixedBuffers() {
				it.revoke.revoked = rev.Revoked()
			}
		}
	}
	it.stream = newChunkStream(ctx, readAhead{reader: it.reader, pool: it.pool, depth: it.depth, chunkSize: it.r.ChunkSize, gate: it.r.Gate, revoke: it.revoke}, f, it.offset)
	it.tr = tar.NewReader(it.stream)
	it.ended = false
	return nil
}

// add appends m as a field of s, which takes over its buffer.
func (s *Sample) add(m *member) {
	s.Fields = append(s.Fields, Field{Name: m.field, Data: m.data})
	s.bytes += int64(len(m.data))
	if m.buf != nil {
		s.bufs = append(s.bufs, m.buf)
	}
}

func (it *tarIter) closeStream() {
	if it.ahead != nil && it.ahead.buf != nil {
		it.ahead.buf.Release()
	}
	if it.stream != nil {
		it.stream.close()
		it.stream, it.tr, it.ahead = nil, nil, nil
	}
}

// errNoEnd is the cause when a shard ends without its end-of-archive marker
// (two zero blocks): it was truncated, possibly exactly at a member boundary.
var errNoEnd = errors.New("missing end-of-archive marker (two zero blocks): the shard is truncated")

// nextMember reads the next regular member of the open stream. Sizes in
// headers are checked against the bytes left in the shard and against
// MaxMember before anything is allocated. With Skip, a member over MaxMember
// is dropped alone and a corrupt header is skipped by resynchronising on the
// next valid header; both count as skips and add to LostBytes.
func (it *tarIter) nextMember() (*member, error) {
	for {
		start := it.stream.pos // the previous member was read (or discarded) to its end
		start = (start + 511) / 512 * 512
		h, err := it.tr.Next()
		if err == io.EOF {
			if it.stream.pos-start < 1024 && !it.ended {
				// archive/tar ends on a clean end of file as well as on the
				// marker: only the marker proves the shard is whole.
				return nil, it.tarError(start, errNoEnd)
			}
			it.ended = true // archive/tar repeats io.EOF without reading again
			return nil, io.EOF
		}
		if err != nil {
			if left := it.stream.f.Size - start; errors.Is(err, io.ErrUnexpectedEOF) && left < 512 {
				err = fmt.Errorf("the shard ends %d bytes into a member's 512-byte header: it is truncated", left)
			}
			if it.stream.err != nil || it.stream.ctx.Err() != nil {
				return nil, it.tarError(start, err)
			}
			if rerr := it.resync(start, start+512, "", it.tarError(start, err)); rerr != nil {
				return nil, rerr
			}
			continue
		}
		dataStart := it.stream.pos
		if left := it.stream.f.Size - dataStart; h.Size > left {
			err := it.tarError(start, fmt.Errorf("member %q declares %d bytes but only %d are left in the shard (%d bytes): corrupt header or truncated shard", h.Name, h.Size, left, it.stream.f.Size))
			if rerr := it.resync(start, dataStart, h.Name, err); rerr != nil {
				return nil, rerr
			}
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > it.r.MaxMember {
			err := it.tarError(start, fmt.Errorf("member %q is %d bytes, over the limit of %d (Options.MaxMember)", h.Name, h.Size, it.r.MaxMember))
			if serr := it.skipAllow(err); serr != nil {
				return nil, serr
			}
			if _, err := io.CopyN(io.Discard, it.tr, h.Size); err != nil {
				return nil, it.tarError(it.stream.pos, fmt.Errorf("member %q: %w", h.Name, err))
			}
			n := (h.Size+511)/512*512 + (dataStart - start)
			it.lost += n
			it.skip.told(&Skipped{Path: it.stream.f.Path, What: memberWhat(h.Name), Off: start, Lost: n, Err: err})
			continue
		}
		m := &member{start: start}
		if h.Size < heapField || (it.fieldPool != nil && h.Size > fieldSlot) {
			m.data = make([]byte, h.Size)
		} else {
			b, err := it.fields.Alloc(it.stream.ctx, int(h.Size))
			if err != nil {
				return nil, err
			}
			m.buf, m.data = b, b.Bytes()
		}
		if _, err := io.ReadFull(it.tr, m.data); err != nil {
			if m.buf != nil {
				m.buf.Release()
			}
			return nil, it.tarError(it.stream.pos, fmt.Errorf("member %s: %w", h.Name, err))
		}
		m.key, m.field = SplitKey(h.Name)
		m.end = dataStart + (h.Size+511)/512*512
		return m, nil
	}
}

func (it *tarIter) tarError(off int64, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	var re *ReadError
	if errors.As(err, &re) {
		return err
	}
	return &ReadError{Op: "tar", Path: it.d.paths[it.shards[it.shard]], Off: off, Err: err}
}

func (it *tarIter) Skipped() int64 { return it.skip.skipped }

// LostBytes returns the bytes of shards passed over by skips: members over
// MaxMember and the stretches skipped to resynchronise after a corrupt header.
func (it *tarIter) LostBytes() int64 { return it.lost }

func (it *tarIter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.closeStream()
	for _, p := range it.buf {
		p.s.Release()
	}
	it.buf = nil
	err := it.reader.Close()
	if it.pool != nil {
		it.pool.Close()
	}
	if it.fieldPool != nil {
		it.fieldPool.Close() // unmapped once the samples handed out are released
	}
	return err
}
