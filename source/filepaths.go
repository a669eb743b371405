package source

import "log/slog"

// ReadPaths counts how a file dataset's reads went, so that a run can say
// which path its small files took (see [Status.Chain]).
type ReadPaths struct {
	// Chained files were each read with one chained io_uring submission
	// (open into a direct descriptor linked to the read).
	Chained int64
	// FellBack files were submitted chained and finished on a descriptor
	// of their own (a short read, EINTR or EAGAIN, O_DIRECT refused at
	// open); FellBackWhy says why for the first of them.
	FellBack    int64
	FellBackWhy string
	// Separate files were opened, read and closed with calls of their own.
	Separate int64
	// Reason says why the dataset does not chain its reads; "" when it does.
	Reason string
}

// ReadPathReporter is implemented by iterators that count how their files
// were read (file datasets).
type ReadPathReporter interface {
	// ReadPaths returns the counts so far.
	ReadPaths() ReadPaths
}

// ReadPaths returns how the files read so far were read.
func (it *fileIter) ReadPaths() ReadPaths {
	p := it.paths
	p.Chained, p.FellBack, p.Separate = it.nChain.Load(), it.nFell.Load(), it.nSep.Load()
	if w := it.fellWhy.Load(); w != nil {
		p.FellBackWhy = *w
	}
	return p
}

// tally records how a completed read went.
func (it *fileIter) tally(c Completion) {
	switch c.via {
	case viaChain:
		it.nChain.Add(1)
	case viaFallback:
		it.nFell.Add(1)
		why := c.why
		if it.fellWhy.CompareAndSwap(nil, &why) {
			// Said once per iterator: a fallback costs a descriptor's calls per
			// file, and a file system that forces it on every file should be seen.
			logger := it.r.Reader.Logger
			if logger == nil {
				logger = slog.Default()
			}
			path := ""
			if r, ok := c.Tag.(*fileResult); ok {
				path = r.path
			}
			logger.Warn("psiflow: a chained small-file read was finished on a descriptor of its own (counted in ReadPaths; later ones are not logged)", "path", path, "reason", why)
		}
	default:
		it.nSep.Add(1)
	}
}

// chainFor says whether a dataset read by backend with opts reads its
// small files by path, chained, and why not when it does not.
func chainFor(backend Backend, opts *ReaderOptions) (bool, string) {
	st := IOStatus()
	switch {
	case opts.SeparateCalls:
		return false, "ReaderOptions.SeparateCalls"
	case backend != BackendURing:
		return false, "the " + string(backend) + " backend reads through descriptors"
	case !st.Chain:
		return false, st.ChainReason
	case opts.DropCache && !opts.Direct:
		// The page cache is dropped through the descriptor once read.
		return false, "DropCache without Direct (fadvise needs a descriptor)"
	}
	return true, ""
}
