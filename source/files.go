package source

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Files is a dataset of whole files, one sample per file.
type Files struct {
	paths []string
	index []int // dataset index of each path ([Files.Select]); nil: its position
}

// NewFiles returns a dataset of the given files, in the given order.
func NewFiles(paths []string) *Files { return &Files{paths: slices.Clone(paths)} }

// Glob returns a dataset of the files matching the patterns, each pattern's
// matches sorted. A pattern that matches nothing is an error.
func Glob(patterns ...string) (*Files, error) {
	var paths []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("source: glob %q: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("source: glob %q matches no file", p)
		}
		slices.Sort(m)
		paths = append(paths, m...)
	}
	return &Files{paths: paths}, nil
}

// Paths returns the dataset's files in their base order.
func (d *Files) Paths() []string { return slices.Clone(d.paths) }

// Len returns the number of files.
func (d *Files) Len() int { return len(d.paths) }

// Path returns the i-th file of the base order (0 ≤ i < Len).
func (d *Files) Path(i int) string { return d.paths[i] }

// Samples starts an epoch over the files for one rank: Next returns one
// Sample per file whose single field is named after the file's extension.
// The order is the rank's [Share] of the epoch's order (every file of the
// epoch once across ranks, padded or cut to the same count on every rank),
// then the bounded shuffle; it does not depend on timing. Reads run on
// Workers readers with up to QueueDepth reads each in flight.
func (d *Files) Samples(opts Options) (Iterator[*Sample], error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	sh, start, err := d.start(r)
	if err != nil {
		return nil, err
	}
	it := &fileIter{d: d, r: r, share: sh, count: int(sh.Count), next: start, skip: newSkipper(r)}
	if r.ShuffleBuffer > 1 {
		// The bounded shuffle needs the rank's order up front.
		order := make([]int, sh.Count)
		for k := range order {
			order[k] = sh.At(int64(k))
		}
		it.order = shuffleRefs(order, r.ShuffleBuffer, r.sampleRNG())
	}
	backend := r.Reader.Backend
	if backend == "" {
		backend = IOStatus().Backend
	}
	workers := r.Workers
	if workers <= 0 {
		workers = defaultWorkers(backend)
	}
	it.chain, it.paths.Reason = chainFor(backend, &r.Reader)
	// Each worker holds up to QueueDepth reads in flight plus a short queue on
	// each side; the default pool covers that so it overflows only when the
	// consumer holds samples.
	queue := max(r.Reader.QueueDepth/4, 2)
	if r.Buffers == nil {
		pool, err := NewPool(workers*(r.Reader.QueueDepth+2*queue)+16, 256<<10)
		if err != nil {
			return nil, err
		}
		pool.SetOverflow(true) // samples may be held downstream: the Budget bounds memory, not the pool
		it.pool = pool
		r.Buffers = pool
		it.r.Buffers = pool
	}
	it.r.Reader.Buffers = r.Buffers
	// Probe the backend before starting goroutines so a forced but missing
	// io_uring is reported by Samples, not by the first Next.
	probeOpts := it.r.Reader
	probeOpts.Buffers = nil // registering buffers is the workers' job
	probe, err := NewReader(probeOpts)
	if err != nil {
		it.closePool()
		return nil, err
	}
	probe.Close()
	ctx, cancel := context.WithCancel(context.Background())
	it.cancel = cancel
	it.results = make([]chan fileResult, workers)
	it.waiting = make([]atomic.Pointer[string], workers)
	jobs := make([]chan fileJob, workers)
	for i := range jobs {
		jobs[i] = make(chan fileJob, queue)
		it.results[i] = make(chan fileResult, queue)
	}
	it.wg.Add(1 + workers)
	go func() {
		defer it.wg.Done()
		it.admit(ctx, jobs)
	}()
	for i := range workers {
		go func() {
			defer it.wg.Done()
			it.work(ctx, jobs[i], it.results[i], &it.waiting[i])
		}()
	}
	return it, nil
}

type fileJob struct {
	k     int
	idx   int // dataset index of the file
	path  string
	size  int64 // bytes to read: the size at open, or at the stat of a chained read
	f     *File // nil for a chained read, which the reader opens itself
	whole *wholeFile
	buf   Buffer
	err   error
}

type fileResult struct {
	fileJob
	n    int
	done bool
}

type fileIter struct {
	d       *Files
	r       resolved
	share   Share
	order   []int // the rank's order through the shuffle buffer; nil: share.At
	count   int   // entries in the rank's order
	next    int
	skip    skipper
	pool    *Pool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	results []chan fileResult
	failed  atomic.Pointer[error] // a worker's reader failed
	chain   bool                  // small files are read by path, chained (see chainFor)
	paths   ReadPaths             // Reason only; the counts are below
	nChain  atomic.Int64
	nFell   atomic.Int64
	nSep    atomic.Int64
	fellWhy atomic.Pointer[string]
	waiting []atomic.Pointer[string] // per worker: the file whose read it waits for, nil when none
	err     error
	closed  bool
}

// admit opens files and takes permit, budget and buffer in consumption
// order, so the sample Next needs next is always admitted before later ones.
func (it *fileIter) admit(ctx context.Context, jobs []chan fileJob) {
	defer func() {
		for _, j := range jobs {
			close(j)
		}
	}()
	w := len(jobs)
	for k := it.next; k < it.count; k++ {
		e := it.entry(k)
		job := fileJob{k: k, path: it.d.paths[e], idx: it.d.indexOf(e)}
		if it.chain {
			job.whole, job.err = statWhole(job.path)
		}
		if job.whole == nil && job.err == nil {
			job.f, job.err = openFile(job.path, &it.r.Reader)
		}
		if job.err == nil {
			if job.whole != nil {
				job.size = job.whole.size
			} else {
				job.size = job.f.Size
			}
			job.buf, job.err = it.admitRead(ctx, job.size)
			if job.err != nil {
				job.closeFile()
				job.whole = nil
				if ctx.Err() != nil {
					return
				}
			}
		}
		select {
		case jobs[k%w] <- job:
		case <-ctx.Done():
			job.release(it.r.Budget)
			return
		}
	}
}

func (it *fileIter) admitRead(ctx context.Context, size int64) (Buffer, error) {
	if it.r.Gate != nil {
		if err := it.r.Gate.Acquire(ctx); err != nil {
			return nil, err
		}
	}
	if it.r.Budget != nil && size > 0 {
		if err := it.r.Budget.Acquire(ctx, size); err != nil {
			if it.r.Gate != nil {
				it.r.Gate.Release()
			}
			return nil, err
		}
	}
	b, err := it.r.Buffers.Alloc(ctx, int(size))
	if err != nil {
		if it.r.Gate != nil {
			it.r.Gate.Release()
		}
		if it.r.Budget != nil && size > 0 {
			it.r.Budget.Release(size)
		}
		return nil, err
	}
	return b, nil
}

// release undoes the admission of a job that will not be returned.
func (j *fileJob) release(budget Budget) {
	if j.buf != nil {
		j.buf.Release()
		j.buf = nil
		j.releaseBudget(budget)
	}
	j.closeFile()
}

// releaseBudget returns the job's bytes of budget (taken with its buffer).
func (j *fileJob) releaseBudget(budget Budget) {
	if budget != nil && j.size > 0 {
		budget.Release(j.size)
	}
}

func (j *fileJob) closeFile() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// work reads its share of the jobs on its own reader and passes the results
// on in job order.
func (it *fileIter) work(ctx context.Context, jobs <-chan fileJob, out chan<- fileResult, waiting *atomic.Pointer[string]) {
	defer close(out)
	opts := it.r.Reader
	reader, err := NewReader(opts)
	var fifo []*fileResult
	broken := false // the reader failed: reads may still be in flight
	defer func() {
		if reader != nil {
			if c, ok := reader.(canceller); ok && !broken && reader.InFlight() > 0 && c.Cancel() {
				// Cancelled: reap what is in flight here, so that Waiting
				// names only the reads the kernel still holds.
				comps := make([]Completion, opts.QueueDepth)
				for reader.InFlight() > 0 {
					waitingFor(waiting, fifo)
					n, err := reader.Reap(context.Background(), comps, 1)
					if err != nil {
						break
					}
					for _, c := range comps[:n] {
						c.Tag.(*fileResult).done = true // its buffer is the kernel's no longer
					}
					clear(comps[:n])
				}
			}
			waitingFor(waiting, fifo)
			reader.Close() // cancels and waits for reads in flight (unless broken)
		}
		waiting.Store(nil)
		for _, r := range fifo {
			if broken && !r.done && r.buf != nil {
				// The kernel may still write into this buffer: leave it out of the pool.
				r.buf = nil
				r.releaseBudget(it.r.Budget)
			}
			r.release(it.r.Budget)
		}
		for j := range jobs {
			j.release(it.r.Budget)
		}
	}()
	comps := make([]Completion, opts.QueueDepth)
	reapMax := len(comps)
	if reader != nil && reader.Backend() == BackendPread {
		// pread reads in Reap: one at a time, so a read the storage is slow to
		// answer does not hold back the ones done before it.
		reapMax = 1
	}
	// revoked is closed when the provider asks the readers to unregister its
	// regions (Revocable): done here once no read is in flight, then nil.
	var revoked <-chan struct{}
	rev, _ := opts.Buffers.(Revocable)
	if fr, ok := reader.(fixedReader); ok && rev != nil && fr.FixedBuffers() {
		revoked = rev.Revoked()
	}
	// idle is revoked while no read is in flight (nil otherwise): a select on it
	// unregisters.
	idle := func() <-chan struct{} {
		if revoked == nil || reader.InFlight() > 0 {
			return nil
		}
		return revoked
	}
	unregister := func() {
		revoked = nil
		if ok, err := reader.(fixedReader).UnregisterFixed(); ok && err == nil {
			rev.Unregistered()
		}
	}
	open := true
	for {
		for len(fifo) > 0 && fifo[0].done {
			select {
			case out <- *fifo[0]:
				fifo = fifo[1:]
			case <-idle():
				unregister()
			case <-ctx.Done():
				return
			}
		}
		if !open && len(fifo) == 0 {
			return
		}
		inflight := 0
		if reader != nil {
			inflight = reader.InFlight()
		}
		if open && inflight < opts.QueueDepth {
			var job fileJob
			var ok, got bool
			if inflight == 0 {
				select {
				case job, ok = <-jobs:
					got = true
				case <-idle():
					unregister()
					continue
				case <-ctx.Done():
					return
				}
			} else {
				select {
				case job, ok = <-jobs:
					got = true
				default:
				}
			}
			if got {
				if !ok {
					open = false
					continue
				}
				res := &fileResult{fileJob: job}
				fifo = append(fifo, res)
				switch {
				case job.err != nil:
					res.done = true
				case err != nil:
					res.err, res.done = err, true
				default:
					if err := reader.Submit(Request{File: job.f, whole: job.whole, Buf: job.buf.Bytes(), Permit: it.r.Gate, Tag: res}); err != nil {
						res.err, res.done = err, true
						if it.r.Gate != nil {
							it.r.Gate.Release()
						}
					}
				}
				continue
			}
		}
		if inflight == 0 {
			continue
		}
		waitingFor(waiting, fifo)
		n, err := reader.Reap(ctx, comps[:reapMax], 1)
		if err == nil {
			waiting.Store(nil) // else still waited for, by Close below
		}
		if err != nil {
			// Cancelled, or the reader failed. Either way stop: results not
			// yet done still have reads in flight, so they are cleaned up
			// here (after the reader has waited for them), never handed on.
			// Next reports the stop.
			if broken = ctx.Err() == nil; broken {
				it.failed.CompareAndSwap(nil, &err)
			}
			return
		}
		for _, c := range comps[:n] {
			res := c.Tag.(*fileResult)
			res.n, res.err, res.done = c.N, c.Err, true
			it.tally(c)
			if res.err == nil && int64(c.N) != res.size {
				res.err = &ReadError{Op: "read", Path: res.path, Off: int64(c.N), Err: fmt.Errorf("file ended after %d of %d bytes", c.N, res.size)}
			}
		}
		clear(comps[:n])
	}
}

// waitingFor records the oldest file of fifo whose read is not done.
func waitingFor(waiting *atomic.Pointer[string], fifo []*fileResult) {
	for _, r := range fifo {
		if !r.done {
			waiting.Store(&r.path)
			return
		}
	}
	waiting.Store(nil)
}

func (it *fileIter) Next(ctx context.Context) (*Sample, error) {
	for {
		if it.err != nil {
			return nil, it.err
		}
		if it.closed {
			return nil, ErrClosed
		}
		if it.next >= it.count {
			return nil, io.EOF
		}
		var res fileResult
		var ok bool
		select {
		case res, ok = <-it.results[it.next%len(it.results)]:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if !ok || res.k != it.next {
			it.err = fmt.Errorf("source: file reader stopped before entry %d (%s)", it.next, it.d.paths[it.entry(it.next)])
			if e := it.failed.Load(); e != nil {
				it.err = fmt.Errorf("%w: %w", it.err, *e)
			}
			return nil, it.err
		}
		it.next++
		it.skip.seen()
		if res.err != nil {
			res.release(it.r.Budget)
			if err := it.skip.handle(res.err, Skipped{Path: res.path, What: "the file", Off: -1, Lost: -1}); err != nil {
				it.err = err
				return nil, err
			}
			continue
		}
		res.closeFile()
		s := &Sample{Key: res.path, Shard: res.path, Index: int64(res.idx), Epoch: int64(it.r.Epoch), bufs: []Buffer{res.buf}, budget: it.r.Budget, bytes: res.size}
		s.Fields = []Field{{Name: extOf(res.path), Data: res.buf.Bytes()[:res.n]}}
		return s, nil
	}
}

// extOf returns the extension of path's base name without the dot: "jpg" for "a/b.c.jpg".
func extOf(path string) string {
	e := filepath.Ext(path)
	return strings.TrimPrefix(e, ".")
}

// entry returns the base-order index of the rank's k-th entry.
func (it *fileIter) entry(k int) int {
	if it.order != nil {
		return it.order[k]
	}
	return it.share.At(int64(k))
}

func (it *fileIter) Position() Position {
	p := it.r.position()
	p.Samples, p.Shuffle = len(it.d.paths), it.r.Shuffle
	if it.order != nil {
		p.Next = int64(it.next)
		p.Consumed = int64(it.next) * int64(it.r.world)
	} else {
		p.Consumed = it.share.Consumed(int64(it.next))
	}
	return p
}

func (it *fileIter) Skipped() int64 { return it.skip.skipped }

// Waiting returns the files whose reads the workers are waiting for now,
// including reads that Close has cancelled and still waits for.
func (it *fileIter) Waiting() []string {
	var out []string
	for i := range it.waiting {
		if p := it.waiting[i].Load(); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

func (it *fileIter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.cancel()
	done := make(chan struct{})
	go func() {
		for _, ch := range it.results {
			for r := range ch {
				r.release(it.r.Budget)
			}
		}
		close(done)
	}()
	it.wg.Wait()
	<-done
	return it.closePool()
}

func (it *fileIter) closePool() error {
	if it.pool == nil {
		return nil
	}
	return it.pool.Close()
}
