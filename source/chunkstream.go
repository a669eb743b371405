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
			buf, err := Admit(ctx, ra.gate, ra.pool, n)
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
