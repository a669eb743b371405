package source

import (
	"context"
	"io"
)

// readAhead is what a [chunkStream] reads with: the reader, the pool its chunks
// come from (sized so the read-ahead never waits for a buffer the parser would
// have to free), how many chunks it keeps in flight, their size, and the gate
// each read is admitted by (nil: none).
type readAhead struct {
	reader    Reader
	pool      *Pool
	depth     int
	chunkSize int
	gate      Gate
	// revoke, when set, gives the pool's registration back during a pause
	// (the dataset's Buffers are [Revocable]): see [revokeAhead].
	revoke *revokeAhead
}

// revokeAhead is a tar iterator's answer to a [Revocable] provider's
// revocation (a paused loader giving its pinned memory back): its own chunk
// pool is registered with its ring, pinned and charged until unregistered, and
// the pause would hold it for as long as it lasts. Once revoked closes, the
// read-ahead lands its reads in flight, the ring unregisters the pool and its
// free slots go back to the kernel (their pages zeroed); reads go on into the
// same pool without fixed buffers. Once per iterator (done).
type revokeAhead struct {
	revoked <-chan struct{}
	done    bool
}

// revokedNow reports whether the provider revoked and the pool is still
// registered.
func (v *revokeAhead) revokedNow() bool {
	if v == nil || v.done || v.revoked == nil {
		return false
	}
	select {
	case <-v.revoked:
		return true
	default:
		return false
	}
}

// chunkStream is an io.Reader over a file read in chunks through a Reader by a
// goroutine of its own, several chunks ahead: the kernel's copies (inline for
// cached data) run on another core than the parser (the tar iterator's). Its
// reads are admitted by the gate one by one, and every chunk goes back to the
// pool, also when the stream is closed with reads in flight.
type chunkStream struct {
	ctx    context.Context // the caller's, set before each Read by its user
	ra     readAhead
	f      *File
	pos    int64       // bytes consumed by the parser
	ready  chan *chunk // completed chunks in file order; closed after the last or an error
	cur    *chunk
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

type chunk struct {
	off  int64
	buf  Buffer
	data []byte
	done bool
	err  error
}

// newChunkStream starts reading f from off ahead of the parser, with ra.
func newChunkStream(ctx context.Context, ra readAhead, f *File, off int64) *chunkStream {
	rctx, cancel := context.WithCancel(context.Background())
	c := &chunkStream{ctx: ctx, ra: ra, f: f, pos: off, ready: make(chan *chunk, ra.depth), cancel: cancel, done: make(chan struct{})}
	go c.run(rctx, off)
	return c
}

func (c *chunkStream) Read(p []byte) (int, error) {
	for {
		if c.err != nil {
			return 0, c.err
		}
		if c.cur != nil {
			if len(c.cur.data) > 0 {
				n := copy(p, c.cur.data)
				c.cur.data = c.cur.data[n:]
				c.pos += int64(n)
				return n, nil
			}
			c.cur.buf.Release()
			c.cur = nil
		}
		select {
		case ch, ok := <-c.ready:
			if !ok {
				return 0, io.EOF
			}
			if ch.err != nil {
				if ch.buf != nil {
					ch.buf.Release()
				}
				c.err = ch.err
				return 0, ch.err
			}
			c.cur = ch
		case <-c.ctx.Done():
			return 0, context.Cause(c.ctx)
		}
	}
}

// run submits chunk reads (each admitted by the gate), reaps them and hands
// them to the parser in file order.
func (c *chunkStream) run(ctx context.Context, next int64) {
	ra := c.ra
	var queue []*chunk
	defer func() {
		for ra.reader.InFlight() > 0 { // reads in flight must land before their buffers go back
			if err := c.reap(context.Background()); err != nil {
				break
			}
		}
		for _, ch := range queue {
			if ch.buf != nil {
				ch.buf.Release()
			}
		}
		close(c.ready)
		close(c.done)
	}()
	for {
		if ra.revoke.revokedNow() {
			c.unregister(ctx)
		}
		for len(queue) > 0 && queue[0].done {
			h := queue[0]
			select {
			case c.ready <- h:
				queue = queue[1:]
			case <-ctx.Done():
				return
			}
			if h.err != nil {
				return
			}
		}
		if next >= c.f.Size && len(queue) == 0 {
			return
		}
		for len(queue) < ra.depth && next < c.f.Size {
			n := int(min(int64(ra.chunkSize), c.f.Size-next))
			buf, err := c.admit(ctx, n)
			if err == nil {
				ch := &chunk{off: next, buf: buf}
				if err = ra.reader.Submit(Request{File: c.f, Off: next, Buf: buf.Bytes(), Permit: ra.gate, Tag: ch}); err == nil {
					queue = append(queue, ch)
					next += int64(n)
					continue
				}
				buf.Release()
				if ra.gate != nil {
					ra.gate.Release()
				}
			}
			if ctx.Err() != nil {
				return
			}
			queue = append(queue, &chunk{off: next, done: true, err: err})
			next = c.f.Size
		}
		if ra.reader.InFlight() > 0 {
			if err := c.reap(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				for _, ch := range queue {
					if !ch.done {
						// The reader failed and the kernel may still write into
						// this buffer: keep it out of the pool.
						ch.done, ch.err, ch.buf = true, err, nil
					}
				}
			}
		}
	}
}

// admit admits one chunk read and takes its buffer ([Admit]). While the pool is
// registered and the provider may revoke, a revocation ends the wait (the gate
// of a paused loader holds it there): the reads in flight land, the pool is
// unregistered (unregister), and the wait goes on.
func (c *chunkStream) admit(ctx context.Context, n int) (Buffer, error) {
	v := c.ra.revoke
	if v == nil || v.done || v.revoked == nil {
		return Admit(ctx, c.ra.gate, c.ra.pool, n)
	}
	actx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-v.revoked:
			cancel()
		case <-actx.Done():
		}
	}()
	buf, err := Admit(actx, c.ra.gate, c.ra.pool, n)
	cancel()
	if err == nil || ctx.Err() != nil || !v.revokedNow() {
		return buf, err
	}
	c.unregister(ctx)
	return Admit(ctx, c.ra.gate, c.ra.pool, n)
}

// unregister lands the reads in flight, unregisters the ring's fixed buffers
// (the chunk pool) and gives the pool's free slots back (revokeAhead).
func (c *chunkStream) unregister(ctx context.Context) {
	for c.ra.reader.InFlight() > 0 {
		if err := c.reap(ctx); err != nil {
			return // the reads end with the stream; the pool stays registered
		}
	}
	c.ra.revoke.done = true
	if fr, ok := c.ra.reader.(fixedReader); ok {
		if _, err := fr.UnregisterFixed(); err != nil {
			return
		}
	}
	_, _ = c.ra.pool.ReleaseFree()
}

func (c *chunkStream) reap(ctx context.Context) error {
	var comps [8]Completion
	n, err := c.ra.reader.Reap(ctx, comps[:], 1)
	if err != nil {
		return err
	}
	for _, cp := range comps[:n] {
		ch := cp.Tag.(*chunk)
		ch.done, ch.err, ch.data = true, cp.Err, cp.Buf[:cp.N]
		if cp.Err == nil && cp.N < len(cp.Buf) {
			ch.err = &ReadError{Op: "read", Path: c.f.Path, Off: ch.off + int64(cp.N), Err: io.ErrUnexpectedEOF}
		}
	}
	return nil
}

// close stops the read-ahead, waits for its goroutine and gives every chunk back.
func (c *chunkStream) close() {
	c.cancel()
	for ch := range c.ready {
		if ch.buf != nil {
			ch.buf.Release()
		}
	}
	<-c.done
	if c.cur != nil {
		c.cur.buf.Release()
		c.cur = nil
	}
	c.f.Close()
}
