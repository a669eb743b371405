package source

import (
	"context"
	"errors"
	"syscall"
)

// preadChunk is the most one pread(2) asks for: a large read is made in
// pieces, and a cancelled context is seen between them (at 1 GB/s, every
// few milliseconds). A multiple of [Align], so O_DIRECT reads stay aligned.
const preadChunk = 4 << 20

// maxRetries bounds the retries of a read that keeps failing with EINTR or
// EAGAIN (both backends).
const maxRetries = 100

// preadReader performs queued reads synchronously in Reap with pread(2), in
// pieces of at most preadChunk bytes, retrying EINTR and EAGAIN (up to
// maxRetries in a row) and continuing short reads until end of file.
type preadReader struct {
	opts   ReaderOptions
	queue  []Request
	head   int
	done   int // bytes of queue[head] already read (a read cut by a cancelled Reap)
	closed bool
}

func newPreadReader(opts ReaderOptions) *preadReader { return &preadReader{opts: opts} }

func (r *preadReader) Backend() Backend { return BackendPread }

func (r *preadReader) Open(path string) (*File, error) {
	if r.closed {
		return nil, ErrClosed
	}
	return openFile(path, &r.opts)
}

func (r *preadReader) Submit(req Request) error {
	if r.closed {
		return ErrClosed
	}
	if req.File == nil || req.File.f == nil {
		return errors.New("source: submit on a nil or closed file")
	}
	r.queue = append(r.queue, req)
	return nil
}

func (r *preadReader) InFlight() int { return len(r.queue) - r.head }

// Reap performs up to len(out) queued requests, in order, into out (a caller
// that wants each read handed on as soon as it is done passes a slice of
// one). A cancelled ctx stops it between two pieces of a read: it returns
// what completed, or ctx's error when nothing did; the cut read goes on
// where it stopped at the next Reap.
func (r *preadReader) Reap(ctx context.Context, out []Completion, wait int) (int, error) {
	if err := ctx.Err(); err != nil && r.InFlight() > 0 && wait > 0 {
		return 0, context.Cause(ctx)
	}
	n := 0
	for n < len(out) && r.head < len(r.queue) {
		c, ok := r.read(ctx, r.queue[r.head])
		if !ok {
			if n == 0 {
				return 0, context.Cause(ctx)
			}
			break
		}
		r.queue[r.head] = Request{}
		r.head++
		r.done = 0
		out[n] = c
		n++
	}
	if r.head == len(r.queue) {
		r.queue, r.head = r.queue[:0], 0
	}
	return n, nil
}

// read performs req from r.done on; ok is false when ctx ended first (the
// progress stays in r.done).
func (r *preadReader) read(ctx context.Context, req Request) (c Completion, ok bool) {
	c = Completion{Request: req}
	fd, buf, err := req.File.descriptorFor(req.Off, req.Buf)
	if err != nil {
		c.Err = err
		r.releasePermit(req)
		return c, true
	}
	direct := fd == req.File.f && req.File.direct
	retries := 0
	for r.done < len(buf) {
		if r.done > 0 && ctx.Err() != nil {
			return c, false
		}
		piece := buf[r.done:min(len(buf), r.done+preadChunk)]
		var k int
		var err error
		if n, errno := r.opts.fault(req.File.Path, req.Off+int64(r.done), len(piece), direct); errno != 0 {
			err = errno
		} else {
			k, err = pread(fd, piece[:n], req.Off+int64(r.done))
		}
		if (errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN)) && retries < maxRetries {
			retries++
			continue
		}
		if err != nil {
			c.N = min(r.done, len(req.Buf))
			c.Err = &ReadError{Op: "pread", Path: req.File.Path, Off: req.Off + int64(r.done), Err: err}
			r.releasePermit(req)
			return c, true
		}
		retries = 0
		if k == 0 {
			break // end of file
		}
		r.done += k
		if direct && r.done%Align != 0 {
			break // an O_DIRECT read ends short only at end of file
		}
	}
	c.N = min(r.done, len(req.Buf))
	req.File.advance(req.Off + int64(c.N))
	r.releasePermit(req)
	return c, true
}

func (r *preadReader) releasePermit(req Request) {
	if req.Permit != nil {
		req.Permit.Release()
	}
}

// Close drops the reads still queued (they never started, or were cut by a
// cancelled Reap), releasing their permits.
func (r *preadReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	for _, req := range r.queue[r.head:] {
		r.releasePermit(req)
	}
	r.queue, r.head, r.done = nil, 0, 0
	return nil
}
