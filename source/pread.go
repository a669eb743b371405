package source

import (
	"context"
	"errors"
	"io"
)

// preadReader performs queued reads synchronously in Reap with pread(2)
// (os.File.ReadAt, which retries EINTR and short reads until EOF).
type preadReader struct {
	opts   ReaderOptions
	queue  []Request
	head   int
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

func (r *preadReader) Reap(ctx context.Context, out []Completion, wait int) (int, error) {
	if err := ctx.Err(); err != nil && r.InFlight() > 0 && wait > 0 {
		return 0, context.Cause(ctx)
	}
	n := 0
	for n < len(out) && r.head < len(r.queue) {
		req := r.queue[r.head]
		r.queue[r.head] = Request{}
		r.head++
		out[n] = r.read(req)
		n++
	}
	if r.head == len(r.queue) {
		r.queue, r.head = r.queue[:0], 0
	}
	return n, nil
}

func (r *preadReader) read(req Request) Completion {
	c := Completion{Request: req}
	defer func() {
		if req.Permit != nil {
			req.Permit.Release()
		}
	}()
	fd, buf, err := req.File.descriptorFor(req.Off, req.Buf)
	if err != nil {
		c.Err = err
		return c
	}
	n, err := fd.ReadAt(buf, req.Off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	c.N = min(n, len(req.Buf))
	if err != nil {
		c.Err = &ReadError{Op: "pread", Path: req.File.Path, Off: req.Off + int64(n), Err: unwrapPathError(err)}
		return c
	}
	req.File.advance(req.Off + int64(c.N))
	return c
}

// Close drops the reads still queued (they never started), releasing their permits.
func (r *preadReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	for _, req := range r.queue[r.head:] {
		if req.Permit != nil {
			req.Permit.Release()
		}
	}
	r.queue, r.head = nil, 0
	return nil
}
