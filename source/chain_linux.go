//go:build linux

package source

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/internal/uring"
	"golang.org/x/sys/unix"
)

// Whole small files are read by path with one chained submission: an
// IORING_OP_OPENAT into a direct descriptor (a slot of the ring's file
// table, none in the process's), linked to the read from that slot. One
// io_uring_enter carries the chains of a whole batch, where a descriptor
// costs open, fstat, fcntl, read and close system calls. There is no close
// entry: the next open into the slot (the slot of the request id, reused by
// the next chain of that id only once this one has completed) replaces the
// file and drops it, and closing the ring drops the rest. A linked close
// cost a third completion and a task-work round trip after each read, which
// measured slower than separate calls (see docs/BENCHMARKS.md).
//
// What the chain cannot finish it hands to a descriptor of its own, opened
// the ordinary way (openRegular: non-blocking open, fstat, identity check
// against the stat of admission): a short read (the rest is read there), a
// read that failed with EINTR or EAGAIN (a file system without non-blocking
// reads answers EAGAIN), an open refused with EINVAL or EOPNOTSUPP (a file
// system that refuses O_DIRECT: later files of that device are chained
// buffered). Such reads come back marked viaFallback with the reason, so the
// dataset counts them ([ReadPaths]); nothing falls back silently.

// path returns the file a pending read reads.
func (p *pendingRead) path() string {
	if p.req.File != nil {
		return p.req.File.Path
	}
	return p.req.whole.path
}

// submitWhole queues a whole-file request: chained when the reader chains
// and the options allow, else on a descriptor opened now.
func (r *uringReader) submitWhole(req Request) error {
	w := req.whole
	direct := r.opts.Direct && !r.noDirect[w.id.dev]
	n := len(req.Buf)
	if direct {
		n = roundUp(len(req.Buf), Align)
		if n > cap(req.Buf) || !addrAligned(req.Buf) {
			direct = false
			n = len(req.Buf)
		}
	}
	chain := r.chains && (direct || !r.opts.DropCache) // DropCache needs a descriptor to fadvise
	for len(r.free) == 0 {
		if err := r.wait(context.Background(), 1); err != nil {
			return err
		}
	}
	id := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	p := &r.pending[id]
	*p = pendingRead{req: req, buf: req.Buf[:n], direct: direct, bufIdx: -1, used: true, via: viaChain}
	r.inflight++
	if !chain {
		p.via = viaSeparate
		r.separate(id, "")
		return r.failed
	}
	if r.opts.Faults != nil {
		if err := r.opts.Faults.Open(w.path); err != nil {
			r.complete(id, &ReadError{Op: "open", Path: w.path, Off: -1, Err: err})
			return nil
		}
	}
	p.bufIdx = r.bufIndex(p.buf)
	p.pathz = append([]byte(w.path), 0)
	if !r.prepChain(id) {
		return r.failed
	}
	if int(r.ring.Pending()) >= 2*r.opts.Batch || r.ring.Space() < 2 {
		if _, err := r.ring.Submit(0); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

// prepChain prepares the two linked entries of pending read id.
func (r *uringReader) prepChain(id uint32) bool {
	p := &r.pending[id]
	if r.ring.Space() < 2 {
		// A chain is prepared whole: a submission in its middle would cut its links.
		if _, err := r.ring.Submit(0); err != nil {
			r.fail(err)
			return false
		}
		if r.ring.Space() < 2 {
			r.fail(fmt.Errorf("no room for a chain of 2 entries in a ring of %d", r.ringEntries()))
			return false
		}
	}
	slot := uint32(fileTableSize) + id
	flags := uint32(unix.O_RDONLY | unix.O_NOCTTY | unix.O_NONBLOCK) // O_CLOEXEC is refused for a direct descriptor
	if p.direct {
		flags |= unix.O_DIRECT
	}
	rest := p.buf
	n, errno := r.opts.fault(p.req.whole.path, 0, len(rest), p.direct)
	rest = rest[:n]
	e := r.ring.SQE()
	e.PrepOpenatDirect(uring.ATFDCWD, &p.pathz[0], flags, 0, slot)
	e.Flags |= uring.SQEIOLink
	e.UserData = uint64(id) | stageOpen<<32
	e = r.ring.SQE()
	switch {
	case errno != 0:
		p.injected = errno // the read fails without reaching the file: a NOP stands in for it
		e.PrepNop()
	case p.bufIdx >= 0:
		e.PrepReadFixed(int32(slot), rest, 0, uint16(p.bufIdx))
		e.Flags |= uring.SQEFixedFile
	default:
		e.PrepReadDirect(slot, rest, 0)
	}
	e.UserData = uint64(id) | stageRead<<32
	p.chainLeft = 2
	return true
}

func (r *uringReader) ringEntries() uint32 {
	sq, _ := r.ring.Entries()
	return sq
}

// chainCompletion records one of the two completions of a chain; the last
// one settles the read.
func (r *uringReader) chainCompletion(id uint32, stage uint64, res int32) {
	p := &r.pending[id]
	if stage < uint64(len(p.res)) {
		p.res[stage] = res
	}
	if p.chainLeft--; p.chainLeft > 0 {
		return
	}
	path := p.req.whole.path
	open, read := p.res[stageOpen], p.res[stageRead]
	if p.injected != 0 && open >= 0 {
		read = -int32(p.injected)
	}
	p.injected = 0
	p.pathz = nil
	switch {
	case open < 0:
		errno := unix.Errno(-open)
		switch {
		case r.cancelled:
		case errno == unix.EINVAL && p.direct:
			// The file system refuses O_DIRECT (tmpfs, some FUSE): chain this
			// device's files buffered from now on; this one goes on its own descriptor.
			if r.noDirect == nil {
				r.noDirect = map[uint64]bool{}
			}
			r.noDirect[p.req.whole.id.dev] = true
			r.fallBack(id, "O_DIRECT refused at open (EINVAL)")
			return
		case errno == unix.EAGAIN || errno == unix.EINTR || errno == unix.EOPNOTSUPP:
			r.fallBack(id, "open: "+errno.Error())
			return
		}
		r.complete(id, openError(path, errno))
	case read < 0:
		errno := unix.Errno(-read)
		if (errno == unix.EINTR || errno == unix.EAGAIN) && !r.cancelled {
			r.fallBack(id, "read: "+errno.Error())
			return
		}
		r.complete(id, &ReadError{Op: "read", Path: path, Off: 0, Err: errno})
	default:
		p.done = int(read)
		switch {
		case p.done >= len(p.req.Buf), r.cancelled:
			r.complete(id, nil)
		case p.direct && p.done%Align != 0:
			r.complete(id, nil) // end of file: the file is shorter than at admission
		default:
			r.fallBack(id, fmt.Sprintf("short read (%d of %d bytes)", p.done, len(p.req.Buf)))
		}
	}
}

// openError is the error of a chained open that failed with errno: a path
// that names something other than a regular file is said so (a socket fails
// the open with ENXIO), as openRegular does.
func openError(path string, errno unix.Errno) error {
	var st unix.Stat_t
	if errno != unix.ENOENT && unix.Stat(path, &st) == nil && uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		return notRegular(path, modeOf(uint32(st.Mode)))
	}
	return &ReadError{Op: "open", Path: path, Off: -1, Err: errno}
}

// fallBack finishes chained read id on a descriptor of its own, from where
// the chain stopped.
func (r *uringReader) fallBack(id uint32, why string) {
	p := &r.pending[id]
	p.via, p.why = viaFallback, why
	r.separate(id, why)
}

// separate opens the file of whole-file read id the ordinary way and reads
// what is left of it through the descriptor; the reader closes it when the
// read completes.
func (r *uringReader) separate(id uint32, _ string) {
	p := &r.pending[id]
	w := p.req.whole
	f, err := openFile(w.path, &r.opts)
	if err != nil {
		r.complete(id, err)
		return
	}
	if f.id != w.id {
		f.Close()
		r.complete(id, &ReadError{Op: "open", Path: w.path, Off: -1, Err: ErrChanged})
		return
	}
	fh, b, err := f.descriptorFor(int64(p.done), p.req.Buf[p.done:])
	if err != nil {
		f.Close()
		r.complete(id, err)
		return
	}
	p.req.File, p.own = f, true
	p.buf = p.req.Buf[:p.done+len(b)]
	p.fd, p.fixed = int32(fh.Fd()), false
	p.direct = fh == f.f && f.direct
	p.bufIdx = r.bufIndex(p.buf)
	p.retries = 0
	r.prep(id)
}
